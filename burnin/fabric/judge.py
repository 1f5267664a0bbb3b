"""Thresholds for fabric results (pure): references, medians, stragglers, slow rails.

Used both while measuring (does a pair pass? is the group below its
reference?) and by the checks, so the phase and the verdicts agree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from burnin.fabric.measure import NcclMeasurement, bandwidth_ok
from burnin.topology.model import Reference, Topology

DEFAULT_TOLERANCE = 0.10
MIN_FLEET = 3  # a median of fewer values says nothing about who is slow

SINGLE_REF = "nccl_single_busbw_gbps"
SINGLE_RING_REF = "nccl_single_busbw_ring_gbps"
SINGLE_OTHER_REF = "nccl_single_other_busbw_gbps"
FLEET_ONLY = ("alltoall", "sendrecv")  # no absolute reference in the catalog: judged against the run only
MULTI_REF = "nccl_multi_busbw_gbps"
RAIL_REF = "nccl_rail_busbw_gbps"
D2D_REF = "nvl_d2d_read_gbps"
H2D_REF = "nvl_h2d_gbps"
D2H_REF = "nvl_d2h_gbps"
P2P_REF = "nvl_p2p_unidir_gbps"
"""NVL-03: p2pBandwidthLatencyTest's P2P-enabled one-way bandwidth (P2P writes) per ordered GPU pair."""
P2P_LATENCY_REF = "nvl_p2p_latency_us"
"""NVL-03: its P2P-enabled write latency per ordered GPU pair (the GPU-timed table)."""
TOLERANCE_REF = "fabric_straggler_tolerance"
GDR_REF = "ib_write_bw_gdr_gbps"
GDR_HOST_REF = "ib_write_bw_host_gbps"
GDR_SPREAD_REF = "ib_write_bw_spread"
DEFAULT_GDR_SPREAD = 0.05


def tolerance(topology: Topology) -> float:
    ref = topology.ref(TOLERANCE_REF)
    return ref.value if ref is not None else DEFAULT_TOLERANCE


def single_reference(topology: Topology, nvls: bool | None) -> tuple[str, Reference | None]:
    key = SINGLE_REF if nvls is not False else SINGLE_RING_REF
    return key, topology.ref(key)


def floor(ref: Reference | None) -> float:
    return ref.lower if ref is not None and ref.lower is not None else 0.0


def gdr_spread(topology: Topology) -> float:
    ref = topology.ref(GDR_SPREAD_REF)
    return ref.value if ref is not None else DEFAULT_GDR_SPREAD


def median(values: Iterable[float | None]) -> float | None:
    """The median of the measured values (None, NaN and infinities are not measurements).

    Without ``statistics``: plain sorting is all a median of measurements needs.
    """
    data = sorted(v for v in values if bandwidth_ok(v))
    if not data:
        return None
    mid = len(data) // 2
    return float(data[mid]) if len(data) % 2 else (data[mid - 1] + data[mid]) / 2.0


def relative_floor(median_value: float | None, tol: float) -> float:
    return (1.0 - tol) * median_value if median_value is not None else 0.0


def pair_floor(topology: Topology, median_value: float | None) -> float:
    """A localisation test passes at or above max(reference floor, (1 - tolerance) x median of pass one)."""
    return max(floor(topology.ref(MULTI_REF)), relative_floor(median_value, tolerance(topology)))


def passed(measurement: NcclMeasurement, minimum: float) -> bool:
    """Completed, no wrong value, a real busbw of at least ``minimum``."""
    return (measurement.ok and not measurement.corrupt and bandwidth_ok(measurement.busbw_gbps)
            and measurement.busbw_gbps is not None and measurement.busbw_gbps >= minimum)


def describe(measurement: NcclMeasurement) -> str:
    """``sim01+sim04 184.2 GB/s``, ``... 12 wrong``, or ``... hung``."""
    if measurement.corrupt:
        return f"{measurement.label} {measurement.wrong} wrong values"
    if not measurement.ok:
        why = measurement.reason.split(";")[0]
        return f"{measurement.label} {why}"
    if not bandwidth_ok(measurement.busbw_gbps):
        return f"{measurement.label} busbw {measurement.busbw_gbps!r} (not a bandwidth)"
    return f"{measurement.label} {measurement.busbw_gbps:.1f} GB/s"


@dataclass(frozen=True, slots=True)
class Straggler:
    value: float
    median: float
    """The norm: the run's median, or the topology's reference value when that is higher (``count`` 0)."""
    tolerance: float
    count: int

    @property
    def below(self) -> float:
        return 1.0 - self.value / self.median if self.median else 0.0

    def describe(self, unit: str = "GB/s") -> str:
        norm = (f"the run's median {self.median:.1f} {unit} of {self.count}" if self.count
                else f"the topology's reference {self.median:g} {unit}")
        return f"straggler: {self.value:.1f} {unit} is {self.below:.0%} below {norm} (tolerance {self.tolerance:.0%})"


def straggler(value: float | None, fleet: Mapping[str, float] | None, tol: float,
              typical: float | None = None) -> Straggler | None:
    """``value`` more than ``tol`` below the norm: the fleet median (which needs MIN_FLEET values), but never
    less than the topology's reference value ``typical``, so a majority of slow nodes, whose median it is,
    cannot make itself the norm.

    A fleet entry that is not a real median and count (NaN, negative, not a number) is no fleet.
    """
    if value is None:
        return None
    norm: tuple[float, int] | None = None
    mid, count = (fleet.get("median"), fleet.get("count", 0)) if fleet else (None, 0)
    if bandwidth_ok(mid) and bandwidth_ok(count) and count >= MIN_FLEET:
        assert mid is not None
        norm = (mid, int(count))
    if bandwidth_ok(typical) and typical and (norm is None or typical > norm[0]):
        norm = (typical, 0)
    if norm is None or value >= (1.0 - tol) * norm[0]:
        return None
    return Straggler(value, norm[0], tol, norm[1])


def fleet_stats(values: Mapping[str, float | None]) -> dict[str, float]:
    """``{"median": m, "count": n}`` over the values that were measured."""
    data = [v for v in values.values() if bandwidth_ok(v)]
    mid = median(data)
    return {"median": round(mid, 3), "count": float(len(data))} if mid is not None else {}


@dataclass(frozen=True, slots=True)
class SlowRail:
    hca: str
    busbw_gbps: float
    median_gbps: float
    reason: str


def slow_rails(rails: Mapping[str, NcclMeasurement], topology: Topology) -> list[SlowRail]:
    """Rails of one node below (1 - tolerance) x the median of its rails, or below the rail reference."""
    values = {hca: m.busbw_gbps for hca, m in rails.items() if m.ok and bandwidth_ok(m.busbw_gbps)}
    mid = median(values.values())
    if mid is None:
        return []
    tol = tolerance(topology)
    ref_floor = floor(topology.ref(RAIL_REF))
    slow = []
    for hca, value in sorted(values.items()):
        assert value is not None
        if value < (1.0 - tol) * mid:
            slow.append(SlowRail(hca, value, mid, f"{value:.1f} GB/s vs {mid:.1f} GB/s median of the rails"))
        elif value < ref_floor:
            slow.append(SlowRail(hca, value, mid, f"{value:.1f} GB/s below the rail floor {ref_floor:g} GB/s"))
    if len(slow) == len(values):
        return []  # every rail alike: not one HCA (the node itself, or the partner)
    return slow
