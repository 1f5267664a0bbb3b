"""IB-08: GPUDirect RDMA bandwidth per HCA, from perftest ``ib_write_bw`` in loopback on each node.

The fabric phase runs ``ib_write_bw`` server and client on the same node
through each compute HCA (``-d mlx5_N --report_gbits``), once from the
memory of the HCA's paired GPU (``--use_cuda=<index>``) and once from host
memory (burnin.fabric.phase). A node alone can therefore name its slow HCA,
at any rack size, one node included. Each run must meet its absolute
reference, and each HCA must be within the topology's spread of the median of
the node's HCAs (per memory kind). Whatever could not be measured, or is no
bandwidth at all (NaN, infinite, negative), is incomplete with the value quoted.
"""

from __future__ import annotations

from typing import Any

from burnin.checks.base import bad, check, ok, unknown
from burnin.checks.fabric import bandwidth, fabric_section
from burnin.checks.references import reference
from burnin.evaluate.verdict import Finding, Unmeasurable, Verdict, roll_up
from burnin.fabric import judge
from burnin.fabric.measure import GdrMeasurement
from burnin.facts import Facts
from burnin.topology.model import Topology


def _run(data: object, label: str) -> GdrMeasurement:
    if not isinstance(data, dict):
        raise Unmeasurable("not run")
    try:
        run = GdrMeasurement.from_json(data)
    except (TypeError, ValueError) as exc:
        raise Unmeasurable(f"unreadable measurement ({exc})") from None
    if not run.ok:
        raise Unmeasurable(run.reason or "ib_write_bw did not complete")
    return run


def _label(hca: str, kind: str, gpu: int | None) -> str:
    return f"{hca} gpu{gpu} memory" if kind == "cuda" else f"{hca} host memory"


@check("IB-08", "GPUDirect RDMA bandwidth per HCA (ib_write_bw loopback, GPU and host memory)",
       sources=("fabric",), references=(judge.GDR_REF, judge.GDR_HOST_REF, judge.GDR_SPREAD_REF), fast=False)
def gpudirect_bandwidth(facts: Facts, topology: Topology) -> Verdict:
    doc = fabric_section(facts)
    runs: Any = doc.get("ib_write_bw")
    if not isinstance(runs, dict) or not runs:
        raise Unmeasurable("no ib_write_bw run (perftest)")
    refs = {"cuda": reference(topology, judge.GDR_REF, lower_bound=True),
            "host": reference(topology, judge.GDR_HOST_REF, lower_bound=True)}
    spread = reference(topology, judge.GDR_SPREAD_REF).value
    paired = {d.hca: d.index for d in topology.gpus.devices if d.hca}
    findings: list[Finding] = []
    values: dict[str, dict[str, float]] = {"cuda": {}, "host": {}}
    for hca in topology.compute_hcas:
        kinds = ("cuda", "host") if hca.name in paired else ("host",)
        for kind in kinds:
            label = _label(hca.name, kind, paired.get(hca.name))
            try:
                run = _run((runs.get(hca.name) or {}).get(kind), label)
                values[kind][hca.name] = bandwidth(run.bw_average_gbps, "ib_write_bw BW average", "Gb/s")
            except Unmeasurable as exc:
                findings.append(unknown(label, exc.reason))
    for kind, by_hca in values.items():
        ref = refs[kind]
        mid = judge.median(by_hca.values())
        for hca_name, value in by_hca.items():
            label = _label(hca_name, kind, paired.get(hca_name))
            measured = f"{value:.2f} Gb/s"  # as perftest prints it
            if not ref.admits(value):
                findings.append(bad(label, measured, ref.describe()))
            elif mid is not None and len(by_hca) >= 2 and value < (1.0 - spread) * mid:
                findings.append(bad(label, f"{measured}, {1 - value / mid:.1%} below the median {mid:.1f} Gb/s "
                                           "of the node's HCAs", f"within {spread:.0%} of the median"))
            else:
                findings.append(ok(label, measured, ref.describe()))
    lows = [f"{'GPUDirect' if kind == 'cuda' else 'host'} min {min(v.values()):.1f} Gb/s"
            for kind, v in values.items() if v]
    return roll_up("IB-08", facts.node, findings,
                   expected=(f"GPUDirect {refs['cuda'].describe()}, host memory {refs['host'].describe()} "
                             f"per HCA, within {spread:.0%} of the node's median"),
                   healthy=f"{', '.join(lows)} over {len(topology.compute_hcas)} HCAs")
