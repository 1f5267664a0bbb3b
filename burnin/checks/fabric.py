"""Fabric checks (NCCL, NVL): nccl-tests and nvbandwidth results against references and the run's medians.

They judge the ``fabric`` section the fabric phase merged into each node's
facts (burnin.fabric.phase); a node without it was not measured (incomplete).
Absolute references come from the topology; a value more than the topology's
straggler tolerance below the run's median fails too, even above its reference.
"""

from __future__ import annotations

from typing import Any

from burnin.checks.base import bad, check, ok, unknown
from burnin.evaluate.verdict import Finding, Status, Unmeasurable, Verdict, roll_up
from burnin.fabric import judge
from burnin.fabric.measure import NcclMeasurement, NvbMeasurement
from burnin.fabric.results import D2D_READ, D2H, H2D, matrix_cells, nvb_minimum
from burnin.facts import Facts
from burnin.topology.model import Reference, Topology


def fabric_section(facts: Facts) -> dict[str, Any]:
    """The node's fabric measurements; Unmeasurable when there are none."""
    if facts.unreachable:
        raise Unmeasurable(facts.unreachable)
    doc = facts.data.get("fabric")
    if not isinstance(doc, dict):
        raise Unmeasurable("fabric measurements not collected: the fabric phase did not run "
                           "(burnin run --suite fabric)")
    if doc.get("unavailable"):
        raise Unmeasurable(str(doc["unavailable"]))
    return doc


def multi_node_applicable(facts: Facts) -> tuple[bool, str]:
    """Whether multi-node checks apply to this node (False for a run of one node)."""
    try:
        multi = fabric_section(facts).get("multi") or {}
    except Unmeasurable:
        return True, ""
    return bool(multi.get("applicable", True)), str(multi.get("reason", ""))


def _ref(topology: Topology, key: str) -> Reference:
    ref = topology.ref(key)
    if ref is None:
        raise Unmeasurable(f"topology {topology.name} defines no {key}")
    return ref


def _size(size: int | None) -> str:
    if size is None:
        return "?"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:g} {unit}"
    return f"{size} B"


def _fleet_finding(subject: str, value: float | None, fleet: dict[str, Any], key: str, tol: float) -> Finding:
    expected = f"within {tol:.0%} of the run's median"
    slow = judge.straggler(value, fleet.get(key), tol)
    if slow is not None:
        return bad(subject, slow.describe(), expected)
    return ok(subject, "not a straggler", expected)


# ---------------------------------------------------------------- NCCL


def _single(doc: dict[str, Any], collective: str) -> NcclMeasurement:
    data = (doc.get("single") or {}).get(collective)
    if not data:
        raise Unmeasurable(f"no single-node {collective} run")
    return NcclMeasurement.from_json(data)


@check("NCCL-01", "Single-node all_reduce busbw (NVLink/NVSwitch)", fast=False)
def single_node_all_reduce(facts: Facts, topology: Topology) -> Verdict:
    doc = fabric_section(facts)
    run = _single(doc, "all_reduce")
    key, ref = judge.single_reference(topology, run.nvls)
    if ref is None:
        raise Unmeasurable(f"topology {topology.name} defines no {key}")
    if not run.ok or run.busbw_gbps is None:
        raise Unmeasurable(run.reason)
    tol = judge.tolerance(topology)
    mode = "NVLS enabled" if run.nvls is not False else "NVLS off"
    measured = f"{run.busbw_gbps:.1f} GB/s at {_size(run.size_bytes)} ({mode})"
    findings = [
        ok("all_reduce", measured, ref.describe()) if ref.admits(run.busbw_gbps)
        else bad("all_reduce", measured, ref.describe()),
        _fleet_finding("all_reduce", run.busbw_gbps, doc.get("fleet") or {}, "single.all_reduce", tol),
    ]
    return roll_up("NCCL-01", facts.node, findings, expected=f"{ref.describe()}, within {tol:.0%} of the run's median",
                   healthy=measured)


def other_collectives(facts: Facts) -> list[str]:
    """The single-node collectives measured besides all_reduce (NCCL-02 applies when there are any)."""
    try:
        return sorted(c for c in fabric_section(facts).get("single") or {} if c != "all_reduce")
    except Unmeasurable:
        return ["?"]


@check("NCCL-02", "Single-node all_gather / reduce_scatter / alltoall busbw", fast=False)
def single_node_other(facts: Facts, topology: Topology) -> Verdict:
    doc = fabric_section(facts)
    ref = _ref(topology, judge.SINGLE_OTHER_REF)
    tol = judge.tolerance(topology)
    findings: list[Finding] = []
    shown = []
    for collective, data in sorted((doc.get("single") or {}).items()):
        if collective == "all_reduce":
            continue
        run = NcclMeasurement.from_json(data)
        if not run.ok or run.busbw_gbps is None:
            findings.append(unknown(collective, run.reason))
            continue
        measured = f"{run.busbw_gbps:.1f} GB/s"
        shown.append(f"{collective} {measured}")
        if collective not in judge.FLEET_ONLY:
            findings.append(ok(collective, measured, ref.describe()) if ref.admits(run.busbw_gbps)
                            else bad(collective, measured, ref.describe()))
        findings.append(_fleet_finding(collective, run.busbw_gbps, doc.get("fleet") or {}, f"single.{collective}",
                                       tol))
    if not findings:
        raise Unmeasurable("no collective besides all_reduce was measured (fabric setting collectives)")
    return roll_up("NCCL-02", facts.node, findings,
                   expected=f"{ref.describe()} (alltoall, sendrecv: within {tol:.0%} of the run's median)",
                   healthy="; ".join(shown))


def _multi(facts: Facts) -> dict[str, Any]:
    multi: dict[str, Any] = fabric_section(facts).get("multi") or {}
    if not multi.get("applicable", True):
        raise Unmeasurable(f"not applicable: {multi.get('reason')}")
    if multi.get("excluded"):
        raise Unmeasurable(str(multi["excluded"]))
    if not multi.get("group"):
        raise Unmeasurable("no multi-node run")
    return multi


def _evidence(tests: list[dict[str, Any]], node: str, limit: int = 3) -> str:
    failed = [t for t in tests if not t["passed"]]
    shown = failed or tests
    parts = [f"{judge.describe(NcclMeasurement.from_json(t['measurement']))} ({t['kind']}, round {t['round']})"
             for t in shown[:limit]]
    return "; ".join(parts) if parts else f"{node}: no localisation test"


def _cleared_by(tests: list[dict[str, Any]]) -> str:
    """The passing test that cleared a node."""
    passed = [t for t in tests if t["passed"]]
    if not passed:
        return "no passing test"
    last = passed[-1]
    return f"{judge.describe(NcclMeasurement.from_json(last['measurement']))} ({last['kind']}, round {last['round']})"


def _slow_hcas(loc: dict[str, Any]) -> str:
    slow = loc.get("slow_hcas") or []
    if not slow:
        return ""
    names = ", ".join(f"{s['hca']} {s['reason']}" for s in slow)
    return f"slow HCA {names}"


def _named(loc: dict[str, Any], node: str) -> str:
    hcas = _slow_hcas(loc)
    rails = loc.get("rails") or {}
    lead = hcas or (f"no single slow HCA over {len(rails)} single-rail runs" if rails else "")
    evidence = _evidence(loc.get("tests") or [], node)
    return f"{lead + '; ' if lead else ''}named in {loc.get('rounds')} rounds: {evidence}"


@check("NCCL-03", "Multi-node all_reduce busbw (InfiniBand)", fast=False)
def multi_node_all_reduce(facts: Facts, topology: Topology) -> Verdict:
    multi = _multi(facts)
    ref = _ref(topology, judge.MULTI_REF)
    group = NcclMeasurement.from_json(multi["group"])
    loc = multi.get("localization") or {}
    status = loc.get("status")
    group_text = judge.describe(group)
    expected = ref.describe()
    if status == "named":
        hcas = _slow_hcas(loc)
        measured = (f"group {group_text}; {facts.node} in pairs: {_evidence(loc.get('tests') or [], facts.node, 2)}"
                    f" (named by NCCL-04{'; ' + hcas if hcas else ''})")
        return _verdict("NCCL-03", facts.node, Status.FAIL, measured, f"pairs >= {loc.get('floor_gbps', 0):.0f} GB/s")
    if multi.get("group_passed"):
        return _verdict("NCCL-03", facts.node, Status.PASS, f"group {group_text}", expected)
    regroup = multi.get("regroup")
    if status == "cleared":
        evidence = _cleared_by(loc.get("tests") or [])
        if regroup is not None:
            again = judge.describe(NcclMeasurement.from_json(regroup))
            if multi.get("regroup_passed"):
                return _verdict("NCCL-03", facts.node, Status.PASS,
                                f"group {group_text}; cleared by {evidence}; without the named nodes {again}",
                                expected)
            return _verdict("NCCL-03", facts.node, Status.FAIL,
                            f"group without the named nodes still fails: {again}", expected)
        if loc.get("named"):
            return _verdict("NCCL-03", facts.node, Status.PASS, f"group {group_text}; cleared by {evidence}",
                            expected)
    if not group.ok and not group.corrupt:
        raise Unmeasurable(f"the multi-node run did not complete: {group.reason}")
    why = {"unresolved": "localisation could not clear this node",
           "cleared": "pairwise localisation found no bad node"}.get(str(status), "not localised")
    return _verdict("NCCL-03", facts.node, Status.FAIL, f"group {group_text} ({why})", expected)


@check("NCCL-04", "Bad-node localisation (pairs, known-good partners, bisection, rails)", fast=False)
def localisation(facts: Facts, topology: Topology) -> Verdict:
    multi = _multi(facts)
    loc = multi.get("localization")
    group = NcclMeasurement.from_json(multi["group"])
    expected = "not named by pairwise localisation"
    if loc is None:
        if multi.get("group_passed"):
            return _verdict("NCCL-04", facts.node, Status.PASS,
                            f"not needed: group {judge.describe(group)} passed", expected)
        raise Unmeasurable("the group failed and localisation is off (fabric setting localize: never)")
    status = loc.get("status")
    if status == "named":
        return _verdict("NCCL-04", facts.node, Status.FAIL, f"{facts.node} {_named(loc, facts.node)}",
                        f"pairs >= {loc.get('floor_gbps', 0):.0f} GB/s")
    if status == "cleared":
        return _verdict("NCCL-04", facts.node, Status.PASS,
                        f"cleared in {loc.get('rounds')} rounds by {_cleared_by(loc.get('tests') or [])}",
                        expected)
    raise Unmeasurable(f"{facts.node} could not be localised after {loc.get('rounds')} rounds "
                       f"({status}: no known-good partner cleared or named it)")


@check("NCCL-05", "No wrong values in any nccl-tests run", fast=False)
def correctness(facts: Facts, topology: Topology) -> Verdict:
    doc = fabric_section(facts)
    findings: list[Finding] = []
    for collective, data in sorted((doc.get("single") or {}).items()):
        run = NcclMeasurement.from_json(data)
        subject = f"{collective} single-node"
        if run.corrupt:
            findings.append(bad(subject, f"{run.wrong} wrong, {run.out_of_bounds} out of bounds", "0 wrong"))
        elif run.rows:
            findings.append(ok(subject, "0 wrong", "0 wrong"))
        else:
            findings.append(unknown(subject, run.reason))
    multi = doc.get("multi") or {}
    loc = multi.get("localization")
    if loc is None:
        # no localisation: a corrupt group run cannot be pinned on anyone, so it counts for all (fail closed)
        runs = [data for data in (multi.get("group"), multi.get("regroup")) if data]
    else:
        # only runs with a known-good partner point at this node
        runs = [t["measurement"] for t in loc.get("tests") or [] if t.get("suspect") == facts.node]
    for data in runs:
        run = NcclMeasurement.from_json(data)
        if run.corrupt:
            findings.append(bad(run.label, f"{run.wrong} wrong values", "0 wrong"))
    return roll_up("NCCL-05", facts.node, findings, expected="0 wrong, 0 out of bounds",
                   healthy=f"0 wrong in {len(findings)} single-node runs" + (
                       "; multi-node runs clean" if multi.get("group") else ""))


def _verdict(check_id: str, node: str, status: Status, measured: str, expected: str) -> Verdict:
    passed = status is Status.PASS
    reason = f"{check_id} ok: {measured}" if passed else f"{check_id} {measured} (expected {expected})"
    return Verdict(check_id, node, status, measured, expected, reason)


# ---------------------------------------------------------------- NVL


def _nvb(doc: dict[str, Any]) -> NvbMeasurement:
    data = doc.get("nvbandwidth")
    if not data:
        raise Unmeasurable("no nvbandwidth run")
    nvb = NvbMeasurement.from_json(data)
    if nvb.status != "ok":
        raise Unmeasurable(nvb.reason)
    return nvb


@check("NVL-01", "nvbandwidth device-to-device read per GPU pair", fast=False)
def nvlink_bandwidth(facts: Facts, topology: Topology) -> Verdict:
    doc = fabric_section(facts)
    nvb = _nvb(doc)
    ref = _ref(topology, judge.D2D_REF)
    tol = judge.tolerance(topology)
    cells = matrix_cells(nvb.testcases[D2D_READ], skip_diagonal=True)
    if not cells:
        raise Unmeasurable(f"{D2D_READ}: empty matrix")
    mid = judge.median(v for _, _, v in cells) or 0.0
    findings: list[Finding] = []
    gpus = len(nvb.testcases[D2D_READ])
    if gpus != len(topology.gpus.devices):
        findings.append(bad("gpus", f"{gpus} GPUs measured", f"{len(topology.gpus.devices)}"))
    for row, col, value in cells:
        subject = f"gpu{row}->gpu{col}"
        if not ref.admits(value):
            findings.append(bad(subject, f"{value:.1f} GB/s", ref.describe()))
        elif value < (1.0 - tol) * mid:
            findings.append(bad(subject, f"{value:.1f} GB/s, {1 - value / mid:.0%} below the node's pair median "
                                         f"{mid:.1f}", f"within {tol:.0%} of the median"))
    low = min(v for _, _, v in cells)
    findings.append(_fleet_finding("node", low, doc.get("fleet") or {}, "nvl.d2d_read_min", tol))
    return roll_up("NVL-01", facts.node, findings, expected=f"{ref.describe()} per pair",
                   healthy=f"min {low:.1f} GB/s over {len(cells)} pairs (median {mid:.1f})")


@check("NVL-02", "nvbandwidth host<->device per GPU (PCIe)", fast=False)
def host_bandwidth(facts: Facts, topology: Topology) -> Verdict:
    doc = fabric_section(facts)
    nvb = _nvb(doc)
    tol = judge.tolerance(topology)
    findings: list[Finding] = []
    lows = []
    for testcase, key, label, fleet_key in ((H2D, judge.H2D_REF, "H2D", "nvl.h2d_min"),
                                            (D2H, judge.D2H_REF, "D2H", "nvl.d2h_min")):
        ref = _ref(topology, key)
        for _, col, value in matrix_cells(nvb.testcases[testcase], skip_diagonal=False):
            if not ref.admits(value):
                findings.append(bad(f"gpu{col} {label}", f"{value:.1f} GB/s", ref.describe()))
        low = nvb_minimum(nvb, testcase)
        lows.append(f"{label} min {low:.1f}" if low is not None else f"{label} -")
        findings.append(_fleet_finding(label, low, doc.get("fleet") or {}, fleet_key, tol))
    return roll_up("NVL-02", facts.node, findings,
                   expected=f"H2D/D2H {_ref(topology, judge.H2D_REF).describe()} per GPU",
                   healthy=" / ".join(lows) + " GB/s")
