"""The checkpoint is verified against its logs before a soak goes on from it or is judged again (issue 19 case 6).

An edit that would turn a node that failed into one that passed (done, no events), a changed or garbage log
line, or a state that is no soak checkpoint is refused (UsageError: exit 2, one line naming the node or line),
never judged. A seal recomputed by hand does not help either: the state is recounted against its samples.
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from burnin.errors import UsageError
from burnin.gate.decide import CheckOutcome
from burnin.soak import acceptance
from burnin.soak.state import STATE_FILE, NodeProgress, SoakState, Store, _digest

from .test_scheduler import HOUR, soak

Edit = Callable[[dict[str, Any]], None]


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished 4-hour soak of n1 and n2, n2 failed by an Xid at +00:50:00."""
    folder = tmp_path_factory.mktemp("soak")
    run, _, _ = soak(folder, xid_at={"n2": 3000.0})
    run.run()
    assert run.state.nodes["n2"].status == "failed"
    return folder


@pytest.fixture
def soaked(finished: Path, tmp_path: Path) -> Path:
    """A copy of the finished soak's folder, for one test to change."""
    shutil.copytree(finished, tmp_path / "soak", symlinks=True)
    return tmp_path / "soak"


def _edit(folder: Path, change: Edit, *, reseal: bool = False) -> None:
    path = folder / STATE_FILE
    doc = json.loads(path.read_text())
    change(doc)
    if reseal:  # as someone who knows the format would: the seals agree again
        doc.pop("seal", None)
        if isinstance(doc["nodes"], dict):
            entries = {n: {k: v for k, v in e.items() if k != "seal"} if isinstance(e, dict) else e
                       for n, e in doc["nodes"].items()}
            doc["nodes"] = {n: {**e, "seal": _digest(e)} if isinstance(e, dict) else e for n, e in entries.items()}
        doc["seal"] = _digest(doc)
    path.write_text(json.dumps(doc))


def _passed(doc: dict[str, Any]) -> None:
    """The Xid node's entry made to read 'done, nothing happened'."""
    doc["nodes"]["n2"].update(status="done", events=[], end_t=None)


def test_an_unchanged_checkpoint_loads(soaked: Path) -> None:
    state = Store(soaked).load()
    assert state.finished and state.nodes["n2"].fatal and state.nodes["n1"].digests


def test_an_edited_node_entry_is_refused_naming_the_node(soaked: Path) -> None:
    _edit(soaked, _passed)
    with pytest.raises(UsageError, match=r"does not match what the soak wrote \(node n2's entry was changed\)"):
        Store(soaked).load()


def test_a_resealed_edit_is_caught_by_the_recount(soaked: Path) -> None:
    _edit(soaked, _passed, reseal=True)
    with pytest.raises(UsageError, match=r"for node n2: it is marked done after a whole soak \(to \+04:00:00\), but "
                                         r"its last sample is at \+00:50:00"):
        Store(soaked).load()


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d["nodes"]["n2"].update(events=[]), "for node n2: it is marked failed without the event"),
    (lambda d: d["nodes"]["n1"].update(samples=3), r"for node n1: samples.jsonl holds 25 records of it, the state "
                                                   "counts 3"),
    (lambda d: d["nodes"]["n1"]["digests"].update({"samples.jsonl": "0" * 64}),
     "for node n1: its records in samples.jsonl are not the ones the soak wrote"),
    (lambda d: d["nodes"]["n1"].update(status="held"), "for node n1: it is marked held back by acceptance, yet it "
                                                       "was sampled"),
    (lambda d: d["nodes"].pop("n1"), "it holds records of 'n1', a node the soak does not have"),
    (lambda d: d.update(duration_s=math.nan), "unreadable \\(duration_s is nan, not a finite number\\)"),
    (lambda d: d.update(duration_s=1e30), "unreadable \\(duration_s 1e\\+30 is outside"),
    (lambda d: d.update(nodes=[]), "unreadable \\(nodes is not a table of nodes\\)"),
    (lambda d: d["nodes"]["n1"].update(status="passed"), "unreadable \\(status 'passed'"),
])
def test_resealed_nonsense_is_refused(soaked: Path, change: Edit, message: str) -> None:
    _edit(soaked, change, reseal=True)
    with pytest.raises(UsageError, match=message):
        Store(soaked).load()


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d.update(duration_s=math.nan), r"its totals and settings was changed"),
    (lambda d: d.update(nodes=[]), r"its node table was changed"),
    (lambda d: d.update(version=2), "is version 2: this burnin resumes version 3 only"),
])
def test_unsealed_edits_are_refused(soaked: Path, change: Edit, message: str) -> None:
    _edit(soaked, change)
    with pytest.raises(UsageError, match=message):
        Store(soaked).load()


@pytest.mark.parametrize("text", ["[]", "null", "3", '"x"', "{", ""])
def test_a_state_that_is_no_checkpoint_is_refused(tmp_path: Path, text: str) -> None:
    (tmp_path / STATE_FILE).write_text(text)
    with pytest.raises(UsageError, match=f"--resume {tmp_path}: {STATE_FILE} (is not a soak checkpoint|unreadable)"):
        Store(tmp_path).load()


def _replace_line(path: Path, number: int, text: str) -> None:
    lines = path.read_text().splitlines(keepends=True)
    lines[number - 1] = text
    path.write_text("".join(lines))


@pytest.mark.parametrize(("text", "message"), [
    ("garbage\n", r"samples.jsonl line 3 is not a JSON record"),
    ("[1, 2]\n", r"samples.jsonl line 3 is not a record of a node"),
    ('{"node": 7}\n', r"samples.jsonl line 3 is not a record of a node"),
])
def test_a_garbage_sample_line_is_refused_naming_it(soaked: Path, text: str, message: str) -> None:
    _replace_line(soaked / "samples.jsonl", 3, text)
    with pytest.raises(UsageError, match=message):
        Store(soaked).load()


def test_a_changed_sample_line_is_refused_naming_its_node(soaked: Path) -> None:
    path = soaked / "samples.jsonl"
    line = json.loads(path.read_text().splitlines()[2])
    line["stage"] = "edited"
    _replace_line(path, 3, json.dumps(line, separators=(",", ":")) + "\n")
    with pytest.raises(UsageError, match=f"for node {line['node']}: its records in samples.jsonl are not the ones"):
        Store(soaked).load()


def test_a_record_that_does_not_read_is_a_usage_error(tmp_path: Path) -> None:
    store = Store(tmp_path)
    state = SoakState(command={}, duration_s=HOUR, interval_s=60.0, nodes={"n1": NodeProgress("n1", samples=1)})
    store.append(state, "samples.jsonl", [{"node": "n1", "t": "soon"}])
    with pytest.raises(UsageError, match=r"samples\.jsonl line 1 does not read as a record"):
        store.samples(state)


def test_acceptance_verdicts_are_held_to_their_digest(tmp_path: Path) -> None:
    folder = tmp_path / acceptance.ACCEPTANCE_DIR
    folder.mkdir()
    rows = [{"node": "n1", "check": "IB-01", "status": "pass", "reason": "", "measured": "", "expected": "",
             "test": "test_ib[n1]", "suite": "node", "duration_s": 0.1, "extra": 1}]
    (folder / acceptance.VERDICTS).write_text(json.dumps(rows))
    state = SoakState(command={}, duration_s=HOUR, interval_s=60.0, nodes={})
    assert acceptance.outcomes(state, tmp_path) == []  # acceptance did not run
    state.acceptance = acceptance.digest(folder / acceptance.VERDICTS)
    assert acceptance.outcomes(state, tmp_path) == [CheckOutcome("n1", "IB-01", "pass", test="test_ib[n1]",
                                                                 suite="node", duration_s=0.1)]
    rows[0]["status"] = "fail"
    (folder / acceptance.VERDICTS).write_text(json.dumps(rows))
    with pytest.raises(UsageError, match="does not match the soak's checkpoint"):
        acceptance.outcomes(state, tmp_path)
    (folder / acceptance.VERDICTS).unlink()
    with pytest.raises(UsageError, match="unreadable"):
        acceptance.outcomes(state, tmp_path)


@pytest.mark.parametrize(("change", "loads"), [
    (lambda d: d.update(duration_s=0), False),
    (lambda d: d.update(duration_s=0.5), True),
    (lambda d: d.update(duration_s=30 * 86400.0), True),
    (lambda d: d.update(interval_s=0), False),
    (lambda d: d.update(interval_s=0.5), True),
])
def test_the_bounds_a_checkpoint_is_read_within(soaked: Path, change: Edit, loads: bool) -> None:
    _edit(soaked, change, reseal=True)
    if loads:
        Store(soaked).load()
    else:
        with pytest.raises(UsageError, match=r"unreadable \((duration_s|interval_s)"):
            Store(soaked).load()


def test_a_node_table_with_an_entry_that_is_no_node_is_refused(soaked: Path) -> None:
    _edit(soaked, lambda d: d["nodes"].update(n3=5), reseal=True)
    with pytest.raises(UsageError, match="node n3's entry was changed"):
        Store(soaked).load()
    doc = json.loads((soaked / STATE_FILE).read_text())
    with pytest.raises(ValueError, match="nodes is not a table of nodes"):
        SoakState.from_json(doc)


def test_a_held_node_and_the_acceptance_digest_survive_a_save_and_load(tmp_path: Path) -> None:
    store = Store(tmp_path)
    state = SoakState(command={}, duration_s=HOUR, interval_s=60.0, now=HOUR, finished=True, acceptance="ab" * 32,
                      nodes={"n1": NodeProgress("n1", status="held", held="the node was not soaked: acceptance "
                                                                            "rejected it (failed IB-01)")})
    store.save(state)
    loaded = store.load()  # never sampled, never soaked: nothing to recount it against
    assert loaded.acceptance == "ab" * 32 and loaded.nodes["n1"].held.endswith("(failed IB-01)")
    state.acceptance = None
    store.save(state)
    assert store.load().acceptance is None
