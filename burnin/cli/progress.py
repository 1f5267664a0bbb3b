"""Progress on stderr for runs longer than a second (rich, only on a terminal)."""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import Any


class Progress:
    """Shows gathering and judging progress once a run has lasted a second."""

    DELAY_S = 1.0

    def __init__(self, total_nodes: int) -> None:
        self.total_nodes = total_nodes
        self._started = time.monotonic()
        self._progress: Any = None
        self._gather_task: Any = None
        self._test_task: Any = None
        self._gathered = 0
        self._tests = 0
        self._enabled = sys.stderr.isatty()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._progress is not None:
            self._progress.stop()

    def _ensure(self) -> bool:
        if not self._enabled:
            return False
        if self._progress is None:
            if time.monotonic() - self._started < self.DELAY_S:
                return False
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as RichProgress

            self._progress = RichProgress(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                console=Console(stderr=True), transient=True,
            )
            self._progress.start()
            self._gather_task = self._progress.add_task("gathering facts", total=self.total_nodes,
                                                        completed=self._gathered)
            self._test_task = self._progress.add_task("judging", total=None, completed=self._tests)
        return True

    def node_gathered(self, node: str) -> None:
        self._gathered += 1
        if self._ensure():
            self._progress.update(self._gather_task, completed=self._gathered)

    def test_done(self) -> None:
        self._tests += 1
        if self._ensure():
            self._progress.update(self._test_task, completed=self._tests)
