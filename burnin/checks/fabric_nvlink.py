"""NVLink checks of the fabric suite beyond nvbandwidth: NVL-03 (p2pBandwidthLatencyTest) and NVL-04 (counters).

NVL-03 judges the CUDA sample's matrices per ordered GPU pair: peer access
granted (the connectivity matrix all 1), P2P-enabled one-way bandwidth (P2P
writes) at least the topology's floor, and, where the output has it, the
GPU-timed P2P write latency at most the topology's ceiling.

NVL-04 compares the NVLink links and error counters re-read after the
single-node traffic (``fabric.nvlink_after``, burnin.fabric.nvlink_after) with
those gathered before it (the node's ``nvml`` facts, which GPU-10 and GPU-11
judge at rest): every link still up, and each counter's growth during the
traffic within GPU-11's limits. Counters are cumulative: only the difference
counts, and one that went down (a reset) is not a measurement.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from burnin.checks.base import (
    ERROR_COUNT,
    PhysicalRange,
    bad,
    check,
    iter_gpus,
    measured_count,
    measured_flag,
    measured_number,
    ok,
    unknown,
)
from burnin.checks.fabric import bandwidth, fabric_section
from burnin.checks.references import reference
from burnin.evaluate.verdict import Finding, Unmeasurable, Verdict, roll_up
from burnin.fabric import judge
from burnin.fabric.nvlink_after import SECTION
from burnin.fabric.p2p import CONNECTIVITY, LATENCY, TOOL, UNIDIRECTIONAL, P2pMeasurement
from burnin.facts import Facts, GpuFacts
from burnin.topology.model import Reference, Topology

LATENCY_US = PhysicalRange(0, 1e7, "us")
"""What a copy's latency can show at all: a number of seconds in microseconds (not what is healthy)."""

# ---------------------------------------------------------------- NVL-03


def _p2p(doc: dict[str, Any]) -> P2pMeasurement:
    data = doc.get("p2p")
    if not data:
        raise Unmeasurable(f"no {TOOL} run")
    if not isinstance(data, dict):
        raise Unmeasurable(f"{TOOL}: no readable measurement ({data!r:.40})")
    try:
        run = P2pMeasurement.from_json(data)
    except (TypeError, ValueError, IndexError) as exc:
        raise Unmeasurable(f"{TOOL}: unreadable measurement ({exc})") from None
    if not run.ok:
        raise Unmeasurable(run.reason or f"{TOOL} did not complete")
    return run


def _matrix(run: P2pMeasurement, name: str) -> list[list[float | None]]:
    matrix = run.matrices.get(name)
    if not isinstance(matrix, list) or not all(isinstance(row, list) for row in matrix):
        raise Unmeasurable(f"{TOOL} printed no {name} matrix")
    return matrix


def _cell(matrix: list[list[float | None]], row: int, col: int) -> object:
    return matrix[row][col] if row < len(matrix) and col < len(matrix[row]) else None


@dataclass(frozen=True, slots=True)
class _Limits:
    bandwidth: Reference
    latency: Reference
    judge_latency: bool
    """The output has the P2P write latency table (the real tool always prints it)."""


@dataclass(frozen=True, slots=True)
class _Pair:
    """One ordered GPU pair as judged: what failed, what could not be read."""

    row: int
    col: int
    no_access: bool = False
    slow_gbps: float | None = None
    """P2P writes below the floor."""
    slow_us: float | None = None
    """P2P write latency above the ceiling."""
    unread: tuple[str, ...] = ()

    @property
    def subject(self) -> str:
        return f"gpu{self.row}->gpu{self.col}"

    @property
    def failed(self) -> bool:
        return self.no_access or self.slow_gbps is not None or self.slow_us is not None

    def describe(self) -> str:
        return _describe([self])


def _describe(pairs: list[_Pair]) -> str:
    """What failed over these pairs: no access, the bandwidth range, the worst latency."""
    parts = ["no P2P access (connectivity 0)"] if any(p.no_access for p in pairs) else []
    slow = [p.slow_gbps for p in pairs if p.slow_gbps is not None]
    if slow:
        low, high = min(slow), max(slow)
        parts.append(f"{low:.2f} GB/s P2P writes" if low == high else f"{low:.2f}..{high:.2f} GB/s P2P writes")
    late = [p.slow_us for p in pairs if p.slow_us is not None]
    if late:
        parts.append(f"{max(late):.2f} us P2P write latency" + (" at worst" if len(late) > 1 else ""))
    return ", ".join(parts)


def _pair(row: int, col: int, access: object, bw: object, latency: object, limits: _Limits,
          judged: dict[str, list[float]]) -> _Pair:
    found: dict[str, Any] = {}
    unread: list[str] = []
    if isinstance(access, bool) or access not in (0, 1):
        unread.append(f"P2P access {access!r:.20} is neither 0 nor 1")
    elif access == 0:
        found["no_access"] = True
    try:
        value = bandwidth(bw, "P2P writes")
        judged["bandwidth"].append(value)
        if not limits.bandwidth.admits(value):
            found["slow_gbps"] = value
    except Unmeasurable as exc:
        unread.append(exc.reason)
    if limits.judge_latency:
        try:
            micros = measured_number(latency, "P2P write", "latency", LATENCY_US)
            judged["latency"].append(micros)
            if not limits.latency.admits(micros):
                found["slow_us"] = micros
        except Unmeasurable as exc:
            unread.append(exc.reason)
    return _Pair(row, col, unread=tuple(unread), **found)


def _findings(pairs: list[_Pair], count: int, expected: str) -> list[Finding]:
    """A GPU that fails with every other GPU both ways is named once (the pairs share it); other pairs alone."""
    failed = [p for p in pairs if p.failed]
    mine = {g: [p for p in failed if g in (p.row, p.col)] for g in range(count)}
    common = [g for g in range(count) if count > 2 and len(mine[g]) == 2 * (count - 1)]
    findings = [bad(f"gpu{g}", f"fails with all {len(mine[g])} pairs it is in: {_describe(mine[g])}", expected)
                for g in common]
    for pair in pairs:
        if pair.failed:
            if not any(g in (pair.row, pair.col) for g in common):
                findings.append(bad(pair.subject, pair.describe(), expected))
        elif pair.unread:
            findings.append(unknown(pair.subject, "; ".join(pair.unread), expected))
        else:
            findings.append(ok(pair.subject, "P2P ok", expected))
    return findings


@check("NVL-03", "p2pBandwidthLatencyTest: peer access, P2P bandwidth and latency per GPU pair",
       sources=("fabric",), references=(judge.P2P_REF, judge.P2P_LATENCY_REF), fast=False)
def p2p_pairs(facts: Facts, topology: Topology) -> Verdict:
    run = _p2p(fabric_section(facts))
    connectivity = _matrix(run, CONNECTIVITY)
    unidirectional = _matrix(run, UNIDIRECTIONAL)
    latency = run.matrices.get(LATENCY)
    count = len(topology.gpus.devices)
    floor = reference(topology, judge.P2P_REF, lower_bound=True)
    ceiling = reference(topology, judge.P2P_LATENCY_REF)
    limits = _Limits(floor, ceiling, isinstance(latency, list))
    latency_text = f", latency {ceiling.describe()}" if limits.judge_latency else ""
    expected = (f"P2P access on all {count * (count - 1)} ordered pairs, P2P writes {floor.describe()}{latency_text} "
                "per pair")
    judged: dict[str, list[float]] = {"bandwidth": [], "latency": []}
    pairs = [_pair(row, col, _cell(connectivity, row, col), _cell(unidirectional, row, col),
                   _cell(latency, row, col) if isinstance(latency, list) else None, limits, judged)
             for row in range(count) for col in range(count) if row != col]
    findings = _findings(pairs, count, expected)
    if len(connectivity) > count:
        findings.append(bad("gpus", f"{len(connectivity)} GPUs measured", f"{count}"))
    healthy = ""
    if judged["bandwidth"]:
        healthy = (f"P2P access on {len(pairs)} pairs, P2P writes min {min(judged['bandwidth']):.2f} GB/s "
                   f"(median {judge.median(judged['bandwidth']) or 0:.2f})")
        healthy += (f", latency max {max(judged['latency']):.2f} us" if judged["latency"]
                    else f", no latency table from {TOOL}")
    return roll_up("NVL-03", facts.node, findings, expected=expected, healthy=healthy)


# ---------------------------------------------------------------- NVL-04

COUNTER_REFS = (("recovery", "nvlink_recovery_errors"), ("replay", "nvlink_replay_errors"),
                ("crc_flit", "nvlink_crc_errors"))
"""GPU-11's counters and limits, judged here on their growth during the traffic."""
LINKS_REF = "nvlink_links_active"


def _gpus(facts: Facts, topology: Topology, when: str) -> dict[str, tuple[GpuFacts | None, str]]:
    """subject -> (the GPU's facts or None, why not), for every GPU NVML listed."""
    try:
        return {subject: (gpu, why) for subject, gpu, why in iter_gpus(facts, topology)}
    except Unmeasurable as exc:
        raise Unmeasurable(f"{when}: {exc.reason}") from None


def _links(subject: str, gpu: GpuFacts, when: str) -> dict[int, dict[str, Any]]:
    """The GPU's NVLink entries by link number; Unmeasurable when any state could not be read."""
    links = gpu.get("nvlink")
    if not isinstance(links, list) or not all(isinstance(link, dict) for link in links):
        raise Unmeasurable(f"{subject} NVLink list unreadable {when}")
    unread = gpu.unread_link_states()
    if unread:
        raise Unmeasurable(f"{subject} NVLink state unreadable {when}: {unread}")
    return {measured_count(link.get("link"), subject, f"NVLink number {when}", PhysicalRange(0, 63)): link
            for link in links}


def _counter(subject: str, gpu: GpuFacts, link: int, entry: dict[str, Any], name: str, when: str) -> int:
    value = entry.get(name)
    if value is None:
        why = gpu.link_error(link, name) or "not reported"
        raise Unmeasurable(f"{subject} NVLink {link} {name} counter {when}: {why}")
    return measured_count(value, subject, f"NVLink {link} {name} counter {when}", ERROR_COUNT)


def _judge_gpu(subject: str, before: GpuFacts, after: GpuFacts, links_ref: Reference,
               refs: dict[str, Reference], traffic: str, expected: str) -> Finding:
    old = _links(subject, before, "before the traffic")
    new = _links(subject, after, f"after {traffic}")
    if set(new) != set(old):
        raise Unmeasurable(f"{subject} NVML listed links {sorted(old)} before the traffic and {sorted(new)} after")
    down = [n for n, link in sorted(new.items()) if not measured_flag(link.get("active"), subject,
                                                                     f"NVLink {n} active after {traffic}")]
    went_down = [n for n in down if measured_flag(old[n].get("active"), subject, f"NVLink {n} active before")]
    growth = dict.fromkeys(refs, 0)
    grew_on: dict[str, list[int]] = {name: [] for name in refs}
    for number, entry in sorted(new.items()):
        for name in refs:
            was = _counter(subject, before, number, old[number], name, "before the traffic")
            now = _counter(subject, after, number, entry, name, f"after {traffic}")
            if now < was:
                raise Unmeasurable(f"{subject} NVLink {number} {name} counter went down from {was} to {now} during "
                                   "the traffic (reset?): no growth to judge")
            if now > was:
                growth[name] += now - was
                grew_on[name].append(number)
    problems: list[str] = []
    active = len(new) - len(down)
    if not links_ref.admits(active):
        detail = f"down: {','.join(map(str, down))}" if down else "none down"
        if went_down:
            detail += f"; went down during the traffic: {','.join(map(str, went_down))}"
        elif down:
            detail += ", already down before it"
        problems.append(f"{active}/{len(new)} NVLink links up after {traffic} ({detail})")
    over = [name for name, ref in refs.items() if not ref.admits(growth[name])]
    if over:
        problems.append(f"grew during {traffic}: " + ", ".join(
            f"{name} +{growth[name]} (link {','.join(map(str, grew_on[name]))})" for name in over))
    if problems:
        return bad(subject, "; ".join(problems), expected)
    grown = ", ".join(f"{name} +{value}" for name, value in growth.items() if value)
    text = f"{active}/{len(new)} links up, " + (f"counters grew within limits ({grown})" if grown
                                                 else "no NVLink error counter grew")
    return ok(subject, text, expected)


@check("NVL-04", "NVLink links and error counters after the fabric traffic",
       sources=("nvml", "fabric"), references=(LINKS_REF, *(ref for _, ref in COUNTER_REFS)), fast=False)
def nvlink_after_traffic(facts: Facts, topology: Topology) -> Verdict:
    doc = fabric_section(facts)
    snap = doc.get(SECTION)
    if not isinstance(snap, dict):
        raise Unmeasurable("NVLink was not read again after the fabric traffic (no post-traffic snapshot)")
    ran = [str(tool) for tool in snap.get("after") or []]
    traffic = ", ".join(ran) if ran else "the fabric traffic"
    if snap.get("unreachable"):
        raise Unmeasurable(f"NVML after {traffic}: {snap['unreachable']}")
    links_ref = reference(topology, LINKS_REF)
    refs = {name: reference(topology, key) for name, key in COUNTER_REFS}
    expected = (f"{links_ref.describe()} up after the traffic; counter growth during it: "
                + ", ".join(f"{name} {ref.describe()}" for name, ref in refs.items()) + " per GPU")
    before = _gpus(facts, topology, "NVML before the traffic")
    after = _gpus(Facts(facts.node, snap), topology, f"NVML after {traffic}")
    findings: list[Finding] = []
    subjects = [f"gpu{d.index}" for d in topology.gpus.devices]
    subjects += sorted(s for s in {*before, *after} if s not in subjects)
    for subject in subjects:
        old, why_old = before.get(subject, (None, "not listed by NVML"))
        new, why_new = after.get(subject, (None, "not listed by NVML"))
        if old is None:
            findings.append(unknown(subject, f"before the traffic: {why_old}"))
        elif new is None:
            findings.append(unknown(subject, f"after {traffic}: {why_new}"))
        else:
            try:
                findings.append(_judge_gpu(subject, old, new, links_ref, refs, traffic, expected))
            except Unmeasurable as exc:
                findings.append(unknown(subject, exc.reason.removeprefix(f"{subject} ")))
    return roll_up("NVL-04", facts.node, findings, expected=expected,
                   healthy=f"after {traffic}: every NVLink up, no error counter grew beyond its limit")
