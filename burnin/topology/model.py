"""Typed, frozen model of a node type (a topology) and its references.

A *reference* is an expectation with its provenance: a value, optional absolute
bounds, a unit, and where the figure comes from. Checks compare what they
measured against references; they never hard-code numbers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

# Plain frozen dataclasses, so the health probe can use them without importing
# pydantic; burnin.topology.load validates files into them with pydantic.
_FORBID: Any = {"extra": "forbid"}
_BUS_ID = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


class AtLeast:
    """Field constraint ``>= bound`` that pydantic applies when it validates a file.

    Written as a plain class so that importing this module does not import
    pydantic (the health probe builds these dataclasses from a cache).
    """

    def __init__(self, bound: int) -> None:
        self.bound = bound

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        return core_schema.int_schema(ge=self.bound)


NonNegative = Annotated[int, AtLeast(0)]
Positive = Annotated[int, AtLeast(1)]


def _check_bus_id(value: str) -> None:
    if not _BUS_ID.match(value):
        raise ValueError(f"bus id {value!r} must look like 0000:1b:00.0 (lower-case hex)")


@dataclass(frozen=True, slots=True)
class Reference:
    """An expected value with bounds (``lower <= measured <= upper``), unit and source."""

    value: float
    source: str
    lower: float | None = None
    upper: float | None = None
    unit: str = ""

    __pydantic_config__ = _FORBID

    def __post_init__(self) -> None:
        if self.lower is not None and self.upper is not None and self.lower > self.upper:
            raise ValueError(f"lower bound {self.lower} is above upper bound {self.upper}")

    def admits(self, measured: float) -> bool:
        """True when ``measured`` lies within the bounds (inclusive)."""
        if self.lower is not None and measured < self.lower:
            return False
        return not (self.upper is not None and measured > self.upper)

    def describe(self) -> str:
        """Human form of the acceptable range, e.g. ``>= 400 Gb/s``."""
        unit = f" {self.unit}" if self.unit else ""
        if self.lower is not None and self.upper is not None:
            if self.lower == self.upper:
                return f"{_num(self.lower)}{unit}"
            return f"{_num(self.lower)}..{_num(self.upper)}{unit}"
        if self.lower is not None:
            return f">= {_num(self.lower)}{unit}"
        if self.upper is not None:
            return f"<= {_num(self.upper)}{unit}"
        return f"{_num(self.value)}{unit}"


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


@dataclass(frozen=True, slots=True)
class GpuDevice:
    __pydantic_config__ = _FORBID
    index: NonNegative
    bus_id: str
    numa_node: NonNegative
    hca: str | None = None
    """Compute HCA on the same PCIe switch (PIX), if the design pairs one."""

    def __post_init__(self) -> None:
        _check_bus_id(self.bus_id)


@dataclass(frozen=True, slots=True)
class NvlinkSpec:
    __pydantic_config__ = _FORBID
    links_per_gpu: NonNegative
    pair_link: str
    """What ``nvidia-smi topo -m`` shows between two GPUs, e.g. ``NV18``."""


@dataclass(frozen=True, slots=True)
class GpuSpec:
    __pydantic_config__ = _FORBID
    count: Positive
    model: str
    devices: tuple[GpuDevice, ...]
    nvlink: NvlinkSpec | None = None

    def __post_init__(self) -> None:
        if len(self.devices) != self.count:
            raise ValueError(f"count is {self.count} but {len(self.devices)} devices are listed")
        indexes = sorted(d.index for d in self.devices)
        if indexes != list(range(self.count)):
            raise ValueError(f"device indexes must be 0..{self.count - 1}, got {indexes}")


@dataclass(frozen=True, slots=True)
class Hca:
    __pydantic_config__ = _FORBID
    name: str
    bus_id: str
    numa_node: NonNegative
    link_layer: Literal["InfiniBand", "Ethernet"]
    role: Literal["compute", "storage"]
    netdev: str | None = None

    def __post_init__(self) -> None:
        _check_bus_id(self.bus_id)
        if not re.match(r"^[A-Za-z0-9_.-]+$", self.name):
            raise ValueError(f"HCA name {self.name!r} has characters other than letters, digits, '_', '.', '-'")


@dataclass(frozen=True, slots=True)
class NumaSpec:
    __pydantic_config__ = _FORBID
    nodes: Positive
    cpulists: dict[int, str]


@dataclass(frozen=True, slots=True)
class HostSpec:
    __pydantic_config__ = _FORBID
    driver_version: str
    fabric_manager: bool = True
    peermem: bool = True
    persistence: bool = True
    mig: bool = False
    ecc: bool = True
    acs_disabled: bool = True
    iommu: Literal["off", "passthrough", "any"] = "passthrough"


@dataclass(frozen=True, slots=True)
class Topology:
    """A node type: its devices, layout, host settings and every threshold."""

    __pydantic_config__ = _FORBID
    name: str
    gpus: GpuSpec
    numa: NumaSpec
    host: HostSpec
    references: dict[str, Reference]
    description: str = ""
    hcas: tuple[Hca, ...] = field(default=())

    def __post_init__(self) -> None:
        names = {h.name for h in self.hcas}
        for dev in self.gpus.devices:
            if dev.hca is not None and dev.hca not in names:
                raise ValueError(f"gpu {dev.index} names hca {dev.hca!r}, which is not in hcas")
            if dev.numa_node >= self.numa.nodes:
                raise ValueError(f"gpu {dev.index} is on NUMA {dev.numa_node}, topology has {self.numa.nodes}")

    @property
    def compute_hcas(self) -> tuple[Hca, ...]:
        return tuple(h for h in self.hcas if h.role == "compute")

    @property
    def storage_hcas(self) -> tuple[Hca, ...]:
        return tuple(h for h in self.hcas if h.role == "storage")

    def ref(self, key: str) -> Reference | None:
        """The reference named ``key``, or None when the topology does not define it."""
        return self.references.get(key)
