"""Main-thread waits on worker threads end at once on a signal (burnin.waits), wherever the kernel delivers it.

Each test hands a signal to a worker thread (``pthread_kill`` of the worker itself: the kernel's choice for
a process-directed signal is any thread that does not block it) while the main thread waits on that worker.
The handler raises; the wait must end by that exception while the worker still works. Before, the main thread
slept on until the work ended (61 s for `burnin run --sim 16` signalled while its collectors were held). The
workers' 30 s limit only bounds a failing test: nothing here waits on the clock.
"""

from __future__ import annotations

import platform
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from burnin import waits
from burnin.launch.base import fan_out


class Stopped(Exception):
    """What the test's handler raises, as burnin's turns SIGTERM into an interruption."""


def _raise(signum: int, frame: Any) -> None:
    raise Stopped(signum)


@pytest.fixture
def handler() -> Iterator[None]:
    old = signal.signal(signal.SIGUSR1, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGUSR1, old)


FUTEX = {"x86_64": 202, "aarch64": 98}[platform.machine()]  # the futex system call's number


def _main_thread_asleep_on_a_lock() -> bool:
    """The main thread is blocked in a futex (a lock's wait): no other thread holds the GIL here, so it is
    its wait on the worker, not on the GIL."""
    try:
        call = Path(f"/proc/self/task/{threading.main_thread().native_id}/syscall").read_text().split()
    except OSError:
        return False
    return bool(call) and call[0] == str(FUTEX)


class Worker:
    """Work that signals its own thread once the main thread sleeps on it, then waits until released."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.finished = threading.Event()

    def __call__(self, item: int) -> int:
        asleep = 0
        while asleep < 3 and not self.release.is_set():  # three looks in a row, a millisecond apart
            asleep = asleep + 1 if _main_thread_asleep_on_a_lock() else 0
            time.sleep(0.001)
        signal.pthread_kill(threading.get_ident(), signal.SIGUSR1)
        self.release.wait(30)
        self.finished.set()
        return item


def _stopped_while_working(wait_on: Callable[[Worker], object]) -> None:
    worker = Worker()
    try:
        with pytest.raises(Stopped):
            wait_on(worker)
        assert not worker.finished.is_set(), "the wait ended only when the work did"
    finally:
        worker.release.set()


@pytest.mark.usefixtures("handler")
def test_fan_out_ends_on_a_signal_a_worker_thread_received() -> None:
    _stopped_while_working(lambda worker: fan_out([1, 2], worker, workers=2))


@pytest.mark.usefixtures("handler")
def test_a_future_s_result_ends_on_a_signal_its_worker_received() -> None:
    pool = ThreadPoolExecutor(max_workers=1)
    try:
        _stopped_while_working(lambda worker: waits.result(pool.submit(worker, 1)))
    finally:
        pool.shutdown(wait=True)


def test_completed_yields_every_future_once_and_result_gives_values_and_errors() -> None:
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = [pool.submit(lambda n=n: n * n) for n in range(6)]
        seen = list(waits.completed(futures))
        assert len(seen) == len(futures) and set(seen) == set(futures)
        assert [waits.result(f) for f in futures] == [0, 1, 4, 9, 16, 25]
        failing = pool.submit(lambda: {}["missing"])
        with pytest.raises(KeyError):
            waits.result(failing)
        timing_out = pool.submit(lambda: (_ for _ in ()).throw(TimeoutError("the work's own")))
        with pytest.raises(TimeoutError, match="the work's own"):
            waits.result(timing_out)  # the work's TimeoutError is its result, not a reason to wait on
    assert list(waits.completed([])) == []

