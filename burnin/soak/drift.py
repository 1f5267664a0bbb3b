"""Series over a soak and their verdicts (pure): drift, stragglers, temperature creep.

A series is ``(t, value)`` points of one thing (a GPU's gpu_burn Gflop/s, a
node's all_reduce busbw, a socket's STREAM triad, a GPU's temperature under
load). :func:`summarize` gives first, last, min, max, mean, the least-squares
slope per hour and the means of the first and the last window (an hour, or a
quarter of a shorter soak) of the series' own span.

- drift: the last window's mean below the first window's by more than the
  tolerance (BRN-06: > 5% fails; BRN-03: > 3% for busbw);
- creep: the last window's mean above the first's by more than the tolerance;
- stragglers: a value more than the tolerance below the median of its peers
  (a GPU against its node, a node against the fleet).

Too few points to judge is ``None`` (the caller makes it incomplete), never a pass.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

HOUR_S = 3600.0
MIN_WINDOW_POINTS = 2


@dataclass(frozen=True, slots=True)
class Summary:
    points: int
    first: float
    last: float
    min: float
    max: float
    mean: float
    slope_per_h: float
    first_window: float | None  # mean of the points in the first window
    last_window: float | None  # mean of the points in the last window
    window_s: float

    def describe(self, unit: str, digits: int = 1) -> str:
        def f(value: float | None) -> str:
            return "n/a" if value is None else f"{value:.{digits}f}"

        label = "hour" if self.window_s >= HOUR_S else f"{self.window_s / 60:.0f} min"
        return (f"first {f(self.first)}, last {f(self.last)}, min {f(self.min)}, slope {self.slope_per_h:+.{digits}f} "
                f"{unit}/h; first {label} mean {f(self.first_window)}, last {label} mean {f(self.last_window)} {unit}")

    def to_json(self) -> dict[str, float | int | None]:
        return {"points": self.points, "first": self.first, "last": self.last, "min": self.min, "max": self.max,
                "mean": self.mean, "slope_per_h": self.slope_per_h, "first_window": self.first_window,
                "last_window": self.last_window, "window_s": self.window_s}


def window_for(duration_s: float) -> float:
    """An hour, or a quarter of a soak shorter than four hours."""
    return min(HOUR_S, duration_s / 4)


def _slope(points: Sequence[tuple[float, float]]) -> float:
    if len(points) < 2:
        return 0.0
    ts = [t for t, _ in points]
    vs = [v for _, v in points]
    mt, mv = statistics.fmean(ts), statistics.fmean(vs)
    var = sum((t - mt) ** 2 for t in ts)
    if var == 0:
        return 0.0
    return sum((t - mt) * (v - mv) for t, v in points) / var * HOUR_S


def summarize(points: Sequence[tuple[float, float]], window_s: float, *,
              min_points: int = MIN_WINDOW_POINTS) -> Summary | None:
    """The series' summary; None without a point. Non-finite values are left out.

    A window's mean needs ``min_points`` points in it (1 for a series of one point per stage, each
    itself an average, like all_reduce busbw); with fewer it is None.
    """
    clean = sorted((t, v) for t, v in points if math.isfinite(t) and math.isfinite(v))
    if not clean:
        return None
    first_t, last_t = clean[0][0], clean[-1][0]
    values = [v for _, v in clean]
    spans = last_t - first_t >= window_s
    head = [v for t, v in clean if t <= first_t + window_s]
    tail = [v for t, v in clean if t >= last_t - window_s]
    return Summary(
        points=len(clean), first=values[0], last=values[-1], min=min(values), max=max(values),
        mean=statistics.fmean(values), slope_per_h=_slope(clean),
        first_window=statistics.fmean(head) if spans and len(head) >= min_points else None,
        last_window=statistics.fmean(tail) if spans and len(tail) >= min_points else None,
        window_s=window_s,
    )


def fall(summary: Summary) -> float | None:
    """How far the last window's mean fell below the first's, as a fraction of the first (negative: it rose)."""
    if summary.first_window is None or summary.last_window is None or summary.first_window <= 0:
        return None
    return (summary.first_window - summary.last_window) / summary.first_window


def drifted(summary: Summary, tolerance: float) -> bool | None:
    """True: fell by more than ``tolerance``; None: not enough points in the first or last window."""
    share = fall(summary)
    return None if share is None else share > tolerance


def rise(summary: Summary) -> float | None:
    if summary.first_window is None or summary.last_window is None:
        return None
    return summary.last_window - summary.first_window


def crept(summary: Summary, tolerance: float) -> bool | None:
    """True: the last window's mean is more than ``tolerance`` above the first's."""
    grown = rise(summary)
    return None if grown is None else grown > tolerance


def median(values: Sequence[float]) -> float | None:
    clean = [v for v in values if math.isfinite(v)]
    return statistics.median(clean) if clean else None


def stragglers(values: Mapping[str, float], tolerance: float, *,
               reference: float | None = None) -> dict[str, tuple[float, float, float]]:
    """Members more than ``tolerance`` below the norm: name -> (value, norm, shortfall).

    The norm is the median of all (of two members at least), or ``reference`` where that is higher: a
    majority of slow members cannot make itself the norm.
    """
    middle = median(list(values.values())) if len(values) >= 2 else None
    if reference is not None:
        middle = reference if middle is None else max(middle, reference)
    if middle is None or middle <= 0:
        return {}
    out: dict[str, tuple[float, float, float]] = {}
    for name, value in values.items():
        shortfall = (middle - value) / middle
        if shortfall > tolerance:
            out[name] = (value, middle, shortfall)
    return out
