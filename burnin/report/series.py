"""Per-check measurement series across the fleet: what report.html plots.

A :class:`Measure` says which reading of :mod:`burnin.report.node_facts` a
check is about, its unit and the topology reference that bounds it. A
:class:`Series` is that reading on every node, with the bounds, the run's
median, the nodes the check failed and the outliers: nodes further from the
median than the fleet's spread explains.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from burnin.facts.values import number
from burnin.report.node_facts import NodeFacts

if TYPE_CHECKING:
    from burnin.topology.model import Topology


@dataclass(frozen=True, slots=True)
class Measure:
    reading: str
    check: str
    label: str
    unit: str
    reference: str | None = None
    """Topology reference key whose lower/upper bounds are drawn."""
    upper_reading: str | None = None
    """A per-node reading that is the upper bound (the GPU's own temperature limit)."""
    straggler: bool = False
    """Judged against the run's median too: draw the straggler line."""
    tolerance: str = "fabric_straggler_tolerance"
    """The topology reference (a fraction) that places the straggler line below the median."""
    spread: float = 0.0
    """Differences from the median up to this (in the unit) never stand out: sensor noise, e.g. 5 C."""
    sparse: bool = False
    """Measured on some nodes only (those localisation tested): nodes without it are not listed as missing."""


MEASURES: tuple[Measure, ...] = (
    Measure("gpu.count", "INV-01", "GPUs seen per node", "GPUs"),
    Measure("gpu.ecc_volatile_uncorrected_max", "GPU-01", "uncorrected ECC errors (worst GPU)", "errors",
            "ecc_uncorrected_volatile"),
    Measure("gpu.temperature_max", "GPU-06", "hottest GPU", "C", upper_reading="gpu.temperature_limit", spread=5.0),
    Measure("gpu.power_limit_min", "GPU-07", "lowest GPU power limit", "W", "power_limit_w"),
    Measure("gpu.pcie_width_min", "GPU-08", "narrowest GPU PCIe link", "lanes", "gpu_pcie_width"),
    Measure("gpu.pcie_gen_min", "GPU-08", "slowest GPU PCIe generation", "gen", "gpu_pcie_gen"),
    Measure("gpu.nvlink_active_min", "GPU-10", "NVLink links active (worst GPU)", "links", "nvlink_links_active"),
    Measure("gpu.nvlink_errors_max", "GPU-11", "NVLink replay/CRC errors (worst link)", "errors",
            "nvlink_replay_errors"),
    Measure("ib.rate_min", "IB-02", "InfiniBand rate (slowest port)", "Gb/s", "ib_rate_gbps"),
    Measure("ib.error_counter_max", "IB-04", "IB error counter (highest)", "count", "ib_error_counter"),
    Measure("ib.write_bw_min", "IB-08", "ib_write_bw loopback (slowest HCA)", "Gb/s", "ib_write_bw_gdr_gbps"),
    Measure("nccl.single.all_reduce.nvls", "NCCL-01", "single-node all_reduce busbw (NVLS)", "GB/s",
            "nccl_single_busbw_gbps", straggler=True),
    Measure("nccl.single.all_reduce.ring", "NCCL-01", "single-node all_reduce busbw (ring)", "GB/s",
            "nccl_single_busbw_ring_gbps", straggler=True),
    Measure("nccl.single.all_gather", "NCCL-02", "single-node all_gather busbw", "GB/s",
            "nccl_single_other_busbw_gbps", straggler=True),
    Measure("nccl.single.reduce_scatter", "NCCL-02", "single-node reduce_scatter busbw", "GB/s",
            "nccl_single_other_busbw_gbps", straggler=True),
    Measure("nccl.single.alltoall", "NCCL-02", "single-node alltoall busbw", "GB/s", straggler=True),
    Measure("nccl.pair_best", "NCCL-03", "best 2-node all_reduce busbw the node was in", "GB/s",
            "nccl_multi_busbw_gbps", sparse=True),
    Measure("nccl.rail_min", "NCCL-04", "slowest single-rail all_reduce (localised nodes)", "GB/s",
            "nccl_rail_busbw_gbps", sparse=True),
    Measure("nvl.d2d_read_min", "NVL-01", "nvbandwidth D2D read (slowest GPU pair)", "GB/s",
            "nvl_d2d_read_gbps", straggler=True),
    Measure("nvl.h2d_min", "NVL-02", "nvbandwidth host to device (slowest GPU)", "GB/s", "nvl_h2d_gbps",
            straggler=True),
    Measure("nvl.d2h_min", "NVL-02", "nvbandwidth device to host (slowest GPU)", "GB/s", "nvl_d2h_gbps",
            straggler=True),
    Measure("megatron.single_tflops", "MEG-04", "Megatron single-node throughput per GPU", "TFLOP/s",
            "megatron_tflops_per_gpu", straggler=True, tolerance="megatron_straggler_tolerance"),
    Measure("storage.compute_hca_bytes_max", "STO-03", "bytes a compute HCA moved during storage I/O (most)",
            "bytes"),
)


@dataclass(frozen=True, slots=True)
class Point:
    label: str
    value: float
    status: str
    """The check's verdict on this node (``pass``, ``fail``, ``incomplete``, ``not-applicable`` or "")."""
    outlier: bool = False


@dataclass(frozen=True, slots=True)
class Line:
    label: str
    value: float
    kind: str
    """``bound`` (a topology threshold), ``straggler`` (fleet-relative) or ``median``."""


@dataclass(frozen=True, slots=True)
class Series:
    measure: Measure
    points: tuple[Point, ...]
    lines: tuple[Line, ...]
    missing: tuple[str, ...] = ()
    """Nodes of the run with no value for this reading."""
    notes: tuple[str, ...] = field(default=())

    @property
    def attention(self) -> bool:
        """True when a point failed, was left incomplete or stands out."""
        return any(p.outlier or p.status in ("fail", "incomplete") for p in self.points)


def outliers(values: Sequence[float], noise: float = 0.0) -> list[bool]:
    """Values further from the median than 4 median absolute deviations, 5% of the median and ``noise``.

    With a spread of zero (every healthy node reads the same) any other value
    stands out; the 5% floor keeps ordinary noise of a tight fleet unmarked.
    """
    if len(values) < 3:
        return [False] * len(values)
    middle = statistics.median(values)
    spread = statistics.median(abs(v - middle) for v in values)
    allowed = max(4 * spread, 0.05 * abs(middle), noise)
    return [abs(v - middle) > allowed for v in values]


def _bound_lines(measure: Measure, topology: Topology | None, upper_values: Iterable[float]) -> list[Line]:
    lines: list[Line] = []
    reference = topology.references.get(measure.reference) if topology and measure.reference else None
    if reference is not None:
        if reference.lower is not None and reference.lower == reference.upper:
            lines.append(Line(f"= {reference.lower:g}", reference.lower, "bound"))
        else:
            if reference.lower is not None:
                lines.append(Line(f">= {reference.lower:g}", reference.lower, "bound"))
            if reference.upper is not None:
                lines.append(Line(f"<= {reference.upper:g}", reference.upper, "bound"))
    limits = sorted(upper_values)
    if limits and measure.upper_reading == "gpu.temperature_limit":
        margin_ref = topology.references.get("gpu_temp_margin_c") if topology else None
        margin = (margin_ref.lower if margin_ref and margin_ref.lower is not None else
                  margin_ref.value if margin_ref else 0.0)
        limit = statistics.median(limits) - margin
        lines.append(Line(f"<= {limit:g} (GPU max - {margin:g})", limit, "bound"))
    return lines


def _straggler_tolerance(topology: Topology | None, key: str) -> float | None:
    reference = topology.references.get(key) if topology else None
    return number(reference.value) if reference is not None else None


def build_series(nodes: Sequence[str], facts: Mapping[str, NodeFacts], status: Mapping[tuple[str, str], str],
                 topology: Topology | None, measures: Sequence[Measure] = MEASURES) -> list[Series]:
    """One :class:`Series` per measure that at least one node has a reading for, in ``measures`` order."""
    result: list[Series] = []
    for measure in measures:
        tolerance = _straggler_tolerance(topology, measure.tolerance)
        present = [(n, facts[n].readings[measure.reading]) for n in nodes
                   if n in facts and measure.reading in facts[n].readings]
        if not present:
            continue
        values = [v for _, v in present]
        marks = outliers(values, measure.spread)
        points = tuple(Point(n, v, status.get((n, measure.check), ""), mark)
                       for (n, v), mark in zip(present, marks, strict=True))
        uppers = [facts[n].readings[measure.upper_reading] for n, _ in present
                  if measure.upper_reading and measure.upper_reading in facts[n].readings]
        lines = _bound_lines(measure, topology, uppers)
        fleet = [facts[n].readings[f"fleet.{measure.reading}"] for n, _ in present
                 if f"fleet.{measure.reading}" in facts[n].readings]
        # the median the fabric checks judged against, where the run recorded it
        middle = statistics.median(fleet) if fleet else statistics.median(values)
        lines.append(Line(f"median {middle:.4g}", middle, "median"))
        if measure.straggler and tolerance is not None and len(values) >= 2:
            lines.append(Line(f"median -{tolerance:.0%}", middle * (1 - tolerance), "straggler"))
        with_value = {n for n, _ in present}
        missing = () if measure.sparse else tuple(n for n in nodes if n not in with_value)
        result.append(Series(measure, points, tuple(lines), missing))
    return result
