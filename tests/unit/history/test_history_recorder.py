"""The run's recorder, driven as pytest drives it: node-by-node commits, the end from gate.json, and a history
that fails mid-way costing nothing but one warning."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from types import SimpleNamespace

import pytest

from burnin.history.query import node_states, runs
from burnin.history.recorder import RunRecorder, recording
from burnin.history.store import Store


def _report(when: str, node: str, check: str, status: str = "pass", measured: str = "") -> SimpleNamespace:
    return SimpleNamespace(when=when, user_properties=[("node", node), ("check", check), ("measured", measured),
                                                      ("expected", "x"), ("verdict", status), ("reason", "")])


def _test(recorder: RunRecorder, node: str, check: str, status: str = "pass", measured: str = "") -> None:
    for when in ("setup", "call", "teardown"):
        recorder.pytest_runtest_logreport(_report(when, node, check, status, measured))


def _committed(path: Path) -> list[tuple[str, str]]:
    db = sqlite3.connect(path)  # another connection: only what was committed
    rows = db.execute("SELECT n.name, c.name FROM verdicts v JOIN node_names n ON n.id = v.node "
                      "JOIN check_names c ON c.id = v.check_id ORDER BY n.name, c.name").fetchall()
    db.close()
    return rows


def test_a_nodes_verdicts_are_committed_when_the_next_node_is_set_up(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    recorder = RunRecorder.start(path, kind="run", out_dir=tmp_path, topology="t", nodes=["n1", "n2"])
    _test(recorder, "n1", "GPU-10")
    _test(recorder, "n1", "NCCL-03", measured="362.0 GB/s")
    assert _committed(path) == []
    recorder.pytest_runtest_logreport(_report("setup", "n2", "GPU-10"))
    assert _committed(path) == [("n1", "GPU-10"), ("n1", "NCCL-03")]
    recorder.pytest_runtest_logreport(_report("teardown", "n2", "GPU-10", "fail"))
    recorder.pytest_runtest_logreport(SimpleNamespace(when="teardown", user_properties=[("x", 1)]))  # no node test
    recorder.pytest_runtest_logreport(SimpleNamespace(when="teardown", user_properties=[("node", "n2")]))
    recorder.finish(tmp_path)  # no gate.json: the suites never ended
    assert _committed(path) == [("n1", "GPU-10"), ("n1", "NCCL-03"), ("n2", "GPU-10")]
    with Store(path) as store:
        run = runs(store)[0]
        assert run.interrupted and run.finished is not None
        value = store.db.execute("SELECT value FROM verdicts WHERE value IS NOT NULL").fetchall()
        assert value == [(362.0,)]


def test_the_end_takes_the_gate_and_any_verdict_not_yet_recorded(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    (tmp_path / "gate.json").write_text(json.dumps({
        "nodes": {"n1": {"admitted": True, "failed": [], "incomplete": [], "reasons": []},
                  "n2": {"admitted": True, "failed": ["GPU-10"], "incomplete": [], "reasons": ["GPU-10 down"]},
                  "n3": "forged"},
        "partial": True, "selection": {"node_tests": 3}}))
    (tmp_path / "verdicts.json").write_text(json.dumps([
        {"node": "n1", "check": "GPU-10", "status": "pass"}, {"node": "n2", "check": "GPU-10", "status": "fail"},
        {"node": "n2", "check": "IB-02", "status": "??"}, "forged"]))
    with recording(tmp_path, nodes=["n1", "n2"], topology="t", path=path) as recorder:
        _test(recorder, "n1", "GPU-10")
    with Store(path) as store:
        run = runs(store)[0]
        assert run.partial and not run.interrupted and run.state == "partial"
        states = node_states(store, run)
        assert states["n1"].admitted and not states["n2"].admitted  # admitted with a failed check: not admitted
        assert states["n2"].failed == ["GPU-10"] and "n3" not in states
        statuses = dict(store.db.execute("SELECT c.name, v.status FROM verdicts v JOIN check_names c "
                                         "ON c.id = v.check_id WHERE v.node = 2"))
        assert statuses == {"GPU-10": 1, "IB-02": 2}


def test_a_history_that_fails_mid_run_is_one_warning_and_no_more(tmp_path: Path) -> None:
    warnings: list[str] = []
    path = tmp_path / "h.sqlite"
    recorder = RunRecorder.start(path, kind="run", out_dir=tmp_path, topology="t", nodes=["n1"],
                                 warn=warnings.append)
    assert recorder.plugins == [recorder]
    assert recorder.store is not None
    recorder.store.db.close()  # the file goes away under the run
    _test(recorder, "n1", "GPU-10")
    recorder.pytest_runtest_logreport(_report("setup", "n2", "GPU-10"))
    _test(recorder, "n2", "GPU-10")
    recorder.finish(tmp_path)
    assert len(warnings) == 1 and warnings[0].startswith(f"burnin: history: stopped recording in {path} (")
    assert recorder.plugins == []


def test_no_history_at_all_records_nothing_and_says_why(tmp_path: Path) -> None:
    warnings: list[str] = []
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    with recording(tmp_path, nodes=["n1"], topology="t", path=blocked / "h.sqlite", warn=warnings.append) as rec:
        assert rec.plugins == []
        _test(rec, "n1", "GPU-10")
    assert len(warnings) == 1 and warnings[0].startswith("burnin: history: not recorded: history ")
    none: list[str] = []
    recorder = RunRecorder.start(None, kind="run", out_dir=tmp_path, topology="t", nodes=[], warn=none.append)
    recorder.finish(tmp_path)
    assert none == [] and recorder.plugins == []


def test_the_history_is_in_the_state_directory_unless_named_or_off(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from burnin.history.store import default_path

    monkeypatch.delenv("BURNIN_HISTORY", raising=False)
    monkeypatch.setenv("BURNIN_STATE_DIR", str(tmp_path / "state"))
    assert default_path() == tmp_path / "state" / "history.sqlite"
    with recording(tmp_path, nodes=["n1"], topology="t") as recorder:
        _test(recorder, "n1", "GPU-10")
    assert _committed(tmp_path / "state" / "history.sqlite") == [("n1", "GPU-10")]
    monkeypatch.setenv("BURNIN_HISTORY", str(tmp_path / "elsewhere.sqlite"))
    assert default_path() == tmp_path / "elsewhere.sqlite"
    monkeypatch.setenv("BURNIN_HISTORY", " OFF ")
    assert default_path() is None
    with recording(tmp_path, nodes=["n1"], topology="t") as recorder:
        assert recorder.plugins == []
