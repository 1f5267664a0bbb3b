"""What the history is made of: one observation of one node (a run's decision or a watch's drain)."""

from __future__ import annotations

import calendar
import math
import time
from dataclasses import dataclass
from typing import Literal

Source = Literal["run", "watch", "slurm"]
STAMP = "%Y-%m-%dT%H:%M:%SZ"
"""How gate.json (``created``) and run.json (``started``) write times: UTC to the second."""
EARLIEST = 946684800.0
"""2000-01-01T00:00:00Z: a time before it is a clock that was never set (a negative one, no time at all)."""
FUTURE_SLACK_S = 86400.0
"""How far past the reader's clock a time may lie (clocks of controllers and nodes disagree a little)."""


@dataclass(frozen=True, slots=True)
class Observation:
    """A node seen admitted or rejected at one time, by a run's gate or by the watch draining it."""

    node: str
    at: float
    """Unix time."""
    admitted: bool
    failed: tuple[str, ...] = ()
    """Check ids that failed: a rejection with one is a failure attributed to the node."""
    incomplete: tuple[str, ...] = ()
    reason: str = ""
    """The first reason the gate (or the watch) gave."""
    origin: str = ""
    """The run folder or journal it came from."""
    source: Source = "run"


@dataclass(frozen=True, slots=True)
class Skipped:
    """An input that was not read, and why: a run, or one record (``file:line`` of a journal)."""

    path: str
    reason: str


@dataclass(frozen=True, slots=True)
class Inconsistent:
    """A node a run admitted although its gate.json names checks that failed or were not measured.

    Admitted means every check measured the node and passed; such a decision was edited or is
    not burnin's, and the history counts it as the rejection its checks say (fail closed).
    """

    path: str
    node: str
    failed: tuple[str, ...]
    incomplete: tuple[str, ...]

    @property
    def reason(self) -> str:
        named = [f"{kind} checks {','.join(ids)}" for kind, ids in (("failed", self.failed),
                                                                      ("incomplete", self.incomplete)) if ids]
        return f"admitted with {' and '.join(named)}: counted as rejected"


def parse_stamp(text: object) -> float | None:
    """``2026-12-01T04:46:05Z`` -> Unix time; None for anything else."""
    if not isinstance(text, str):
        return None
    try:
        return float(calendar.timegm(time.strptime(text, STAMP)))
    except ValueError:
        return None


def stamp(at: float) -> str:
    return time.strftime(STAMP, time.gmtime(at))


def time_text(at: float) -> str:
    """:func:`stamp`, or the number itself where no calendar date fits (``1e+18``)."""
    try:
        return stamp(at)
    except (OverflowError, OSError, ValueError):
        return f"{at:g}"


def impossible_time(at: float, now: float) -> str | None:
    """Why ``at`` cannot be when a run or the watch judged a node (before 2000, or in the future); None if it can."""
    if at < EARLIEST:
        return f"{time_text(at)} is before {stamp(EARLIEST)} (a clock that was never set?)"
    if at > now + FUTURE_SLACK_S:
        return f"{time_text(at)} is in the future (now {stamp(now)}; a clock set wrong?)"
    return None


def finite_time(value: object) -> float | None:
    """A Unix time as JSON gives it (a number, not a boolean, finite); None otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)
