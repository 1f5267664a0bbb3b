"""Every watch incident goes into the fleet's history as it is journaled, whether or not it took an action; a
history that cannot be written is one warning and never costs the journal or the action."""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path

import pytest
from watch_support import FakeSlurm

from burnin.cli.main import main
from burnin.history.store import Store
from burnin.watch.actions import SlurmActor
from burnin.watch.daemon import WatchConfig, Watcher
from burnin.watch.events import Kind, WatchEvent

AT = 1_790_000_000.0  # 2026-09-21: a time `burnin history import --journal` takes as real


class Clock:
    def __init__(self) -> None:
        self.now = AT

    def __call__(self) -> float:
        return self.now


def _watcher(tmp_path: Path, slurm: FakeSlurm, clock: Clock, *, dry_run: bool = False) -> tuple[Watcher, io.StringIO]:
    err = io.StringIO()
    config = WatchConfig(node="sim01", state_dir=tmp_path / "state", kernel_log=None, use_nvml=False,
                         dedupe_window=60.0, dry_run=dry_run)
    actor = SlurmActor("sim01", client=slurm, dry_run=dry_run, out=io.StringIO(), poll_s=0.001)
    watcher = Watcher(config, actor=actor, out=io.StringIO(), err=err, clock=clock, background=lambda work: work())
    return watcher, err


def _xid(code: int, clock: Clock, bus: str = "0000:1b:00") -> WatchEvent:
    return WatchEvent("kmsg", Kind.XID, bus, code, f"NVRM: Xid (PCI:{bus}): {code}", clock(), label="gpu3")


def _incidents(history: Path) -> list[tuple[float, str, str, str, str, str]]:
    db = sqlite3.connect(history)
    rows = db.execute("SELECT i.at, n.name, i.kind, i.check_id, i.action, i.detail FROM incidents i "
                      "JOIN node_names n ON n.id = i.node ORDER BY i.at, i.id").fetchall()
    db.close()
    return rows


def _journal(tmp_path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (tmp_path / "state" / "events.jsonl").read_text().splitlines()]


def test_every_incident_is_recorded_taken_or_not_and_shown_in_the_nodes_timeline(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    history = tmp_path / "history.sqlite"
    monkeypatch.setenv("BURNIN_HISTORY", str(history))
    slurm, clock = FakeSlurm(jobs=["41"]), Clock()
    watcher, err = _watcher(tmp_path, slurm, clock)
    watcher.handle(_xid(63, clock))  # recorded only
    clock.now += 1
    watcher.handle(_xid(79, clock))  # evicts
    clock.now += 1
    watcher.handle(_xid(79, clock, bus="0000:43:00"))  # another GPU: the node was evicted already, kept
    assert slurm.commands().count("scontrol requeue") == 1
    watcher.history.flush()
    rows = _incidents(history)
    assert [(at - AT, node, kind, check, action) for at, node, kind, check, action, _ in rows] == [
        (0.0, "sim01", "xid", "GPU-04", "record"), (1.0, "sim01", "xid", "GPU-04", "evict"),
        (2.0, "sim01", "xid", "GPU-04", "none")]
    assert rows[0][5] == "gpu3 Xid 63 (row-remapping event)"
    assert rows[2][5].startswith("gpu3 Xid 79 (GPU has fallen off the bus): node already evicted")
    assert err.getvalue().count("history") == 0
    assert main(["history", "sim01", "--history", str(history)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("burnin history sim01: 0 runs (0 not admitted), 1 gate actions, 3 watch incidents")
    assert out[1] == ("2026-09-21T14:13:20Z  incident xid GPU-04 record: gpu3 Xid 63 (row-remapping event)  "
                      "[burnin watch (kmsg)]")
    assert "2026-09-21T14:13:21Z  evict GPU-04: burnin: GPU-04 gpu3 Xid 79 (GPU has fallen off the bus)" \
        "  [burnin watch]" in out
    # the eviction is a gate action, keyed as an import of the journal keys it: importing it adds nothing
    assert main(["history", "import", "--journal", str(tmp_path / "state"), "--history", str(history)]) == 0
    assert "and 0 gate actions added, 0 runs and 1 actions already there" in capsys.readouterr().out


def test_a_dry_run_and_a_failed_then_retried_action_are_incidents_too(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    history = tmp_path / "history.sqlite"
    monkeypatch.setenv("BURNIN_HISTORY", str(history))
    clock = Clock()
    dry, _ = _watcher(tmp_path / "dry", FakeSlurm(jobs=["41"]), clock, dry_run=True)
    dry.handle(_xid(79, clock))
    slurm = FakeSlurm(jobs=["42"], fail={"scontrol --oneliner"})
    watcher, _ = _watcher(tmp_path, slurm, clock)
    clock.now += 1
    watcher.handle(_xid(79, clock))
    slurm.fail.clear()
    clock.now += 2.5
    watcher._retry_due(clock())
    dry.history.flush()
    watcher.history.flush()
    assert [row[4] for row in _incidents(history)] == ["evict (dry run: not taken)", "evict (failed: retried)",
                                                       "evict (retry 1)"]
    db = sqlite3.connect(history)
    assert db.execute("SELECT action, at FROM actions").fetchall() == [("evict", AT + 1)]  # the one taken
    db.close()


def test_an_unwritable_history_is_one_warning_and_loses_neither_journal_nor_action(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    garbage = tmp_path / "history.sqlite"
    garbage.write_bytes(b"this is no database\n" * 100)
    monkeypatch.setenv("BURNIN_HISTORY", str(garbage))
    slurm, clock = FakeSlurm(jobs=["41"]), Clock()
    watcher, err = _watcher(tmp_path, slurm, clock)
    watcher.handle(_xid(63, clock))
    clock.now += 1
    watcher.handle(_xid(79, clock))
    clock.now += 1
    watcher.handle(_xid(48, clock, bus="0000:43:00"))
    watcher.history.flush()
    assert [entry["code"] for entry in _journal(tmp_path) if entry["kind"] == "xid"] == [63, 79, 48]
    assert slurm.commands().count("scontrol requeue") == 1 and slurm.reason.startswith("burnin: GPU-04")
    lines = err.getvalue().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"burnin watch: sim01: history: incidents not recorded (history {garbage}: cannot be "
                               "used (")
    assert garbage.read_bytes() == b"this is no database\n" * 100


def test_a_busy_history_never_holds_up_the_watch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another writer holds the database: the event is journaled and acted on at once, its row written once the
    database is free (the watch used to wait out SQLite's 30 s busy timeout on its event path, then lose the row)."""
    history = tmp_path / "history.sqlite"
    Store(history).close()
    monkeypatch.setenv("BURNIN_HISTORY", str(history))
    slurm, clock = FakeSlurm(jobs=["41"]), Clock()
    watcher, err = _watcher(tmp_path, slurm, clock)
    other = sqlite3.connect(history, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        watcher.handle(_xid(79, clock))  # returns while the other writer still holds the database
        assert slurm.commands().count("scontrol requeue") == 1
        assert [entry["code"] for entry in _journal(tmp_path) if entry["kind"] == "xid"] == [79]
    finally:
        other.execute("ROLLBACK")
        other.close()
    watcher.history.flush()
    assert [row[4] for row in _incidents(history)] == ["evict"]
    assert err.getvalue() == ""
