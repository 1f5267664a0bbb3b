"""The values of a facts document, read once for every reader.

A node sends its facts; any field may be missing, of the wrong type, NaN or
absurd. Two ways to read a value, and only these:

- *read* (:func:`number`, :func:`count`, :func:`flag`, :func:`text`): the value
  when it is one, else ``None``. For what shows or follows readings (the report,
  metrics.prom, a soak's samples): ``None`` is "not measured", never 0.
- *measured* (:func:`measured_number`, :func:`measured_count`,
  :func:`measured_flag`): the value inside what the hardware can show at all
  (:class:`PhysicalRange`), else :class:`Unmeasurable` quoting it. For checks:
  their guard turns it into ``incomplete``, never ``pass``.

:class:`Reading` names one value of a record (its path and what it is), so a
path into the document is spelled once (burnin.facts.gpu, burnin.facts.hca).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from burnin.evaluate.verdict import Unmeasurable

T_co = TypeVar("T_co", covariant=True)

COUNTER_MAX = 2**64 - 1
"""Hardware error counters are unsigned and at most 64 bits wide."""


@dataclass(frozen=True, slots=True)
class PhysicalRange:
    """What a sensor or register can show at all (not what is healthy: that is the topology's)."""

    lo: float
    hi: float
    unit: str = ""

    def describe(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        return f"{self.lo:g}..{self.hi:g}{unit}"


ERROR_COUNT = PhysicalRange(0, COUNTER_MAX)
GPU_TEMPERATURE_C = PhysicalRange(0, 150, "C")  # NVML reports unsigned degrees; a running GPU shuts down near 92 C
GPU_TEMPERATURE_LIMIT_C = PhysicalRange(1, 150, "C")  # a threshold of 0 C is a threshold not set
POWER_LIMIT_MW = PhysicalRange(1000, 5_000_000, "mW")  # NVML reports milliwatts
PCIE_GENERATION = PhysicalRange(1, 7)
PCIE_WIDTH = PhysicalRange(1, 32, "lanes")
GPU_MEMORY_MIB = PhysicalRange(1, 2**24, "MiB")
CLOCK_EVENT_MASK = PhysicalRange(0, COUNTER_MAX)
GPU_COUNT = PhysicalRange(0, 1024)
NVML_ENUM = PhysicalRange(0, 2**32 - 1)  # an NVML enum or return code (unsigned int)
NUMA_NODE = PhysicalRange(-1, 1023)
NUMA_BALANCING_MODE = PhysicalRange(0, 3)
IB_RATE_GBPS = PhysicalRange(1, 10000, "Gb/s")


# ------------------------------------------------------------------ read: the value or None


def number(value: object) -> float | None:
    """``value`` as a finite float, or None (booleans, text, NaN, infinities, integers beyond a float)."""
    kind = type(value)  # exact types: bool is an int subclass and no number here
    if kind is float:
        return value if math.isfinite(value) else None  # type: ignore[arg-type,return-value]
    if kind is int:
        try:
            return float(value)  # type: ignore[arg-type]
        except OverflowError:
            return None
    return None


def count(value: object) -> int | None:
    """``value`` as a count (a whole number >= 0 sent as an integer), or None."""
    return value if type(value) is int and value >= 0 else None


def flag(value: object) -> bool | None:
    """``value`` as a yes/no sent as a boolean, or None."""
    return value if isinstance(value, bool) else None


def text(value: object) -> str | None:
    """``value`` when it is text, or None."""
    return value if isinstance(value, str) else None


def mapping(value: object) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def items(value: object) -> list[Any]:
    """``value`` when it is a JSON array, else an empty one."""
    return value if isinstance(value, list) else []


# ------------------------------------------------------------------ measured: the value or Unmeasurable


def quote(value: object) -> str:
    """A value as a reason quotes it (at most 40 characters)."""
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."


def measured_number(value: object, subject: str, what: str, valid: PhysicalRange, *,
                    integer: bool = False) -> float:
    """``value`` as a finite number inside its physical range, else Unmeasurable quoting it.

    ``None`` (not reported), booleans and strings, NaN and infinities, fractions
    where the hardware counts (``integer``) and values outside ``valid`` are
    not measurements.
    """
    # a JSON number inside its range (nearly every value): no other question to ask
    if type(value) is int:
        if valid.lo <= value <= valid.hi:
            return value
    elif type(value) is float and math.isfinite(value) and (not integer or value.is_integer()) \
            and valid.lo <= value <= valid.hi:
        return value
    if value is None:
        raise Unmeasurable(f"{subject} {what} not reported")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Unmeasurable(f"{subject} {what} {quote(value)} is not a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise Unmeasurable(f"{subject} {what} {quote(value)} is not a finite number")
    if integer and isinstance(value, float) and not value.is_integer():
        raise Unmeasurable(f"{subject} {what} {quote(value)} is not a whole number")
    if value < valid.lo or value > valid.hi:
        raise Unmeasurable(f"{subject} {what} {quote(value)} outside its physical range {valid.describe()}")
    return value


def measured_count(value: object, subject: str, what: str, valid: PhysicalRange = ERROR_COUNT) -> int:
    """A whole number (counter, index, mode) inside ``valid``; Unmeasurable otherwise."""
    return int(measured_number(value, subject, what, valid, integer=True))


def measured_flag(value: object, subject: str, what: str) -> bool:
    """A yes/no the collector reports as a boolean; anything else is not a measurement."""
    if value is None:
        raise Unmeasurable(f"{subject} {what} not reported")
    if not isinstance(value, bool):
        raise Unmeasurable(f"{subject} {what} {quote(value)} is not true/false")
    return value


# ------------------------------------------------------------------ named readings


@dataclass(frozen=True)
class Reading(Generic[T_co]):
    """One value of a record: its path inside the record and what it is (the reasons' words)."""

    path: tuple[str, ...]
    what: str

    def read(self, value: object) -> T_co | None:
        """``value`` as this reading when it is one; None otherwise."""
        raise NotImplementedError

    def measured(self, value: object, subject: str) -> T_co:
        """``value`` as this reading inside what the hardware can show; Unmeasurable quoting it otherwise."""
        raise NotImplementedError


@dataclass(frozen=True)
class Count(Reading[int]):
    """A counter, index or enum: read as :func:`count`, measured inside ``valid``."""

    valid: PhysicalRange = ERROR_COUNT

    def read(self, value: object) -> int | None:
        return count(value)

    def measured(self, value: object, subject: str) -> int:
        return measured_count(value, subject, self.what, self.valid)


@dataclass(frozen=True)
class Number(Reading[float]):
    """A sensor or setting: read as :func:`number`, measured inside ``valid``."""

    valid: PhysicalRange

    def read(self, value: object) -> float | None:
        return number(value)

    def measured(self, value: object, subject: str) -> float:
        return measured_number(value, subject, self.what, self.valid)


@dataclass(frozen=True)
class Flag(Reading[bool]):
    """A yes/no: read as :func:`flag`, measured as a boolean."""

    def read(self, value: object) -> bool | None:
        return flag(value)

    def measured(self, value: object, subject: str) -> bool:
        return measured_flag(value, subject, self.what)


def walk(record: object, path: tuple[str, ...]) -> Any:
    """The value at ``path`` inside nested JSON objects; None where the path ends early."""
    value: Any = record
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
        if value is None:
            return None
    return value
