"""Series summaries, drift, creep and stragglers: the pure judging of a soak's series."""

from __future__ import annotations

import math

import pytest

from burnin.soak import drift

HOUR = 3600.0


def linear(start: float, per_hour: float, hours: float, step_s: float = 600.0) -> list[tuple[float, float]]:
    count = int(hours * HOUR / step_s) + 1
    return [(k * step_s, start + per_hour * k * step_s / HOUR) for k in range(count)]


def test_summary_carries_first_last_min_slope_and_window_means() -> None:
    summary = drift.summarize(linear(100.0, -2.0, 4), HOUR)
    assert summary is not None
    assert (summary.first, summary.last, summary.min, summary.max) == (100.0, 92.0, 92.0, 100.0)
    assert summary.slope_per_h == pytest.approx(-2.0)
    assert summary.first_window == pytest.approx(99.0)  # points at 0..60 min
    assert summary.last_window == pytest.approx(93.0)  # points at 180..240 min
    assert "first 100.0, last 92.0, min 92.0, slope -2.0 GB/s/h" in summary.describe("GB/s")


@pytest.mark.parametrize(("per_hour", "tolerance", "expected"), [
    (-2.0, 0.05, True),     # 6% fall over 3 h between the window means: fails
    (-1.0, 0.05, False),    # 3%: passes
    (-1.0, 0.0302, False),  # window means 99.5 -> 96.5: a fall of 3.015%
    (-1.0, 0.0301, True),
    (+3.0, 0.05, False),    # a rise is not a drift
    (0.0, 0.0, False),
])
def test_drift_first_vs_last_hour(per_hour: float, tolerance: float, expected: bool) -> None:
    summary = drift.summarize(linear(100.0, per_hour, 4), HOUR)
    assert summary is not None
    assert drift.drifted(summary, tolerance) is expected


def test_too_few_points_cannot_be_judged() -> None:
    short = drift.summarize([(0.0, 100.0), (HOUR / 2, 90.0)], HOUR)  # spans less than a window
    assert short is not None and drift.drifted(short, 0.05) is None
    sparse = drift.summarize([(0.0, 100.0), (3 * HOUR, 80.0)], HOUR)  # one point per window
    assert sparse is not None and drift.drifted(sparse, 0.05) is None
    one_each = drift.summarize([(0.0, 100.0), (3 * HOUR, 80.0)], HOUR, min_points=1)
    assert one_each is not None and drift.drifted(one_each, 0.05) is True
    assert drift.summarize([], HOUR) is None


def test_non_finite_values_are_left_out() -> None:
    summary = drift.summarize([(0.0, math.nan), (10.0, 5.0), (20.0, math.inf)], HOUR)
    assert summary is not None and summary.points == 1 and summary.first == 5.0


@pytest.mark.parametrize(("per_hour", "tolerance", "expected"), [
    (2.5, 5.0, True),   # +7.5 C between the first and last hour of 4
    (1.0, 5.0, False),
    (-3.0, 5.0, False),  # cooling down is not creep
])
def test_creep(per_hour: float, tolerance: float, expected: bool) -> None:
    summary = drift.summarize(linear(60.0, per_hour, 4, step_s=240), HOUR)
    assert summary is not None
    assert drift.crept(summary, tolerance) is expected


def test_window_is_an_hour_or_a_quarter_of_a_short_soak() -> None:
    assert drift.window_for(24 * HOUR) == HOUR
    assert drift.window_for(2 * HOUR) == HOUR / 2


def test_stragglers_below_the_median_by_more_than_the_tolerance() -> None:
    values = {"gpu0": 100.0, "gpu1": 101.0, "gpu2": 99.0, "gpu3": 94.0, "gpu4": 100.5}
    slow = drift.stragglers(values, 0.05)
    assert list(slow) == ["gpu3"]
    value, middle, shortfall = slow["gpu3"]
    assert (value, middle) == (94.0, 100.0) and shortfall == pytest.approx(0.06)
    assert drift.stragglers(values, 0.07) == {}
    assert drift.stragglers({"only": 1.0}, 0.05) == {}  # nothing to compare against
    assert drift.stragglers({"a": 0.0, "b": 0.0}, 0.05) == {}
