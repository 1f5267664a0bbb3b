"""WorkerPool (burnin/transport/workers.py): a function over items in spawned workers, in the items' order,
with a bounded window of items handed out ahead of the one being read."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from burnin.transport.workers import WorkerPool

pytestmark = pytest.mark.proc


def _appears(path: Path, within_s: float = 120.0) -> bool:
    """Waits for a worker to create ``path`` (the deadline only ends a run that would hang)."""
    deadline = time.monotonic() + within_s
    while not path.exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_the_first_window_is_handed_out_before_any_result_is_read(tmp_path: Path) -> None:
    """The judging workers start on their nodes while pytest still orders the tests (burnin.plugin_judge)."""
    paths = [tmp_path / f"item{index}" for index in range(5)]
    pool = WorkerPool(2)
    pool.start()
    try:
        results = pool.ordered(Path.touch, paths, window=2)
        results.ahead(2)  # two in flight already: none more
        assert _appears(paths[0]) and _appears(paths[1])
        assert not any(path.exists() for path in paths[2:])  # beyond the window: handed out as results are read
        assert list(results) == [None] * len(paths)
        assert all(path.exists() for path in paths)
    finally:
        pool.close()


def test_results_come_in_the_items_order_and_an_error_where_its_item_is(tmp_path: Path) -> None:
    (tmp_path / "b").write_text("2")
    pool = WorkerPool(2)
    try:
        results = pool.ordered(Path.read_text, [tmp_path / "b", tmp_path / "missing", tmp_path / "b"], window=3)
        assert next(results) == "2"
        with pytest.raises(FileNotFoundError):
            next(results)
    finally:
        pool.close()


def _writer_once_read(fifo: Path, within_s: float = 120.0) -> int | None:
    """The writing end of ``fifo`` once a worker has opened it to read (None: none did within the deadline,
    which only ends a run that would hang)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:  # ENXIO: no reader yet
            time.sleep(0.01)
    return None


def test_items_no_worker_has_begun_are_taken_back_and_replaced_in_order(tmp_path: Path) -> None:
    """FleetJudging hands out nodes before it knows their checks, then takes back those no worker has begun."""
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    items = [gate]
    for index in range(1, 9):
        (tmp_path / f"a{index}").write_text(f"a{index}")
        items.append(tmp_path / f"a{index}")
    (tmp_path / "b").write_text("b")
    pool = WorkerPool(1)
    try:
        results = pool.ordered(Path.read_text, items, window=len(items))
        writer = _writer_once_read(gate)  # the one worker is held on the first item: none after it has begun
        assert writer is not None
        results.take_back(lambda path: None if path.name == "a5" else tmp_path / "b")
        os.write(writer, b"opened")
        os.close(writer)
        read = list(results)
    finally:
        pool.close()
    assert read[0] == "opened" and "b" in read  # some items were taken back and replaced
    # which ones were kept is the pool's race: cancelling an item wakes its queue-feeding thread, which may queue
    # any item after it not yet taken back (a8 alone kept, a1-a7 replaced, is one outcome)
    # each item in its place: kept (already in the worker's queue when taken back), or replaced; a5 dropped
    # when taken back
    kept = {text for text in read[1:] if text != "b"}
    assert len(kept) <= 4
    assert read[1:] == [f"a{index}" if f"a{index}" in kept else "b" for index in range(1, 9)
                        if index != 5 or "a5" in kept]


def test_starting_the_workers_leaves_this_process_main_module_in_place() -> None:
    """The workers start with a main module of their own (a script without a main guard runs nothing twice)."""
    import sys

    main = sys.modules["__main__"]
    pool = WorkerPool(1)
    try:
        pool.start()
        assert sys.modules["__main__"] is main
    finally:
        pool.close()
