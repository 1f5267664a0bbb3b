"""``fan_out`` starts every thread before the first item goes out: a thread started while the others already
hold the interpreter lock (an SSH handshake) waits its turn, and the last connections began seconds late."""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

from burnin.launch import base
from burnin.launch.base import FAN_OUT_THREADS, fan_out, start_threads


def _fan_out_threads() -> int:
    return sum(1 for thread in threading.enumerate() if thread.name.startswith(FAN_OUT_THREADS))


def test_every_thread_runs_before_the_first_item_goes_out() -> None:
    seen: list[int] = []
    lock = threading.Lock()

    def call(item: int) -> int:
        with lock:
            seen.append(_fan_out_threads())
        return item * 2

    assert fan_out(list(range(20)), call, workers=8) == [item * 2 for item in range(20)]
    assert seen == [8] * 20  # the first item already saw all eight threads
    assert fan_out([1, 2, 3], call, workers=8) == [2, 4, 6]  # never more threads than items
    assert seen[20:] == [3] * 3
    assert fan_out([1, 2], call, workers=2) == [2, 4]
    assert seen[23:] == [2, 2]


def test_one_item_or_one_worker_starts_nothing_ahead() -> None:
    assert fan_out([5], lambda item: item + 1, workers=64) == [6]
    assert fan_out([1, 2, 3], lambda item: item + 1, workers=1) == [2, 3, 4]


class _RefusesAfter(ThreadPoolExecutor):
    """A pool the system lets start only ``allowed`` threads (``can't start new thread``)."""

    def __init__(self, allowed: int, workers: int) -> None:
        super().__init__(max_workers=workers)
        self.allowed = allowed

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        if self.allowed == 0:
            raise RuntimeError("can't start new thread")
        self.allowed -= 1
        return super().submit(fn, *args, **kwargs)


def test_a_thread_that_cannot_start_leaves_none_waiting_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "WORKERS_START_WAIT_S", 3600.0)  # were they left waiting, they would wait an hour
    pool = _RefusesAfter(allowed=3, workers=8)
    with pytest.raises(RuntimeError, match="can't start new thread"):
        start_threads(pool, 8)
    ended = threading.Event()
    closer = threading.Thread(target=lambda: (pool.shutdown(wait=True), ended.set()), daemon=True)
    closer.start()
    assert ended.wait(120), "the three started threads were still waiting for the five that never started"
