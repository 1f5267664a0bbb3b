"""`burnin stalls`: the node whose counters stopped first, named only when the records can tell."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from burnin.cli.main import main
from burnin.watch.culprit import episodes, judge, read_stalls

NOW = time.time()
T0 = NOW - 3600


def stall(node: str, changed_after: float | None, changed_at: float | None, *, found: float | None = None,
          watched: float = T0 - 600) -> dict[str, Any]:
    """A journal entry as the watch writes it (burnin.watch.stallwatch.stall_details)."""
    since = changed_at if changed_at is not None else watched
    found = found if found is not None else since + 300
    return {"node": node, "kind": "stall", "check": "NCCL-05", "action": "record", "detected_at": found,
            "stall": {"node": node, "since": since, "found_at": found, "counters_changed_at": changed_at,
                      "counters_changed_after": changed_after, "watched_since": watched, "after_s": 300.0,
                      "interval_s": 10.0, "policy": "alert", "gpus": []}}


def ended(entry: dict[str, Any], at: float | None) -> dict[str, Any]:
    """The stall-ended entry the watch writes when ``entry``'s stall is over."""
    figures = {**entry["stall"], "ended_at": at, "why": "IB traffic again"}
    return {"node": entry["node"], "kind": "stall-ended", "check": "NCCL-05", "action": "record", "detected_at": at,
            "stall": figures}


def field(entry: dict[str, Any], **figures: Any) -> dict[str, Any]:
    """``entry`` with some of its stall figures replaced (a forged or damaged record)."""
    return {**entry, "stall": {**entry["stall"], **figures}}


def journal(tmp_path: Path, node: str, *entries: dict[str, Any], extra: str = "") -> Path:
    path = tmp_path / node / "events.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    other = {"node": node, "kind": "xid", "action": "record", "detected_at": T0 - 900, "check": "GPU-04"}
    path.write_text("".join(json.dumps(e) + "\n" for e in (other, *entries)) + extra)
    return path


def verdicts(*paths: Path, margin: float = 1.0) -> list[tuple[str | None, str]]:
    records, doubts = [], []
    for path in paths:
        found, doubted, _ = read_stalls(path.read_text().splitlines(), str(path), NOW)
        records += found
        doubts += doubted
    return [(e.culprit, e.verdict) for e in (judge(x, doubts, margin) for x in episodes(records))]


def test_the_node_whose_counters_stopped_first_is_named(tmp_path: Path) -> None:
    paths = [journal(tmp_path, "sim02", stall("sim02", T0 - 10, T0)),  # the stuck rank's node
             journal(tmp_path, "sim01", stall("sim01", T0 + 20, T0 + 30)),
             journal(tmp_path, "sim03", stall("sim03", T0 + 15, T0 + 25)),
             journal(tmp_path, "sim04")]  # no stall: its counters kept moving, or it ran no job
    ((culprit, verdict),) = verdicts(*paths)
    assert culprit == "sim02" and "at least 15.0 s before any other node's" in verdict


@pytest.mark.parametrize(("second", "words"), [
    (stall("sim01", T0 - 5, T0 + 5), "sim02 and sim01 stopped too close together"),  # overlapping intervals
    (stall("sim01", T0 + 0.5, T0 + 10), "stopped too close together"),  # within the margin (clocks differ)
    (stall("sim01", None, None, watched=T0 + 60), "the counters of sim01 never moved while watched"),
])
def test_nobody_is_named_when_the_records_cannot_tell(tmp_path: Path, second: dict[str, Any], words: str) -> None:
    paths = [journal(tmp_path, "sim02", stall("sim02", T0 - 10, T0)), journal(tmp_path, "sim01", second)]
    ((culprit, verdict),) = verdicts(*paths)
    assert culprit is None and words in verdict


def test_a_node_never_seen_moving_is_named_when_its_watch_began_before_the_others_stopped(tmp_path: Path) -> None:
    paths = [journal(tmp_path, "sim02", stall("sim02", None, None, watched=T0 - 100)),
             journal(tmp_path, "sim01", stall("sim01", T0 - 10, T0))]
    assert verdicts(*paths)[0][0] == "sim02"  # stopped at or before T0 - 100: before sim01's (T0 - 10, T0]


def test_one_node_alone_and_separate_episodes(tmp_path: Path) -> None:
    later = T0 + 2000
    first = stall("sim01", T0 - 10, T0)
    paths = [journal(tmp_path, "sim01", first, ended(first, T0 + 400), stall("sim01", later - 10, later)),
             journal(tmp_path, "sim02", stall("sim02", later + 20, later + 30))]
    assert verdicts(*paths) == [(None, "only sim01 stalled: nothing to compare it with"),
                                ("sim01", "likely culprit: sim01 (its counters stopped first, at least 20.0 s "
                                          "before any other node's)")]


@pytest.mark.parametrize(("forged", "why"), [
    ('{"node": "sim02", "kind": "stall", "stall": {"node": "sim02", "found_at"\n', "not a JSON object"),
    (json.dumps({**stall("sim02", T0 - 10, T0), "node": "sim09"}) + "\n", "the entry names node 'sim09'"),
    (json.dumps(stall("sim02", T0, T0 - 10)) + "\n", "times out of order"),
    (json.dumps(stall("sim02", T0 - 10, T0, found=NOW + 3 * 86400)) + "\n", "is in the future"),
    (json.dumps({"node": "sim02", "kind": "stall"}) + "\n", "without its node or its 'stall' figures"),
    (json.dumps(stall("sim07", T0 - 10, T0)) + "\n", "names 2 nodes (sim02, sim07)"),
    (json.dumps({"node": "sim02", "kind": "stall-ended", "stall": {}}) + "\n", "a stall-ended entry without"),
    (json.dumps(ended(stall("sim02", T0 - 10, T0), None)) + "\n", "a stall-ended entry without"),
    (json.dumps(field(stall("sim02", T0 - 10, T0), watched_since=None)) + "\n", "must be times"),
    (json.dumps(field(stall("sim02", T0 - 10, T0), counters_changed_after=None)) + "\n", "both null"),
    (json.dumps(field(stall("sim02", T0 - 10, T0), counters_changed_at="soon")) + "\n", "both null"),
    (json.dumps(stall("sim02", T0, T0)) + "\n", "times out of order"),
    (json.dumps(field(stall("sim02", T0 - 10, T0), found_at=T0 - 1)) + "\n", "times out of order"),
])
def test_forged_or_missing_data_names_nobody_and_says_so(tmp_path: Path, forged: str, why: str) -> None:
    paths = [journal(tmp_path, "sim02", stall("sim02", T0 - 10, T0), extra=forged),
             journal(tmp_path, "sim01", stall("sim01", T0 + 20, T0 + 30))]
    results = verdicts(*paths)
    assert results and all(culprit is None for culprit, _ in results)
    assert why in results[0][1] and "could not be trusted" in results[0][1]


def test_the_command_reports_episodes_as_text_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one = journal(tmp_path, "sim02", stall("sim02", T0 - 10, T0))
    two = journal(tmp_path, "sim01", stall("sim01", T0 + 20, T0 + 30))
    assert main(["stalls", str(one.parent), str(two)]) == 0
    out = capsys.readouterr().out
    assert "burnin stalls: 2 journals, 2 stalls in 1 episodes" in out and "likely culprit: sim02" in out
    assert "sim02: counters last moved between" in out and "still on (or its watch stopped)" in out
    assert main(["stalls", str(one), str(two), "--json", "-", "--since", "10m"]) == 0  # found an hour ago: none
    assert json.loads(capsys.readouterr().out)["episodes"] == []
    assert main(["stalls", str(one), str(one.parent)]) == 0  # one node's journal twice is not two nodes
    assert "only sim02 stalled" in capsys.readouterr().out
    copy = tmp_path / "copy.jsonl"
    copy.write_text(one.read_text())
    assert main(["stalls", str(one), str(copy), str(two)]) == 0  # two journals of one node: which is true?
    out = capsys.readouterr().out
    assert "node sim02 also has journal" in out and "likely culprit" not in out


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stalls", str(tmp_path / "missing.jsonl")]) == 2
    assert "missing.jsonl: no such file" in capsys.readouterr().err
    other = tmp_path / "notes.txt"
    other.write_text("hello\n")
    assert main(["stalls", str(other)]) == 2
    assert "not a burnin watch journal" in capsys.readouterr().err
    assert main(["stalls", str(other), "--margin", "-1"]) == 2


def test_named_only_before_every_other_node_by_more_than_the_margin(tmp_path: Path) -> None:
    three = [journal(tmp_path, "sim02", stall("sim02", T0 - 10, T0)),
             journal(tmp_path, "sim01", stall("sim01", T0 + 20, T0 + 30)),
             journal(tmp_path, "sim03", stall("sim03", T0 - 5, T0 + 5))]  # before sim01, not before sim03
    assert verdicts(*three)[0][0] is None
    exact = [journal(tmp_path, "sim02", stall("sim02", T0 - 10, T0)),
             journal(tmp_path, "sim01", stall("sim01", T0 + 1, T0 + 10))]  # exactly the margin: not more
    assert verdicts(*exact)[0][0] is None
    assert verdicts(*exact, margin=0.5)[0][0] == "sim02"


def test_a_stall_that_ended_as_another_began_is_one_episode(tmp_path: Path) -> None:
    first = stall("sim01", T0 - 10, T0)
    paths = [journal(tmp_path, "sim01", first, ended(first, T0 + 400)),
             journal(tmp_path, "sim02", stall("sim02", T0 + 390, T0 + 400))]
    assert verdicts(*paths)[0][0] == "sim01"
