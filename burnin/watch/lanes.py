"""The queue between the watch's listeners and its one handling thread: what must be acted on goes first.

Two lanes. An event whose class is drain or evict (``classify`` with the
site's policy, decided as it is put) goes into the urgent lane; everything else
(records) into the routine lane. ``get`` takes from the urgent lane while it has
anything, so under a flood of records (an Xid 13 storm, thousands of distinct
lines a second) a fatal event waits for the one event being handled, not for
the flood. ``get(routine=False)`` waits for an urgent event only: the daemon
asks so while the kernel-log thread is behind, so that the log is read ahead of
the records (the fatal line may be further down). The routine lane holds at
most ``routine_limit`` events (16,384);
past that new records are dropped and counted: memory stays bounded, and a
record is only a journal line. The urgent lane is not bounded: it never holds
more than a few events (each is acted on once per incident).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

from burnin.watch.events import Action, WatchEvent

ROUTINE_LIMIT = 16384


class EventLanes:
    def __init__(self, action: Callable[[WatchEvent], Action], routine_limit: int = ROUTINE_LIMIT) -> None:
        self._action = action
        self.routine_limit = routine_limit
        self._urgent: deque[WatchEvent] = deque()
        self._routine: deque[WatchEvent] = deque()
        self._ready = threading.Condition()
        self._routine_wanted = True  # whether the waiting get takes records (else a put of one need not wake it)
        self.dropped = 0  # records dropped because the routine lane was full

    def put(self, event: WatchEvent) -> None:
        urgent = self._action(event) is not Action.RECORD
        with self._ready:
            if urgent:
                self._urgent.append(event)
            elif len(self._routine) < self.routine_limit:
                self._routine.append(event)
            else:
                self.dropped += 1
                return
            if urgent or self._routine_wanted:
                self._ready.notify()

    def get(self, timeout: float | None = None, *, routine: bool = True) -> WatchEvent | None:
        """The next event, urgent ones first (only those without ``routine``); None when none came in time."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._ready:
            self._routine_wanted = routine
            try:
                while not (self._urgent or (routine and self._routine)):
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        return None
                    self._ready.wait(left)
                return (self._urgent or self._routine).popleft()
            finally:
                self._routine_wanted = True

    def __len__(self) -> int:
        with self._ready:
            return len(self._urgent) + len(self._routine)
