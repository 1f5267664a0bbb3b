"""The sweep's window: durations and times of day, bad ones refused at parse time."""

from __future__ import annotations

import argparse
from datetime import datetime

import pytest

from burnin.sweep.window import clock, duration, seconds_until


@pytest.mark.parametrize(("text", "seconds"), [("6h", 21600), ("90m", 5400), ("1h30m", 5400), ("45s", 45),
                                                ("300", 300), ("1.5h", 5400), ("1d", 86400),
                                                ("0.5", 0.5), ("7d", 604800)])
def test_duration_reads_units(text: str, seconds: float) -> None:
    assert duration(text) == seconds


@pytest.mark.parametrize("text", ["", "0", "0h", "6x", "h", "-5m", "8d", "6 h", "nan"])
def test_duration_refuses_nonsense(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        duration(text)


def test_clock_reads_a_time_of_day_and_refuses_others() -> None:
    assert clock("06:00") == (6, 0)
    assert clock("23:59") == (23, 59)
    for bad in ("24:00", "6", "06:60", "06:00:00", "noon"):
        with pytest.raises(argparse.ArgumentTypeError):
            clock(bad)


def test_until_is_the_next_such_time() -> None:
    evening = datetime(2026, 12, 1, 22, 30)
    assert seconds_until(6, 0, evening) == 7.5 * 3600  # tomorrow morning
    assert seconds_until(23, 0, evening) == 1800  # later today
    assert seconds_until(22, 30, evening) == 24 * 3600  # now: the next one
