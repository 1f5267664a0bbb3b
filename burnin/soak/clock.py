"""The soak's clock: seconds since the soak started, real or simulated.

A simulated clock jumps to the time asked for and tells the simulated world
(``on_advance``), so a 24 h soak takes as long as its commands and samples take
to run. A resumed soak's clock starts where the checkpoint stopped.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol


class Clock(Protocol):
    simulated: bool

    def now(self) -> float:
        """Seconds since the soak started."""

    def sleep_until(self, t: float) -> None:
        """Return once ``now() >= t``."""


class RealClock:
    """Wall-clock seconds (monotonic), starting at ``start``."""

    simulated = False

    def __init__(self, start: float = 0.0, *, step_s: float = 1.0) -> None:
        self._origin = time.monotonic() - start
        self._step = step_s

    def now(self) -> float:
        return time.monotonic() - self._origin

    def sleep_until(self, t: float) -> None:
        # short naps: a finished stage is picked up within a step, a signal within one nap
        while (left := t - self.now()) > 0:
            time.sleep(min(left, self._step))


class SimClock:
    """Simulated seconds: ``sleep_until`` jumps there at once, after telling the world."""

    simulated = True

    def __init__(self, start: float = 0.0, on_advance: Callable[[float], None] | None = None) -> None:
        self._t = start
        self._on_advance = on_advance
        if on_advance is not None:
            on_advance(start)

    def now(self) -> float:
        return self._t

    def sleep_until(self, t: float) -> None:
        if t <= self._t:
            return
        self._t = t
        if self._on_advance is not None:
            self._on_advance(t)
