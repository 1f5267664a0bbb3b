"""Waits of the main thread on worker threads that a signal ends at once.

Python runs a signal's handler (burnin's turns SIGTERM, SIGINT and SIGHUP into an exception) in the main
thread, and only when that thread runs Python code. A thread blocked on a lock wakes for it only when the
signal interrupts that very wait: a signal the kernel hands to a worker thread, or one that lands just
before the main thread blocks, waits until the lock is released for another reason. Waiting on futures
without a time limit, that is when the work ends: `burnin run --sim 16` signalled while its collectors were
held took 61 s to stop (the collectors' own time limit), once in 25 tries. These waits wake every
:data:`WAKE_S` seconds, so a pending handler runs within that much; nothing else changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import Any, TypeVar

WAKE_S = 0.25
"""Longest a pending signal's handler waits for the main thread (a wake-up costs microseconds)."""

T = TypeVar("T")


def completed(futures: Iterable[Future[Any]]) -> Iterator[Future[Any]]:
    """Each future as it completes (as :func:`concurrent.futures.as_completed`, without its time limit)."""
    pending = set(futures)
    while pending:
        done, pending = wait(pending, timeout=WAKE_S, return_when=FIRST_COMPLETED)
        yield from done


def result(future: Future[T]) -> T:
    """``future.result()``, waited for in :data:`WAKE_S` steps (a result or an exception of the work alike)."""
    while not wait((future,), timeout=WAKE_S).done:
        pass
    return future.result()
