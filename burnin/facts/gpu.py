"""One GPU of a facts document (an entry of NVML's ``nvml.gpus``), read through named readings.

The paths into a GPU's entry are spelled here only: the checks measure a
:class:`~burnin.facts.values.Reading` (``gpu.measured(TEMPERATURE, subject)``),
the report, metrics.prom and a soak's samples read it (``gpu.read(TEMPERATURE)``).
"""

from __future__ import annotations

from typing import Any, TypeVar

from burnin.evaluate.verdict import Unmeasurable
from burnin.facts.values import (
    CLOCK_EVENT_MASK,
    GPU_TEMPERATURE_C,
    GPU_TEMPERATURE_LIMIT_C,
    NVML_ENUM,
    PCIE_GENERATION,
    PCIE_WIDTH,
    POWER_LIMIT_MW,
    Count,
    Flag,
    Number,
    Reading,
    count,
    items,
    mapping,
    measured_number,
    number,
    text,
    walk,
)

T = TypeVar("T")

ECC_VOLATILE_UNCORRECTED = Count(("ecc_errors", "volatile_uncorrected"), "volatile uncorrectable ECC count")
ECC_AGGREGATE_UNCORRECTED = Count(("ecc_errors", "aggregate_uncorrected"), "aggregate uncorrectable ECC count")
ECC_VOLATILE_CORRECTED = Count(("ecc_errors", "volatile_corrected"), "volatile correctable ECC count")
SRAM_UNCORRECTED = Count(("ecc_errors", "sram_aggregate_uncorrected"), "SRAM aggregate uncorrectable ECC count")
REMAPPED_CORRECTABLE = Count(("remapped_rows", "correctable"), "rows remapped for correctable errors")
REMAPPED_UNCORRECTABLE = Count(("remapped_rows", "uncorrectable"), "rows remapped for uncorrectable errors")
REMAP_PENDING = Flag(("remapped_rows", "pending"), "row remap pending")
REMAP_FAILURE = Flag(("remapped_rows", "failure"), "row remap failure")
CLOCK_EVENT_REASONS = Count(("clock_event_reasons",), "clock event reasons", CLOCK_EVENT_MASK)
TEMPERATURE = Number(("temperature_c",), "temperature", GPU_TEMPERATURE_C)
POWER_LIMIT = Number(("power", "enforced_limit_mw"), "enforced power limit (mW)", POWER_LIMIT_MW)
PCIE_GEN = Count(("pcie", "curr_gen"), "PCIe link generation", PCIE_GENERATION)
PCIE_MAX_GEN = Count(("pcie", "max_gen"), "PCIe max generation", PCIE_GENERATION)
PCIE_WIDTH_NOW = Count(("pcie", "curr_width"), "PCIe link width", PCIE_WIDTH)
PERSISTENCE = Flag(("persistence_mode",), "persistence mode")
FABRIC_STATE = Count(("fabric", "state"), "fabric state", NVML_ENUM)
FABRIC_STATUS = Count(("fabric", "status"), "fabric status", NVML_ENUM)
MIG_MODE = Count(("mig_mode", "current"), "MIG mode", NVML_ENUM)
MIG_MODE_PENDING = Count(("mig_mode", "pending"), "pending MIG mode", NVML_ENUM)
ECC_MODE = Flag(("ecc_mode", "current"), "ECC mode")
ECC_MODE_PENDING = Flag(("ecc_mode", "pending"), "pending ECC mode")

NVLINK_COUNTERS = ("replay", "recovery", "crc_flit")
"""The error counters of an NVLink link entry."""

LOST = "NVML_ERROR_GPU_IS_LOST"


class GpuFacts:
    """One GPU's entry; ``raw`` is the entry itself (a JSON object)."""

    __slots__ = ("raw",)

    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw = raw

    def __repr__(self) -> str:
        return f"GpuFacts(index={self.raw.get('index')!r}, bus_id={self.raw.get('bus_id')!r})"

    # -------------------------------------------------------------- identity

    @property
    def index(self) -> int | None:
        """NVML's index (it renumbers when a GPU is missing: match by :attr:`bus_id`)."""
        return count(self.raw.get("index"))

    @property
    def bus_id(self) -> str | None:
        return text(self.raw.get("bus_id"))

    @property
    def name(self) -> str | None:
        return text(self.raw.get("name"))

    @property
    def lost(self) -> bool:
        """NVML answers ``GPU_IS_LOST`` for the GPU (it fell off the bus but is still enumerated)."""
        return bool(self.raw.get("lost"))

    @property
    def errors(self) -> dict[str, Any]:
        """NVML's error per field it could not read (``{"nvlink_7_state": "NVML_ERROR_..."}``)."""
        return mapping(self.raw.get("errors"))

    @property
    def unanswered(self) -> str | None:
        """Why NVML answers nothing for the GPU (lost, no handle); None when it answers."""
        if self.lost:
            return LOST
        errors = self.errors
        return str(errors["handle"]) if "handle" in errors else None

    # -------------------------------------------------------------- values

    def get(self, *path: str) -> Any:
        """The raw value at ``path``; None when absent."""
        return walk(self.raw, path)

    def field(self, *path: str) -> Any:
        """The raw value at ``path``; Unmeasurable with NVML's own error when absent.

        The reason does not name the GPU: the checks file it under the GPU's subject.
        """
        value = walk(self.raw, path)
        if value is None:
            errors = self.errors
            error = errors.get(path[0]) or next((e for k, e in errors.items() if k.startswith(path[0])), None)
            raise Unmeasurable(f"{'.'.join(path)}: {error or 'not reported'}")
        return value

    def read(self, reading: Reading[T]) -> T | None:
        """The reading when the GPU reported it as one; None otherwise."""
        return reading.read(walk(self.raw, reading.path))

    def measured(self, reading: Reading[T], subject: str) -> T:
        """The reading inside its physical range; Unmeasurable quoting what the GPU reported otherwise."""
        return reading.measured(self.field(*reading.path), subject)

    # -------------------------------------------------------------- temperature limit

    def _limit_name(self) -> str:
        thresholds = mapping(self.raw.get("temperature_thresholds"))
        # The catalog's limit is GPU_MAX; a driver without it still reports the slowdown threshold.
        return "gpu_max" if thresholds.get("gpu_max") is not None else "slowdown"

    def temperature_limit(self) -> float | None:
        """The GPU's max operating temperature (GPU_MAX, else the slowdown threshold); None when unread."""
        return number(mapping(self.raw.get("temperature_thresholds")).get(self._limit_name()))

    def measured_temperature_limit(self, subject: str) -> float:
        thresholds = self.field("temperature_thresholds")
        if not isinstance(thresholds, dict):
            raise Unmeasurable(f"{subject} temperature thresholds unreadable")
        name = self._limit_name()
        return measured_number(thresholds.get(name), subject, f"{name} temperature threshold",
                               GPU_TEMPERATURE_LIMIT_C)

    # -------------------------------------------------------------- NVLink

    def links(self) -> list[dict[str, Any]]:
        """The NVLink entries that are JSON objects (``{"link", "active", "replay", ...}``)."""
        return [link for link in items(self.raw.get("nvlink")) if isinstance(link, dict)]

    def measured_links(self, subject: str) -> list[dict[str, Any]]:
        """The NVLink entries; Unmeasurable when the list or any link's state could not be read."""
        links = self.field("nvlink")
        if not isinstance(links, list) or not all(isinstance(link, dict) for link in links):
            raise Unmeasurable(f"{subject} NVLink list unreadable")
        unread = self.unread_link_states()
        if unread:
            raise Unmeasurable(f"{subject} NVLink state unreadable: {unread}")
        return links

    def unread_link_states(self) -> str:
        """The links whose state NVML could not read, with its errors (at most four); empty when none."""
        errors = self.errors
        unread = sorted(k for k in errors if str(k).startswith("nvlink_") and str(k).endswith("_state"))
        return ", ".join(f"{k[:-6]}: {errors[k]}" for k in unread[:4])

    def link_error(self, link: object, counter: str) -> str | None:
        """NVML's error for one link's counter (``nvlink_7_replay``), when it gave one."""
        error = self.errors.get(f"nvlink_{link}_{counter}")
        return str(error) if error else None

    def nvlink_active(self) -> int | None:
        """How many links report active; None when the GPU lists no NVLink entries."""
        links = self.links()
        return sum(1 for link in links if link.get("active") is True) if links else None

    def nvlink_total(self, counter: str) -> int | None:
        """``counter`` summed over the links; None unless every link reports it as a count."""
        raw = self.raw.get("nvlink")
        if not isinstance(raw, list):
            return None
        total = 0
        for link in raw:
            value = count(link.get(counter)) if isinstance(link, dict) else None
            if value is None:
                return None
            total += value
        return total

    def nvlink_max(self, *counters: str) -> float | None:
        """The highest of ``counters`` on any link (values that are no finite number are skipped)."""
        values = [v for link in self.links() for name in counters if (v := number(link.get(name))) is not None]
        return max(values, default=None)
