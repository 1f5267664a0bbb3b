"""Worker processes on this machine for pure, CPU-bound work (judging a fleet's checks on the controller's cores).

:class:`WorkerPool` runs a module-level function over items in ``jobs`` fresh
interpreters (``spawn``: nothing of this process's threads or locks is copied
into them) and gives the results back in the items' order, with at most
``window`` items handed out ahead of the one being read, so that a fast pool
never piles up results the caller has not read yet. The workers ignore SIGINT:
the caller's process is interrupted, and closes the pool.
"""

from __future__ import annotations

import multiprocessing
import signal
import sys
import types
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any, Generic, TypeVar

from burnin import waits

Item = TypeVar("Item")
Result = TypeVar("Result")


def _start_worker(initializer: Callable[..., None] | None, initargs: tuple[Any, ...]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if initializer is not None:
        initializer(*initargs)


def _ready() -> None:
    """A task that does nothing: the worker it lands on has started and run the initializer."""


class WorkerPool:
    """``jobs`` worker processes; :meth:`ordered` maps a function over items with them."""

    def __init__(self, jobs: int, initializer: Callable[..., None] | None = None,
                 initargs: tuple[Any, ...] = ()) -> None:
        self.jobs = jobs
        self._executor = ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=_start_worker, initargs=(initializer, initargs))

    def start(self) -> None:
        """Start every worker now (they import and initialize while the caller does other work).

        A spawned interpreter runs the caller's main script again unless it has no file: a script
        without an ``if __name__ == "__main__"`` guard (a bench, ``python -c``) would start its work
        over in each worker. The workers are started with a main module of their own, which runs nothing.
        """
        main = sys.modules.get("__main__")
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            for _ in range(self.jobs):
                self._executor.submit(_ready)
        finally:
            if main is not None:
                sys.modules["__main__"] = main

    def ordered(self, function: Callable[[Item], Result], items: Iterable[Item], *,
                window: int) -> Ordered[Item, Result]:
        """``function(item)`` for each item, in the items' order; ``window`` items in flight ahead of the one read.

        The first ``window`` items are handed out now, before the first result is asked for (the workers
        start on them while the caller does other work); an item is taken from ``items`` only when it is
        handed out. A worker that dies or a function that raises raises when its result is read
        (``BrokenProcessPool``, the exception)."""
        return Ordered(self._executor, function, iter(items), window)

    def close(self) -> None:
        """Stop handing out work; the workers finish the item they hold and exit."""
        self._executor.shutdown(wait=False, cancel_futures=True)


class Ordered(Generic[Item, Result]):
    """The results of :meth:`WorkerPool.ordered`, in the items' order."""

    def __init__(self, executor: ProcessPoolExecutor, function: Callable[[Item], Result], source: Iterator[Item],
                 window: int) -> None:
        self._executor, self._function, self._source, self.window = executor, function, source, window
        self._pending: deque[tuple[Item, Future[Result]]] = deque()
        self.ahead(window)

    def ahead(self, count: int) -> None:
        """Hand out items now until ``count`` are in flight (the workers run ahead while the caller reads none)."""
        if len(self._pending) >= count:
            return
        for item in self._source:
            self._pending.append((item, self._executor.submit(self._function, item)))
            if len(self._pending) >= count:
                return

    def take_back(self, replace: Callable[[Item], Item | None]) -> None:
        """The items handed out that no worker has begun are taken back, and ``replace(item)`` handed out in the
        place of each (None: nothing); their results come in the same order."""
        kept: deque[tuple[Item, Future[Result]]] = deque()
        for item, future in self._pending:
            if not future.cancel():
                kept.append((item, future))
            elif (other := replace(item)) is not None:
                kept.append((other, self._executor.submit(self._function, other)))
        self._pending = kept

    def __iter__(self) -> Ordered[Item, Result]:
        return self

    def __next__(self) -> Result:
        if not self._pending:
            raise StopIteration
        result = waits.result(self._pending.popleft()[1])
        self.ahead(self.window)
        return result
