"""Argument types that refuse nonsense at parse time (argparse then exits 2 with one message)."""

from __future__ import annotations

import argparse
import math

# A week: longer is a typo, and beyond ~1e9 s thread waits raise OverflowError.
MAX_SECONDS = 7 * 24 * 3600.0


def seconds(text: str) -> float:
    """A finite, positive number of seconds (``nan``, ``inf``, 0 and negatives are refused)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0 or value > MAX_SECONDS:
        raise argparse.ArgumentTypeError(
            f"{text!r}: seconds must be a finite number above 0 and at most {MAX_SECONDS:g}")
    return value


def positive_int(text: str) -> int:
    """A whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: must be at least 1")
    return value
