"""Typed, frozen model of a node type (a topology) and its references.

A *reference* is an expectation with its provenance: a value, optional absolute
bounds, a unit, and where the figure comes from. Checks compare what they
measured against references; they never hard-code numbers.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Reference(_Frozen):
    """An expected value with bounds (``lower <= measured <= upper``), unit and source."""

    value: float
    lower: float | None = None
    upper: float | None = None
    unit: str = ""
    source: str

    @model_validator(mode="after")
    def _bounds_ordered(self) -> Reference:
        if self.lower is not None and self.upper is not None and self.lower > self.upper:
            raise ValueError(f"lower bound {self.lower} is above upper bound {self.upper}")
        return self

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


class GpuDevice(_Frozen):
    index: int = Field(ge=0)
    bus_id: str = Field(pattern=r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
    numa_node: int = Field(ge=0)
    hca: str | None = None
    """Compute HCA on the same PCIe switch (PIX), if the design pairs one."""


class NvlinkSpec(_Frozen):
    links_per_gpu: int = Field(ge=0)
    pair_link: str
    """What ``nvidia-smi topo -m`` shows between two GPUs, e.g. ``NV18``."""


class GpuSpec(_Frozen):
    count: int = Field(ge=1)
    model: str
    devices: tuple[GpuDevice, ...]
    nvlink: NvlinkSpec | None = None

    @model_validator(mode="after")
    def _devices_match_count(self) -> GpuSpec:
        if len(self.devices) != self.count:
            raise ValueError(f"count is {self.count} but {len(self.devices)} devices are listed")
        indexes = sorted(d.index for d in self.devices)
        if indexes != list(range(self.count)):
            raise ValueError(f"device indexes must be 0..{self.count - 1}, got {indexes}")
        return self


class Hca(_Frozen):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    bus_id: str = Field(pattern=r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
    numa_node: int = Field(ge=0)
    link_layer: Literal["InfiniBand", "Ethernet"]
    role: Literal["compute", "storage"]
    netdev: str | None = None


class NumaSpec(_Frozen):
    nodes: int = Field(ge=1)
    cpulists: dict[int, str]


class HostSpec(_Frozen):
    driver_version: str
    fabric_manager: bool = True
    peermem: bool = True
    persistence: bool = True
    mig: bool = False
    ecc: bool = True
    acs_disabled: bool = True
    iommu: Literal["off", "passthrough", "any"] = "passthrough"


class Topology(_Frozen):
    """A node type: its devices, layout, host settings and every threshold."""

    name: str
    description: str = ""
    gpus: GpuSpec
    hcas: tuple[Hca, ...] = ()
    numa: NumaSpec
    host: HostSpec
    references: dict[str, Reference]

    @model_validator(mode="after")
    def _cross_refs(self) -> Topology:
        names = {h.name for h in self.hcas}
        for dev in self.gpus.devices:
            if dev.hca is not None and dev.hca not in names:
                raise ValueError(f"gpu {dev.index} names hca {dev.hca!r}, which is not in hcas")
            if dev.numa_node >= self.numa.nodes:
                raise ValueError(f"gpu {dev.index} is on NUMA {dev.numa_node}, topology has {self.numa.nodes}")
        return self

    @property
    def compute_hcas(self) -> tuple[Hca, ...]:
        return tuple(h for h in self.hcas if h.role == "compute")

    @property
    def storage_hcas(self) -> tuple[Hca, ...]:
        return tuple(h for h in self.hcas if h.role == "storage")

    def ref(self, key: str) -> Reference | None:
        """The reference named ``key``, or None when the topology does not define it."""
        return self.references.get(key)
