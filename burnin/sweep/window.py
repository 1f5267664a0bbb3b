"""The sweep's window: ``--for 6h`` (a duration) or ``--until 06:00`` (the next such wall-clock time). Pure."""

from __future__ import annotations

import argparse
import re
from datetime import datetime, timedelta

from burnin.argtypes import MAX_SECONDS

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_CLOCK = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)$")


def duration(text: str) -> float:
    """``6h``, ``90m``, ``1h30m``, ``45s`` or plain seconds (``300``): seconds above 0, at most a week."""
    spec = text.strip().lower()
    if re.fullmatch(r"\d+(?:\.\d+)?", spec):
        value = float(spec)
    elif spec and re.fullmatch(rf"(?:{_PART.pattern})+", spec):
        value = sum(float(number) * _UNITS[unit] for number, unit in _PART.findall(spec))
    else:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (like 6h, 90m, 1h30m, 300)")
    if value <= 0 or value > MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"{text!r}: a window lasts more than 0 s and at most a week")
    return value


def clock(text: str) -> tuple[int, int]:
    """``HH:MM`` (24-hour) as hour and minute."""
    match = _CLOCK.match(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a time of day HH:MM (like 06:00)")
    return int(match.group(1)), int(match.group(2))


def seconds_until(hour: int, minute: int, now: datetime) -> float:
    """Seconds from ``now`` to the next ``hour:minute`` on its clock (tomorrow's when today's has passed)."""
    target = now.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if target <= now:
        target += timedelta(days=1)
    return (target - now).total_seconds()
