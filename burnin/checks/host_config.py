"""Host configuration and population checks (TOP-06, TOP-07, TOP-09): CPU governors, hugepages, memory, CPUs.

All read the collector's ``host`` source (cheap sysfs/procfs reads, so they are
fast and in the health probe's set). Text the node gave is parsed by
burnin.parsers.hostmem; anything unreadable is incomplete, never pass.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from burnin.checks.base import PhysicalRange, check, judge, measured_count, parse_cpulist, unknown
from burnin.checks.references import reference
from burnin.errors import ParseError
from burnin.evaluate.verdict import Finding, Unmeasurable, Verdict, roll_up
from burnin.facts import Facts
from burnin.parsers._common import compress_cpu_list
from burnin.parsers.hostmem import Meminfo, hugepage_size_kib, parse_kernel_choice, parse_meminfo
from burnin.text import printable
from burnin.topology.model import Topology

MEMORY_KIB = PhysicalRange(1, 2**42, "kB")  # a MemTotal above 4 PiB is not a reading
HUGEPAGE_COUNT = PhysicalRange(0, 2**40, "pages")
KIB_PER_GIB = 1024 * 1024
_GOVERNOR = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
NO_CPUFREQ = "no cpufreq driver"


def _host(facts: Facts) -> dict[str, Any]:
    host = facts.host()
    if not isinstance(host, dict):
        raise Unmeasurable(f"host facts unreadable: {printable(repr(host), limit=60)}")
    return host


def online_cpus(host: dict[str, Any]) -> frozenset[int]:
    """The CPUs of ``/sys/devices/system/cpu/online``; Unmeasurable when unreadable or empty."""
    text = host.get("cpu_online")
    if not isinstance(text, str) or not text.strip():
        raise Unmeasurable("/sys/devices/system/cpu/online unreadable")
    cpus = parse_cpulist(text)
    if not cpus:
        raise Unmeasurable("/sys/devices/system/cpu/online lists no CPU")
    return cpus


def _gib(kib: int) -> str:
    return f"{kib / KIB_PER_GIB:.1f} GiB"


# ------------------------------------------------------------------ TOP-06


@functools.lru_cache(maxsize=64)
def _governor_name(text: str) -> str | None:
    """The governor a scaling_governor file's text names (None: none), matched once per distinct text (a node
    has 224 CPUs and one or two texts)."""
    stripped = text.strip()
    return stripped if _GOVERNOR.match(stripped) else None


def _governor_groups(host: dict[str, Any], online: frozenset[int]) -> tuple[dict[str, list[int]], dict[int, str]]:
    """Online CPUs by governor (``NO_CPUFREQ`` for none), and the CPUs whose governor could not be read."""
    governors = host.get("governors")
    if not isinstance(governors, dict):
        raise Unmeasurable("cpufreq governors were not read")
    errors = host.get("governor_errors") or {}
    groups: dict[str, list[int]] = {}
    unreadable: dict[int, str] = {}
    for cpu in sorted(online):
        key = str(cpu)
        value = governors.get(key)
        if key in errors:
            unreadable[cpu] = printable(str(errors[key]), limit=120)
        elif key not in governors:
            unreadable[cpu] = f"/sys/devices/system/cpu/cpu{cpu} absent although online"
        elif value is None:
            groups.setdefault(NO_CPUFREQ, []).append(cpu)
        elif isinstance(value, str) and (name := _governor_name(value)) is not None:
            groups.setdefault(name, []).append(cpu)
        else:
            unreadable[cpu] = f"scaling_governor {printable(repr(value), limit=40)} is not a governor name"
    return groups, unreadable


@check("TOP-06", "CPU frequency governor as designed on every online CPU", sources=("host",))
def cpu_governor(facts: Facts, topology: Topology) -> Verdict:
    host = _host(facts)
    want = topology.host.cpu_governor
    online = online_cpus(host)
    expected = (f"governor {want} on every online CPU" if want is not None
                else "no cpufreq driver on any CPU (the BIOS owns P-states)")
    groups, unreadable = _governor_groups(host, online)
    findings: list[Finding] = []
    for name, cpus in sorted(groups.items(), key=lambda item: (-len(item[1]), item[0])):
        healthy = name == (want if want is not None else NO_CPUFREQ)
        shown = name if name == NO_CPUFREQ else f"governor {name}"
        findings.append(judge("node", healthy, f"{shown} on CPUs {compress_cpu_list(cpus)} "
                                               f"({len(cpus)}/{len(online)} online)", expected))
    if unreadable:
        cpus = sorted(unreadable)
        findings.append(unknown(f"CPUs {compress_cpu_list(cpus)}", unreadable[cpus[0]], expected))
    healthy_text = f"{f'governor {want}' if want is not None else NO_CPUFREQ} on all {len(online)} online CPUs"
    driver = host.get("cpufreq_driver")
    if want is not None and isinstance(driver, str) and _GOVERNOR.match(driver):
        healthy_text += f" ({driver})"
    return roll_up("TOP-06", facts.node, findings, expected=expected, healthy=healthy_text)


# ------------------------------------------------------------------ TOP-07


def _thp_finding(host: dict[str, Any], allowed: tuple[str, ...]) -> Finding:
    expected = f"THP {' or '.join(allowed)}"
    text = host.get("thp_enabled")
    if text is None:
        return unknown("node", "/sys/kernel/mm/transparent_hugepage/enabled unreadable", expected)
    try:
        mode = parse_kernel_choice(str(text)).active
    except ParseError as exc:
        return unknown("node", f"transparent_hugepage/enabled: {exc}", expected)
    return judge("node", mode in allowed, f"THP {mode}", expected)


def _hugepages_finding(host: dict[str, Any], topology: Topology) -> Finding:
    ref = reference(topology, "hugepages_gib")
    expected = f"static hugepages {ref.describe()}"
    pools = host.get("hugepages")
    if pools is None:
        # No /sys/kernel/mm/hugepages: a kernel without hugetlbfs holds no static pages.
        return judge("node", ref.admits(0), "no hugetlb pools (kernel without hugetlbfs)", expected)
    if not isinstance(pools, dict):
        return unknown("node", "hugepage pools unreadable", expected)
    held_kib = 0
    reserved: list[str] = []
    for directory, count_text in sorted(pools.items()):
        try:
            size = hugepage_size_kib(str(directory))
        except ParseError:
            return unknown("node", f"{printable(str(directory), limit=60)} is not a hugepage pool", expected)
        count = count_text.strip() if isinstance(count_text, str) and count_text.strip().isdigit() else None
        if count is None:
            return unknown("node", f"{directory}/nr_hugepages unreadable", expected)
        try:
            pages = measured_count(int(count), str(directory), "nr_hugepages", HUGEPAGE_COUNT)
        except Unmeasurable as exc:
            return unknown("node", exc.reason, expected)
        if pages:
            held_kib += pages * size
            reserved.append(f"{pages} x {size} kB")
    held_gib = held_kib / KIB_PER_GIB
    measured = f"static hugepages {held_gib:g} GiB ({', '.join(reserved)})" if reserved else "no static hugepages"
    return judge("node", ref.admits(held_gib), measured, expected)


@check("TOP-07", "Transparent hugepages and static hugepages as designed", sources=("host",),
       references=("hugepages_gib",))
def hugepages(facts: Facts, topology: Topology) -> Verdict:
    host = _host(facts)
    allowed = topology.host.transparent_hugepage
    findings = [_thp_finding(host, allowed), _hugepages_finding(host, topology)]
    expected = f"THP {' or '.join(allowed)}; static hugepages {reference(topology, 'hugepages_gib').describe()}"
    return roll_up("TOP-07", facts.node, findings, expected=expected)


# ------------------------------------------------------------------ TOP-09


def _meminfo(text: object, where: str) -> Meminfo:
    if not isinstance(text, str):
        raise Unmeasurable(f"{where} unreadable")
    try:
        return parse_meminfo(text)
    except ParseError as exc:
        raise Unmeasurable(f"{where}: {exc}") from None


def _memory_total(host: dict[str, Any], topology: Topology) -> Finding:
    ref = reference(topology, "host_memory_gib")
    expected = f"MemTotal {ref.describe()}"
    try:
        info = _meminfo(host.get("meminfo"), "/proc/meminfo")
        kib = measured_count(info.kib("MemTotal"), "/proc/meminfo", "MemTotal", MEMORY_KIB)
    except Unmeasurable as exc:
        return unknown("node", exc.reason, expected)
    return judge("node", ref.admits(kib / KIB_PER_GIB), f"MemTotal {_gib(kib)}", expected)


def _cpus_online(host: dict[str, Any], topology: Topology) -> Finding:
    ref = reference(topology, "cpus_online")
    expected = f"{ref.describe()} online"
    try:
        online = online_cpus(host)
    except Unmeasurable as exc:
        return unknown("node", exc.reason, expected)
    measured = f"{len(online)} CPUs online"
    present = host.get("cpu_present")
    if isinstance(present, str) and present.strip():
        try:
            offline = sorted(parse_cpulist(present) - online)
        except Unmeasurable:
            offline = []
        if offline:
            measured += f" (offline: {compress_cpu_list(offline)})"
    return judge("node", ref.admits(len(online)), measured, expected)


def _numa_memory(host: dict[str, Any], topology: Topology) -> list[Finding]:
    """Each NUMA node's MemTotal within the spread of the largest node (a missing DIMM unbalances them)."""
    spread = reference(topology, "numa_memory_spread")
    if spread.value < 0 or spread.value >= 1:
        raise Unmeasurable(f"topology {topology.name} numa_memory_spread {spread.value:g} is not a fraction 0..1")
    expected = f"within {spread.value:.0%} of the largest node"
    nodes = host.get("node_meminfo")
    if not isinstance(nodes, dict):
        return [unknown("numa", "NUMA node meminfo was not read", expected)]
    findings: list[Finding] = []
    sizes: dict[int, int] = {}
    for node in sorted(topology.numa.cpulists) or range(topology.numa.nodes):
        subject = f"numa{node}"
        where = f"/sys/devices/system/node/node{node}/meminfo"
        if str(node) not in nodes:
            findings.append(unknown(subject, f"{where} absent", expected))
            continue
        try:
            info = _meminfo(nodes[str(node)], where)
            if info.node != node:
                raise Unmeasurable(f"{where} describes node {info.node}")
            sizes[node] = measured_count(info.kib("MemTotal"), where, "MemTotal", MEMORY_KIB)
        except Unmeasurable as exc:
            findings.append(unknown(subject, exc.reason, expected))
    if not sizes:
        return findings
    largest = max(sizes.values())
    for node, kib in sorted(sizes.items()):
        short = (largest - kib) / largest
        text = f"MemTotal {_gib(kib)}" + (f" ({short:.1%} below the largest node)" if short > 0 else "")
        findings.append(judge(f"numa{node}", short <= spread.value, text, expected))
    return findings


@check("TOP-09", "Host memory and CPUs as designed, memory balanced across NUMA nodes", sources=("host",),
       references=("host_memory_gib", "cpus_online", "numa_memory_spread"))
def host_population(facts: Facts, topology: Topology) -> Verdict:
    host = _host(facts)
    memory = reference(topology, "host_memory_gib")
    cpus = reference(topology, "cpus_online")
    totals = [_memory_total(host, topology), _cpus_online(host, topology)]
    findings = [*totals, *_numa_memory(host, topology)]
    expected = f"MemTotal {memory.describe()}, {cpus.describe()} online, NUMA nodes' memory balanced"
    return roll_up("TOP-09", facts.node, findings, expected=expected, healthy=", ".join(f.measured for f in totals))


__all__ = ["cpu_governor", "host_population", "hugepages", "online_cpus"]
