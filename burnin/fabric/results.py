"""What the fabric phase measured, and each node's share of it as facts (pure).

:class:`PhaseResult` is the whole run (written to ``OUT/fabric.json``);
:func:`node_documents` cuts it into one ``fabric`` facts section per node,
with the run's medians (``fleet``) so a check judging one node can also say
whether it is a straggler.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from burnin.fabric import judge
from burnin.fabric.measure import GdrMeasurement, NcclMeasurement, NvbMeasurement, bandwidth_ok
from burnin.fabric.nvlink_after import SECTION as NVLINK_AFTER
from burnin.fabric.p2p import P2pMeasurement

if TYPE_CHECKING:
    from burnin.fabric.settings import FabricSettings

D2D_READ = "device_to_device_memcpy_read_ce"
H2D = "host_to_device_memcpy_ce"
D2H = "device_to_host_memcpy_ce"


@dataclass(frozen=True, slots=True)
class JobRecord:
    round: int
    kind: str
    nodes: tuple[str, ...]
    suspect: str | None
    passed: bool
    measurement: NcclMeasurement

    def to_json(self) -> dict[str, Any]:
        return {"round": self.round, "kind": self.kind, "nodes": list(self.nodes), "suspect": self.suspect,
                "passed": self.passed, "measurement": self.measurement.to_json()}


@dataclass
class Localization:
    floor_gbps: float
    median_gbps: float | None
    tests: list[JobRecord] = field(default_factory=list)
    rounds: int = 0
    named: list[str] = field(default_factory=list)
    cleared: list[str] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)
    rails: dict[str, dict[str, NcclMeasurement]] = field(default_factory=dict)
    rail_partner: dict[str, str] = field(default_factory=dict)
    slow: dict[str, list[judge.SlowRail]] = field(default_factory=dict)
    planning_ms: float = 0.0
    reason: str = ""
    """Why it ran: the group failed, or --localize."""

    def status(self, node: str) -> str:
        if node in self.named:
            return "named"
        if node in self.unresolved:
            return "unresolved"
        return "cleared" if node in self.cleared else "not-tested"

    def to_json(self) -> dict[str, Any]:
        return {"floor_gbps": self.floor_gbps, "median_gbps": self.median_gbps, "rounds": self.rounds,
                "named": self.named, "cleared": self.cleared, "unresolved": self.unresolved,
                "planning_ms": round(self.planning_ms, 3), "reason": self.reason,
                "tests": [t.to_json() for t in self.tests],
                "rails": {n: {h: m.to_json() for h, m in r.items()} for n, r in self.rails.items()},
                "rail_partner": self.rail_partner,
                "slow_hcas": {n: [asdict(r) for r in rails] for n, rails in self.slow.items()}}


@dataclass
class PhaseResult:
    nodes: list[str]
    settings: FabricSettings
    launcher: str
    unavailable: str | None = None
    single: dict[str, dict[str, NcclMeasurement]] = field(default_factory=dict)
    nvb: dict[str, NvbMeasurement] = field(default_factory=dict)
    gdr: dict[str, dict[str, dict[str, GdrMeasurement]]] = field(default_factory=dict)
    """node -> HCA -> ``cuda`` / ``host`` -> the ib_write_bw loopback (IB-08)."""
    p2p: dict[str, P2pMeasurement] = field(default_factory=dict)
    """node -> its p2pBandwidthLatencyTest run (NVL-03)."""
    nvlink_after: dict[str, dict[str, Any]] = field(default_factory=dict)
    """node -> its NVLink snapshot after the single-node traffic (NVL-04, burnin.fabric.nvlink_after)."""
    excluded: dict[str, str] = field(default_factory=dict)
    """Nodes left out of multi-node runs and localisation, and why (a single-node check did not pass)."""
    excluded_by: dict[str, str] = field(default_factory=dict)
    """The same nodes: the checks that kept them out (``IB-08 failed, NCCL-01 incomplete``)."""
    excluded_why: dict[str, list[str]] = field(default_factory=dict)
    """The same nodes: those checks' reasons."""
    alone: dict[str, str] = field(default_factory=dict)
    """Nodes left without a partner because every other node was left out: their multi-node checks are unmeasured."""
    group: NcclMeasurement | None = None
    group_floor_gbps: float = 0.0
    localization: Localization | None = None
    regroup: NcclMeasurement | None = None
    nccl_runtime: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """node -> its record of each evidence run (STO-02 runtime evidence, burnin.fabric.nccl_evidence)."""

    @property
    def group_passed(self) -> bool:
        return self.group is not None and judge.passed(self.group, self.group_floor_gbps)

    @property
    def regroup_passed(self) -> bool:
        return self.regroup is not None and judge.passed(self.regroup, self.group_floor_gbps)

    def to_json(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes, "launcher": self.launcher, "settings": asdict(self.settings),
            "unavailable": self.unavailable,
            "single": {n: {c: m.to_json() for c, m in r.items()} for n, r in self.single.items()},
            "nvbandwidth": {n: m.to_json() for n, m in self.nvb.items()},
            "ib_write_bw": {n: {h: {k: m.to_json() for k, m in kinds.items()} for h, kinds in hcas.items()}
                            for n, hcas in self.gdr.items()},
            "p2p": {n: m.to_json() for n, m in self.p2p.items()},
            NVLINK_AFTER: self.nvlink_after,
            "excluded": self.excluded, "excluded_reasons": self.excluded_why, "alone": self.alone,
            "group": self.group.to_json() if self.group else None,
            "group_floor_gbps": self.group_floor_gbps, "group_passed": self.group_passed,
            "localization": self.localization.to_json() if self.localization else None,
            "regroup": self.regroup.to_json() if self.regroup else None, "regroup_passed": self.regroup_passed,
            "nccl_runtime": self.nccl_runtime,
        }


# ---------------------------------------------------------------- per-node metrics


def matrix_cells(matrix: Sequence[Sequence[float | None]], *, skip_diagonal: bool) -> list[tuple[int, int, float]]:
    """(row, column, value) of every measured cell."""
    return [(r, c, v) for r, row in enumerate(matrix) for c, v in enumerate(row)
            if v is not None and not (skip_diagonal and r == c)]


def nvb_minimum(nvb: NvbMeasurement | None, testcase: str) -> float | None:
    if nvb is None or nvb.status != "ok" or testcase not in nvb.testcases:
        return None
    cells = matrix_cells(nvb.testcases[testcase], skip_diagonal=testcase.startswith("device_to_device"))
    values = [v for _, _, v in cells if bandwidth_ok(v)]
    return min(values) if values else None


def single_busbw(measurements: dict[str, NcclMeasurement] | None, collective: str) -> float | None:
    m = (measurements or {}).get(collective)
    return m.busbw_gbps if m is not None and m.ok and bandwidth_ok(m.busbw_gbps) else None


def fleet(result: PhaseResult) -> dict[str, dict[str, float]]:
    """The run's median of each per-node bandwidth metric."""
    stats = {f"single.{c}": judge.fleet_stats({n: single_busbw(result.single.get(n), c) for n in result.nodes})
             for c in result.settings.collectives}
    for key, testcase in (("nvl.d2d_read_min", D2D_READ), ("nvl.h2d_min", H2D), ("nvl.d2h_min", D2H)):
        stats[key] = judge.fleet_stats({n: nvb_minimum(result.nvb.get(n), testcase) for n in result.nodes})
    return stats


def node_documents(result: PhaseResult) -> dict[str, dict[str, Any]]:
    """Each node's ``fabric`` facts section."""
    stats = fleet(result)
    settings = {"nvls": result.settings.nvls, "collectives": list(result.settings.collectives),
                "launcher": result.launcher, "multi_node": result.settings.multi_node,
                "localize": result.settings.localize}
    docs: dict[str, dict[str, Any]] = {}
    for node in result.nodes:
        doc: dict[str, Any] = {"settings": settings, "fleet": stats, "run_nodes": len(result.nodes)}
        if result.unavailable:
            doc["unavailable"] = result.unavailable
        doc["single"] = {c: m.to_json() for c, m in result.single.get(node, {}).items()}
        nvb = result.nvb.get(node)
        doc["nvbandwidth"] = nvb.to_json() if nvb else None
        doc["ib_write_bw"] = {h: {k: m.to_json() for k, m in kinds.items()}
                              for h, kinds in result.gdr.get(node, {}).items()}
        p2p = result.p2p.get(node)
        doc["p2p"] = p2p.to_json() if p2p else None
        doc[NVLINK_AFTER] = result.nvlink_after.get(node)
        doc["multi"] = _multi(result, node)
        docs[node] = doc
    return docs


def _multi(result: PhaseResult, node: str) -> dict[str, Any]:
    multi: dict[str, Any] = {"floor_gbps": result.group_floor_gbps}
    if not result.settings.multi_node:
        return {**multi, "applicable": False, "reason": "multi-node runs are off in the fabric settings"}
    if len(result.nodes) < 2:
        return {**multi, "applicable": False, "reason": "a single node: no multi-node run"}
    if node in result.excluded:
        return {**multi, "applicable": True, "excluded": result.excluded[node]}
    if node in result.alone:  # applicable, but not measured: incomplete, never a pass (issue 19)
        return {**multi, "applicable": True, "unavailable": result.alone[node]}
    multi["applicable"] = True
    multi["group"] = result.group.to_json() if result.group else None
    multi["group_passed"] = result.group_passed
    loc = result.localization
    if loc is not None:
        rails = loc.rails.get(node, {})
        multi["localization"] = {
            "status": loc.status(node), "rounds": loc.rounds, "named": loc.named, "floor_gbps": loc.floor_gbps,
            "median_gbps": loc.median_gbps, "reason": loc.reason,
            "tests": [t.to_json() for t in loc.tests if node in t.nodes],
            "rails": {h: m.to_json() for h, m in rails.items()}, "rail_partner": loc.rail_partner.get(node),
            "slow_hcas": [asdict(r) for r in loc.slow.get(node, [])],
        }
    if result.regroup is not None and node in result.regroup.nodes:
        multi["regroup"] = result.regroup.to_json()
        multi["regroup_passed"] = result.regroup_passed
    return multi

