"""Fabric checks (NCCL, NVL): nccl-tests and nvbandwidth results against references and the run's medians.

They judge the ``fabric`` section the fabric phase merged into each node's
facts (burnin.fabric.phase); a node without it was not measured (incomplete).
Absolute references come from the topology; a value more than the topology's
straggler tolerance below the run's median fails too, even above its reference
(the median is never taken below the reference's typical value: a majority of
slow nodes cannot make itself the norm).
"""

from __future__ import annotations

from typing import Any

from burnin.checks.base import bad, check, ok, unknown
from burnin.checks.references import reference
from burnin.evaluate.verdict import Finding, Status, Unmeasurable, Verdict, roll_up
from burnin.fabric import judge
from burnin.fabric.measure import NcclMeasurement, NvbMeasurement, bandwidth_ok
from burnin.fabric.results import D2D_READ, D2H, H2D
from burnin.facts import Facts
from burnin.topology.model import Topology

SINGLE_NODE_CHECKS = ("NCCL-01", "NCCL-02", "NCCL-05", "NVL-01", "NVL-02", "NVL-03", "NVL-04", "IB-08")
"""The fabric checks that judge one node alone: a node that does not pass them all is left out of
multi-node runs and localisation (burnin.fabric.phase), so it is never a healthy node's partner.
NVL-03 and NVL-04 are in burnin.checks.fabric_nvlink; NVL-04 also reads the facts gathered before the phase."""


def single_node_verdicts(facts: Facts, topology: Topology) -> list[Verdict]:
    """The node's verdicts of :data:`SINGLE_NODE_CHECKS` (NCCL-02 only when other collectives ran)."""
    from burnin.checks import load_all

    checks = load_all()
    wanted = [c for c in SINGLE_NODE_CHECKS if (c != "NCCL-02" or other_collectives(facts))
              and (c != "IB-08" or topology.compute_hcas)]
    return [checks[c].func(facts, topology) for c in wanted]


def failed_alone(facts: Facts, topology: Topology) -> list[Verdict]:
    """The node's :data:`SINGLE_NODE_CHECKS` it did not pass: the fabric phase's "passed alone" (empty: it did)."""
    return [v for v in single_node_verdicts(facts, topology) if v.status is not Status.PASS]


def _quote(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def bandwidth(value: object, what: str, unit: str = "GB/s") -> float:
    """A measured bandwidth, or Unmeasurable quoting what was there (None, NaN, infinite, negative...)."""
    if value is None:
        raise Unmeasurable(f"{what}: no bandwidth reported")
    if not bandwidth_ok(value):
        raise Unmeasurable(f"{what}: {_quote(value)} {unit} is not a bandwidth")
    assert isinstance(value, (int, float))
    return float(value)


def nccl_record(data: object, what: str) -> NcclMeasurement:
    """A stored nccl-tests measurement; Unmeasurable when it is not one."""
    if not isinstance(data, dict):
        raise Unmeasurable(f"{what}: no readable measurement ({_quote(data)})")
    try:
        return NcclMeasurement.from_json(data)
    except (TypeError, ValueError) as exc:
        raise Unmeasurable(f"{what}: unreadable measurement ({exc})") from None


def part(doc: dict[str, Any], key: str) -> dict[str, Any]:
    """A mapping inside the fabric section (empty when absent); Unmeasurable when it is something else."""
    value = doc.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Unmeasurable(f"fabric facts: {key} is not a mapping ({_quote(value)})")
    return value


def fabric_section(facts: Facts) -> dict[str, Any]:
    """The node's fabric measurements; Unmeasurable when there are none."""
    if facts.unreachable:
        raise Unmeasurable(facts.unreachable)
    doc = facts.section("fabric")
    if not isinstance(doc, dict):
        raise Unmeasurable("fabric measurements not collected: the fabric phase did not run "
                           "(burnin run --suite fabric)")
    if doc.get("unavailable"):
        raise Unmeasurable(str(doc["unavailable"]))
    return doc


def multi_node_applicable(facts: Facts) -> tuple[bool, str]:
    """Whether multi-node checks apply to this node (False for a run of one node)."""
    try:
        multi = part(fabric_section(facts), "multi")
    except Unmeasurable:
        return True, ""
    return multi.get("applicable", True) is not False, str(multi.get("reason", ""))


def _tolerance(topology: Topology) -> float:
    """The straggler tolerance (the topology's, else the catalog's; burnin.checks.references)."""
    return reference(topology, judge.TOLERANCE_REF).value


def _size(size: int | None) -> str:
    if size is None:
        return "?"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:g} {unit}"
    return f"{size} B"


def _fleet_finding(subject: str, value: float | None, fleet: object, key: str, tol: float,
                   typical: float | None = None) -> Finding:
    """A straggler against the run's median, never taken below the topology's reference value ``typical``
    (a slow majority cannot make itself the norm); a fleet entry that is no median and count is no fleet."""
    expected = f"within {tol:.0%} of the run's median" + (f" and of {typical:g} GB/s" if typical else "")
    stats = fleet.get(key) if isinstance(fleet, dict) else None
    slow = judge.straggler(value, stats if isinstance(stats, dict) else None, tol, typical)
    if slow is not None:
        return bad(subject, slow.describe(), expected)
    return ok(subject, "not a straggler", expected)


# ---------------------------------------------------------------- NCCL


def _single(doc: dict[str, Any], collective: str) -> NcclMeasurement:
    data = part(doc, "single").get(collective)
    if not data:
        raise Unmeasurable(f"no single-node {collective} run")
    return nccl_record(data, f"single-node {collective}")


@check("NCCL-01", "Single-node all_reduce busbw (NVLink/NVSwitch)",
       sources=("fabric",), references=(judge.SINGLE_REF, judge.SINGLE_RING_REF, judge.TOLERANCE_REF), fast=False)
def single_node_all_reduce(facts: Facts, topology: Topology) -> Verdict:
    doc = fabric_section(facts)
    run = _single(doc, "all_reduce")
    key, _ = judge.single_reference(topology, run.nvls)
    ref = reference(topology, key)
    if not run.ok:
        raise Unmeasurable(run.reason or "the single-node all_reduce did not complete")
    busbw = bandwidth(run.busbw_gbps, f"single-node all_reduce busbw at {_size(run.size_bytes)}")
    tol = _tolerance(topology)
    mode = "NVLS enabled" if run.nvls is not False else "NVLS off"
    measured = f"{busbw:.1f} GB/s at {_size(run.size_bytes)} ({mode})"
    findings = [
        (ok if ref.admits(busbw) else bad)("all_reduce", measured, ref.describe()),
        _fleet_finding("all_reduce", busbw, doc.get("fleet") or {}, "single.all_reduce", tol, ref.value),
    ]
    return roll_up("NCCL-01", facts.node, findings, expected=f"{ref.describe()}, within {tol:.0%} of the run's median",
                   healthy=measured)


def other_collectives(facts: Facts) -> list[str]:
    """The single-node collectives measured besides all_reduce (NCCL-02 applies when there are any)."""
    try:
        return sorted(c for c in part(fabric_section(facts), "single") if c != "all_reduce")
    except Unmeasurable:
        return ["?"]


@check("NCCL-02", "Single-node all_gather / reduce_scatter / alltoall busbw",
       sources=("fabric",), references=(judge.SINGLE_OTHER_REF, judge.TOLERANCE_REF), fast=False)
def single_node_other(facts: Facts, topology: Topology) -> Verdict:
    doc = fabric_section(facts)
    ref = reference(topology, judge.SINGLE_OTHER_REF)
    tol = _tolerance(topology)
    findings: list[Finding] = []
    shown = []
    for collective, data in sorted(part(doc, "single").items()):
        if collective == "all_reduce":
            continue
        try:
            run = nccl_record(data, f"single-node {collective}")
            if not run.ok:
                raise Unmeasurable(run.reason or f"the single-node {collective} did not complete")
            busbw = bandwidth(run.busbw_gbps, "busbw")
        except Unmeasurable as exc:
            findings.append(unknown(collective, exc.reason))
            continue
        measured = f"{busbw:.1f} GB/s"
        shown.append(f"{collective} {measured}")
        if collective not in judge.FLEET_ONLY:
            findings.append(ok(collective, measured, ref.describe()) if ref.admits(busbw)
                            else bad(collective, measured, ref.describe()))
        typical = None if collective in judge.FLEET_ONLY else ref.value
        findings.append(_fleet_finding(collective, busbw, doc.get("fleet") or {}, f"single.{collective}", tol,
                                       typical))
    if not findings:
        raise Unmeasurable("no collective besides all_reduce was measured (fabric setting collectives)")
    return roll_up("NCCL-02", facts.node, findings,
                   expected=f"{ref.describe()} (alltoall, sendrecv: within {tol:.0%} of the run's median)",
                   healthy="; ".join(shown))


def _multi(facts: Facts) -> dict[str, Any]:
    multi = part(fabric_section(facts), "multi")
    if multi.get("applicable", True) is False:
        raise Unmeasurable(f"not applicable: {multi.get('reason')}")
    if multi.get("excluded"):
        raise Unmeasurable(str(multi["excluded"]))
    if multi.get("unavailable"):
        raise Unmeasurable(f"no multi-node run: {multi['unavailable']}")
    if not multi.get("group"):
        raise Unmeasurable("no multi-node run")
    return multi


def _tests(loc: dict[str, Any]) -> list[dict[str, Any]]:
    tests = loc.get("tests") or []
    return [t for t in tests if isinstance(t, dict) and isinstance(t.get("measurement"), dict)]


def _describe(data: object, what: str) -> str:
    return judge.describe(nccl_record(data, what))


def _evidence(tests: list[dict[str, Any]], node: str, limit: int = 3) -> str:
    failed = [t for t in tests if not t.get("passed")]
    shown = failed or tests
    parts = [f"{_describe(t['measurement'], 'a localisation test')} ({t.get('kind')}, round {t.get('round')})"
             for t in shown[:limit]]
    return "; ".join(parts) if parts else f"{node}: no localisation test"


def _cleared_by(tests: list[dict[str, Any]]) -> str:
    """The passing test that cleared a node."""
    passed = [t for t in tests if t.get("passed")]
    if not passed:
        return "no passing test"
    last = passed[-1]
    return f"{_describe(last['measurement'], 'a localisation test')} ({last.get('kind')}, round {last.get('round')})"


def _slow_hcas(loc: dict[str, Any]) -> str:
    slow = [s for s in loc.get("slow_hcas") or [] if isinstance(s, dict)]
    if not slow:
        return ""
    names = ", ".join(f"{s.get('hca')} {s.get('reason')}" for s in slow)
    return f"slow HCA {names}"


def _pair_floor(loc: dict[str, Any]) -> str:
    floor = loc.get("floor_gbps")
    return f"pairs >= {floor:.0f} GB/s" if bandwidth_ok(floor) else f"pairs >= the pair floor ({_quote(floor)})"


def _named(loc: dict[str, Any], node: str) -> str:
    hcas = _slow_hcas(loc)
    rails = loc.get("rails") or {}
    lead = hcas or (f"no single slow HCA over {len(rails)} single-rail runs" if rails else "")
    evidence = _evidence(_tests(loc), node)
    return f"{lead + '; ' if lead else ''}named in {loc.get('rounds')} rounds: {evidence}"


@check("NCCL-03", "Multi-node all_reduce busbw (InfiniBand)",
       sources=("fabric",), references=(judge.MULTI_REF,), fast=False)
def multi_node_all_reduce(facts: Facts, topology: Topology) -> Verdict:
    """Fails only a node that the evidence points at; a group failure nobody can be blamed for is incomplete.

    Pass: the group passed, or pairwise localisation cleared the node and the
    cleared nodes pass together (or fewer than two were cleared beside the
    named ones). Fail: the node was named. Incomplete: the node could neither
    be cleared nor named (two nodes, one failing pair), or every node passed
    its pairs while the group failed (not one node's fault), or the group was
    not localised.
    """
    multi = _multi(facts)
    ref = reference(topology, judge.MULTI_REF)
    group = nccl_record(multi["group"], "the multi-node run")
    loc = part(multi, "localization")
    status = loc.get("status")
    group_text = judge.describe(group)
    expected = ref.describe()
    if status == "named":
        hcas = _slow_hcas(loc)
        measured = (f"group {group_text}; {facts.node} in pairs: {_evidence(_tests(loc), facts.node, 2)}"
                    f" (named by NCCL-04{'; ' + hcas if hcas else ''})")
        return _verdict("NCCL-03", facts.node, Status.FAIL, measured, _pair_floor(loc))
    if multi.get("group_passed") is True:
        return _verdict("NCCL-03", facts.node, Status.PASS, f"group {group_text}", expected)
    if status == "cleared":
        evidence = _cleared_by(_tests(loc))
        regroup = multi.get("regroup")
        if regroup is not None:
            again = _describe(regroup, "the cleared nodes' run")
            if multi.get("regroup_passed") is True:
                return _verdict("NCCL-03", facts.node, Status.PASS,
                                f"group {group_text}; cleared by {evidence}; the cleared nodes together {again}",
                                expected)
            raise Unmeasurable(f"group {group_text}; {facts.node} was cleared by {evidence}, but the cleared nodes "
                               f"still fail together ({again}): not one node's fault")
        if loc.get("named") or loc.get("unresolved"):
            return _verdict("NCCL-03", facts.node, Status.PASS, f"group {group_text}; cleared by {evidence}",
                            expected)
        raise Unmeasurable(f"group {group_text} failed although every pair passed ({facts.node}: {evidence}): "
                           "not one node's fault")
    if status == "unresolved":
        raise Unmeasurable(f"group {group_text}; localisation could neither clear nor name {facts.node} "
                           f"(no known-good partner: {_evidence(_tests(loc), facts.node, 2)})")
    if status is not None:
        raise Unmeasurable(f"group {group_text}; localisation did not test {facts.node}")
    if not group.ok and not group.corrupt:
        raise Unmeasurable(f"the multi-node run did not complete: {group.reason}")
    raise Unmeasurable(f"group {group_text} failed and was not localised (fabric setting localize: never): "
                       "no node to blame")


@check("NCCL-04", "Bad-node localisation (pairs, known-good partners, bisection, rails)",
       sources=("fabric",), references=(judge.MULTI_REF, judge.RAIL_REF), fast=False)
def localisation(facts: Facts, topology: Topology) -> Verdict:
    multi = _multi(facts)
    loc = multi.get("localization")
    group = nccl_record(multi["group"], "the multi-node run")
    expected = "not named by pairwise localisation"
    if not isinstance(loc, dict):
        if multi.get("group_passed") is True:
            return _verdict("NCCL-04", facts.node, Status.PASS,
                            f"not needed: group {judge.describe(group)} passed", expected)
        raise Unmeasurable("the group failed and localisation is off (fabric setting localize: never)")
    status = loc.get("status")
    if status == "named":
        return _verdict("NCCL-04", facts.node, Status.FAIL, f"{facts.node} {_named(loc, facts.node)}",
                        _pair_floor(loc))
    if status == "cleared":
        return _verdict("NCCL-04", facts.node, Status.PASS,
                        f"cleared in {loc.get('rounds')} rounds by {_cleared_by(_tests(loc))}", expected)
    rounds = loc.get("rounds")
    raise Unmeasurable(f"{facts.node} could not be localised after {rounds} round{'' if rounds == 1 else 's'} "
                       f"({status}: no known-good partner cleared or named it)")


@check("NCCL-05", "No wrong values in any nccl-tests run", sources=("fabric",), fast=False)
def correctness(facts: Facts, topology: Topology) -> Verdict:
    doc = fabric_section(facts)
    findings: list[Finding] = []
    for collective, data in sorted(part(doc, "single").items()):
        subject = f"{collective} single-node"
        try:
            run = nccl_record(data, subject)
        except Unmeasurable as exc:
            findings.append(unknown(subject, exc.reason))
            continue
        findings.append(_wrong_values(subject, run))
    multi = part(doc, "multi")
    loc = multi.get("localization")
    if isinstance(loc, dict):
        # only runs with a known-good partner point at this node
        runs = [t["measurement"] for t in _tests(loc) if t.get("suspect") == facts.node]
        blame = True
    else:
        # no localisation: wrong values in a group run cannot be pinned on one node
        runs = [data for data in (multi.get("group"), multi.get("regroup")) if data]
        blame = False
    for data in runs:
        try:
            run = nccl_record(data, "a multi-node run")
        except Unmeasurable as exc:
            findings.append(unknown("multi-node", exc.reason))
            continue
        if run.corrupt and blame:
            findings.append(bad(run.label, f"{run.wrong} wrong values", "0 wrong"))
        elif run.corrupt:
            findings.append(unknown(run.label, f"{run.wrong} wrong values in a multi-node run that was not "
                                               "localised: not pinned on one node"))
    return roll_up("NCCL-05", facts.node, findings, expected="0 wrong, 0 out of bounds",
                   healthy=f"0 wrong in {len(findings)} single-node runs" + (
                       "; multi-node runs clean" if multi.get("group") else ""))


def _wrong_values(subject: str, run: NcclMeasurement) -> Finding:
    if run.corrupt:
        return bad(subject, f"{run.wrong} wrong, {run.out_of_bounds} out of bounds", "0 wrong")
    if run.unchecked:
        return unknown(subject, f"{run.unchecked} #wrong cells are not counts (N/A: the data check was off)")
    if not run.rows:
        return unknown(subject, run.reason or "no result rows")
    if not run.finished:
        why = run.reason.split(";")[0] if run.reason else "it stopped early"
        return unknown(subject, f"0 wrong in the {run.rows} sizes printed, but the run did not finish ({why})")
    return ok(subject, "0 wrong", "0 wrong")


def _verdict(check_id: str, node: str, status: Status, measured: str, expected: str) -> Verdict:
    passed = status is Status.PASS
    reason = f"{check_id} ok: {measured}" if passed else f"{check_id} {measured} (expected {expected})"
    return Verdict(check_id, node, status, measured, expected, reason)


# ---------------------------------------------------------------- NVL


def _nvb(doc: dict[str, Any]) -> NvbMeasurement:
    data = doc.get("nvbandwidth")
    if not data:
        raise Unmeasurable("no nvbandwidth run")
    if not isinstance(data, dict):
        raise Unmeasurable(f"nvbandwidth: no readable measurement ({_quote(data)})")
    try:
        nvb = NvbMeasurement.from_json(data)
    except (TypeError, ValueError) as exc:
        raise Unmeasurable(f"nvbandwidth: unreadable measurement ({exc})") from None
    if nvb.status != "ok":
        raise Unmeasurable(nvb.reason or "nvbandwidth did not complete")
    return nvb


def _matrix(nvb: NvbMeasurement, testcase: str) -> list[list[float | None]]:
    matrix = nvb.testcases.get(testcase)
    if not isinstance(matrix, list) or not all(isinstance(row, list) for row in matrix):
        raise Unmeasurable(f"nvbandwidth printed no {testcase} matrix")
    return matrix


def _cell(matrix: list[list[float | None]], row: int, col: int) -> object:
    return matrix[row][col] if row < len(matrix) and col < len(matrix[row]) else None


@check("NVL-01", "nvbandwidth device-to-device read per GPU pair",
       sources=("fabric",), references=(judge.D2D_REF, judge.TOLERANCE_REF), fast=False)
def nvlink_bandwidth(facts: Facts, topology: Topology) -> Verdict:
    doc = fabric_section(facts)
    matrix = _matrix(_nvb(doc), D2D_READ)
    ref = reference(topology, judge.D2D_REF)
    tol = _tolerance(topology)
    count = len(topology.gpus.devices)
    findings: list[Finding] = []
    values: dict[tuple[int, int], float] = {}
    for row in range(count):
        for col in range(count):
            if row == col:
                continue
            try:
                values[(row, col)] = bandwidth(_cell(matrix, row, col), f"{D2D_READ} gpu{row}->gpu{col}")
            except Unmeasurable as exc:
                findings.append(unknown(f"gpu{row}->gpu{col}", exc.reason))
    if len(matrix) > count:
        findings.append(bad("gpus", f"{len(matrix)} GPUs measured", f"{count}"))
    if not values:
        raise Unmeasurable(f"{D2D_READ}: no GPU pair measured")
    mid = judge.median(values.values()) or 0.0
    for (row, col), value in values.items():
        subject = f"gpu{row}->gpu{col}"
        if not ref.admits(value):
            findings.append(bad(subject, f"{value:.1f} GB/s", ref.describe()))
        elif value < (1.0 - tol) * mid:
            findings.append(bad(subject, f"{value:.1f} GB/s, {1 - value / mid:.0%} below the node's pair median "
                                         f"{mid:.1f}", f"within {tol:.0%} of the median"))
    low = min(values.values())
    findings.append(_fleet_finding("node", low, doc.get("fleet") or {}, "nvl.d2d_read_min", tol, ref.value))
    return roll_up("NVL-01", facts.node, findings, expected=f"{ref.describe()} per pair",
                   healthy=f"min {low:.1f} GB/s over {len(values)} pairs (median {mid:.1f})")


@check("NVL-02", "nvbandwidth host<->device per GPU (PCIe)",
       sources=("fabric",), references=(judge.H2D_REF, judge.D2H_REF, judge.TOLERANCE_REF), fast=False)
def host_bandwidth(facts: Facts, topology: Topology) -> Verdict:
    doc = fabric_section(facts)
    nvb = _nvb(doc)
    tol = _tolerance(topology)
    count = len(topology.gpus.devices)
    findings: list[Finding] = []
    lows = []
    for testcase, key, label, fleet_key in ((H2D, judge.H2D_REF, "H2D", "nvl.h2d_min"),
                                            (D2H, judge.D2H_REF, "D2H", "nvl.d2h_min")):
        ref = reference(topology, key)
        matrix = _matrix(nvb, testcase)
        measured: list[float] = []
        for col in range(count):
            try:
                value = bandwidth(_cell(matrix, 0, col), f"{testcase} gpu{col}")
            except Unmeasurable as exc:
                findings.append(unknown(f"gpu{col} {label}", exc.reason))
                continue
            measured.append(value)
            if not ref.admits(value):
                findings.append(bad(f"gpu{col} {label}", f"{value:.1f} GB/s", ref.describe()))
        low = min(measured) if measured else None
        lows.append(f"{label} min {low:.1f}" if low is not None else f"{label} -")
        findings.append(_fleet_finding(label, low, doc.get("fleet") or {}, fleet_key, tol, ref.value))
    return roll_up("NVL-02", facts.node, findings,
                   expected=f"H2D/D2H {reference(topology, judge.H2D_REF).describe()} per GPU",
                   healthy=" / ".join(lows) + " GB/s")
