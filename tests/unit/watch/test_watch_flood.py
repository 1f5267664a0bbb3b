"""Under a flood of distinct incidents the watch does not fall behind: work per sighting is bounded, the
incident table is bounded, and a fatal event is handled before the records queued ahead of it.

Work is counted (lines of burnin/watch/journal.py run, by a trace function), never timed.
"""

from __future__ import annotations

import io
import json
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import burnin.watch.journal as journal_module
from burnin.watch.daemon import WatchConfig, Watcher
from burnin.watch.events import Kind, WatchEvent
from burnin.watch.journal import Incidents

FLOOD = 16_000
OWN_GPU = "0000:1b:00"


class OverBudget(Exception):
    pass


def lines_run(work: Callable[[], None], budget: int, filename: str = journal_module.__file__) -> int:
    """Lines of ``filename`` executed by ``work``; raises OverBudget past ``budget`` (so a slow version stops)."""
    count = 0

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
            if count > budget:
                raise OverBudget(f"more than {budget} lines of {filename}")
        return local

    def calls(frame: FrameType, event: str, arg: Any) -> Any:
        return local if frame.f_code.co_filename == filename else None

    sys.settrace(calls)
    try:
        work()
    finally:
        sys.settrace(None)
    return count


def _xid(code: int, bus: str, detected: float = 1000.0) -> WatchEvent:
    return WatchEvent("kmsg", Kind.XID, bus, code, f"NVRM: Xid (PCI:{bus}): {code}, pid=1, x", detected)


def _distinct_bus(i: int) -> str:
    return f"{0x100 + i // 256:04x}:{i % 256:02x}:00"


def _key(i: int) -> tuple[str, ...]:
    return ("GPU-04", "xid", _distinct_bus(i), "13")


def test_a_sighting_costs_the_same_however_many_incidents_are_live() -> None:
    """16,000 distinct Xid 13 incidents within one window, then an Xid 79: a bounded number of lines each."""
    incidents = Incidents(60.0)
    fatal: list[bool] = []

    def flood() -> None:
        for i in range(FLOOD):
            incidents.duplicate(_key(i), 1000.0 + i * 1e-4)
        fatal.append(incidents.duplicate(("GPU-04", "xid", OWN_GPU, "79"), 1002.0))

    per_sighting = 25
    lines = lines_run(flood, budget=per_sighting * (FLOOD + 1))
    assert fatal == [False]  # a new incident: acted on
    assert lines <= per_sighting * (FLOOD + 1)


def test_the_incident_table_is_bounded_and_forgets_the_least_recently_heard() -> None:
    incidents = Incidents(60.0)  # 4,096 by default
    for i in range(FLOOD):
        assert not incidents.duplicate(_key(i), 1000.0 + i * 1e-4)
    assert len(incidents) == 4096 and incidents.forgotten == FLOOD - 4096
    assert incidents.duplicate(_key(FLOOD - 1), 1002.0)  # the newest is still known
    assert not incidents.duplicate(_key(0), 1002.0)  # the oldest was forgotten: heard again, a new incident
    assert len(incidents) == 4096


def test_incidents_older_than_the_window_leave_the_table() -> None:
    incidents = Incidents(60.0)
    for i in range(100):
        incidents.duplicate(_key(i), 1000.0 + i)
    assert len(incidents) == 61  # 1039 .. 1099 are within 60 s of the last sighting
    incidents.duplicate(_key(99), 1159.0)
    assert len(incidents) == 1 and incidents.forgotten == 0


def test_a_repeat_moves_an_incident_to_the_back() -> None:
    incidents = Incidents(60.0, capacity=2)
    incidents.duplicate(_key(0), 1.0)
    incidents.duplicate(_key(1), 2.0)
    assert incidents.duplicate(_key(0), 3.0) and incidents.repeats(_key(0)) == 1
    incidents.duplicate(_key(2), 4.0)  # the table is full: key 1, heard least recently, goes
    assert incidents.repeats(_key(0)) == 1 and incidents.duplicate(_key(0), 5.0)
    assert not incidents.duplicate(_key(1), 6.0)


def test_restore_keeps_the_latest_sighting_and_the_bound() -> None:
    incidents = Incidents(60.0, capacity=3)
    incidents.restore([{"key": list(_key(i % 5)), "detected_at": 100.0 + i} for i in range(10)])
    assert len(incidents) == 3
    assert incidents.duplicate(_key(4), 150.0) and not incidents.duplicate(_key(1), 150.0)


# ---------------------------------------------------------------------------------------------- the daemon


def _watcher(tmp_path: Path) -> tuple[Watcher, io.StringIO]:
    out = io.StringIO()
    config = WatchConfig(node="sim01", state_dir=tmp_path / "state", kernel_log=None, use_nvml=False,
                         dry_run=True)
    return Watcher(config, out=out, err=io.StringIO(), background=lambda work: work()), out


def test_the_watchers_queue_hands_out_a_fatal_xid_before_the_flood_ahead_of_it(tmp_path: Path) -> None:
    watcher, _ = _watcher(tmp_path)
    for i in range(FLOOD):
        watcher.events.put(_xid(13, _distinct_bus(i)))
    watcher.events.put(_xid(79, OWN_GPU))
    first = watcher.events.get(timeout=1)
    assert first is not None and first.code == 79


def test_a_fatal_xid_after_16000_distinct_records_is_the_first_thing_the_watch_does(tmp_path: Path) -> None:
    watcher, out = _watcher(tmp_path)
    for i in range(FLOOD):
        watcher.events.put(_xid(13, _distinct_bus(i)))
    watcher.events.put(_xid(79, OWN_GPU))
    stop = threading.Event()
    running = threading.Thread(target=watcher.run, args=(stop,), daemon=True)
    running.start()
    journal = tmp_path / "state" / "events.jsonl"
    deadline = time.monotonic() + 300  # a failure limit: the wait ends on the journal line, not the clock
    while time.monotonic() < deadline and '"code":79' not in (journal.read_text() if journal.exists() else ""):
        time.sleep(0.05)
    stop.set()
    running.join(timeout=60)
    first = json.loads(journal.read_text().splitlines()[0])
    assert (first["code"], first["action"]) == (79, "evict")
    assert "EVICT GPU-04 PCI 0000:1b:00 Xid 79" in out.getvalue().split("burnin watch: sim01 record", 1)[0]


def test_while_the_kernel_log_is_read_behind_its_end_records_wait(tmp_path: Path) -> None:
    """Reading comes first: the fatal line may be further down the log than the records already queued."""
    out = io.StringIO()
    config = WatchConfig(node="sim01", state_dir=tmp_path / "state", kernel_log=tmp_path / "kmsg", use_nvml=False,
                         dry_run=True)
    watcher = Watcher(config, out=out, err=io.StringIO())
    assert watcher.kernel is not None
    watcher.events.put(_xid(13, _distinct_bus(0)))
    watcher.kernel.behind.set()
    assert watcher._next_event(timeout=0) is None
    watcher.events.put(_xid(79, OWN_GPU))
    fatal = watcher._next_event(timeout=0)
    assert fatal is not None and fatal.code == 79
    watcher.kernel.behind.clear()  # caught up: the records are handled
    record = watcher._next_event(timeout=0)
    assert record is not None and record.code == 13


@pytest.mark.parametrize("count", [1, 100])
def test_work_per_sighting_does_not_grow_with_the_table(count: int) -> None:
    """The same bounded cost for the 16,001st sighting as for the first few."""
    incidents = Incidents(60.0)
    for i in range(FLOOD if count == 100 else 0):
        incidents.duplicate(_key(i), 1000.0)
    lines = lines_run(lambda: [incidents.duplicate(("x", str(n)), 1000.0) for n in range(count)], budget=10**6)
    assert lines <= 25 * count


def test_a_repeat_at_exactly_the_window_is_the_same_incident() -> None:
    incidents = Incidents(60.0)
    incidents.duplicate(_key(0), 1000.0)
    assert incidents.duplicate(_key(0), 1060.0)
    assert not incidents.duplicate(_key(0), 1120.5)
