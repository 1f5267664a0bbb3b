"""What the history is made of: one observation of one node (a run's decision or a watch's drain)."""

from __future__ import annotations

import calendar
import math
import time
from dataclasses import dataclass
from typing import Literal

Source = Literal["run", "watch"]
STAMP = "%Y-%m-%dT%H:%M:%SZ"
"""How gate.json (``created``) and run.json (``started``) write times: UTC to the second."""


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
    """An input that was not read, and why."""

    path: str
    reason: str


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


def finite_time(value: object) -> float | None:
    """A Unix time as JSON gives it (a number, not a boolean, finite); None otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)
