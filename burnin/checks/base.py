"""Check registry and the helpers every check uses to walk GPUs and HCAs.

Every value a check judges comes through one of the ``measured_*`` helpers or
an accessor that raises :class:`Unmeasurable`: a value a node did not report,
reported as NaN or infinity, of the wrong type, or outside what the hardware can
physically show, makes the subject ``incomplete`` with the value quoted, never
``pass``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from burnin.checks.references import missing_reason, missing_references
from burnin.checks.registry import APPLICABILITY as APPLICABILITY  # the registry, re-exported
from burnin.checks.registry import CHECKS as CHECKS
from burnin.checks.registry import CheckFunction as CheckFunction
from burnin.checks.registry import CheckSpec as CheckSpec
from burnin.checks.registry import load_all
from burnin.evaluate.verdict import Finding, Unmeasurable, Verdict, incomplete
from burnin.evaluate.verdict import bad as bad  # the checks' finding constructors, re-exported
from burnin.evaluate.verdict import judge as judge
from burnin.evaluate.verdict import ok as ok
from burnin.evaluate.verdict import unknown as unknown
from burnin.facts import Facts, GpuFacts, HcaFacts
from burnin.facts.values import CLOCK_EVENT_MASK as CLOCK_EVENT_MASK  # what a measurement is: re-exported
from burnin.facts.values import COUNTER_MAX as COUNTER_MAX
from burnin.facts.values import ERROR_COUNT as ERROR_COUNT
from burnin.facts.values import GPU_COUNT as GPU_COUNT
from burnin.facts.values import GPU_MEMORY_MIB as GPU_MEMORY_MIB
from burnin.facts.values import GPU_TEMPERATURE_C as GPU_TEMPERATURE_C
from burnin.facts.values import GPU_TEMPERATURE_LIMIT_C as GPU_TEMPERATURE_LIMIT_C
from burnin.facts.values import IB_RATE_GBPS as IB_RATE_GBPS
from burnin.facts.values import NUMA_BALANCING_MODE as NUMA_BALANCING_MODE
from burnin.facts.values import NUMA_NODE as NUMA_NODE
from burnin.facts.values import NVML_ENUM as NVML_ENUM
from burnin.facts.values import PCIE_GENERATION as PCIE_GENERATION
from burnin.facts.values import PCIE_WIDTH as PCIE_WIDTH
from burnin.facts.values import POWER_LIMIT_MW as POWER_LIMIT_MW
from burnin.facts.values import PhysicalRange as PhysicalRange
from burnin.facts.values import measured_count as measured_count
from burnin.facts.values import measured_flag as measured_flag
from burnin.facts.values import measured_number as measured_number
from burnin.facts.values import quote as _quote
from burnin.topology.model import Hca, Topology


def declare_applicability(check_ids: tuple[str, ...], rule: Callable[[Topology], str | None]) -> None:
    """Let the topology say when these checks do not apply (a node type without a storage fabric)."""
    for check_id in check_ids:
        APPLICABILITY[check_id] = rule


def not_applicable_reason(check_id: str, topology: Topology) -> str | None:
    """Why ``check_id`` does not apply to ``topology`` by the topology's own declaration; None when it applies.

    A check's module declares its applicability when it registers the check, so a check not registered
    yet has its modules imported first: the first test of a suite may ask before anything imported them.
    """
    if check_id not in CHECKS:
        load_all()
    rule = APPLICABILITY.get(check_id)
    return rule(topology) if rule is not None else None


def check(check_id: str, title: str, *, sources: tuple[str, ...], references: tuple[str, ...] = (),
          fast: bool = True, evidence: tuple[str, ...] = ()) -> Callable[[CheckFunction], CheckFunction]:
    """Register a check function under its catalog id, with what it needs.

    ``sources``: the fact sources it reads (collector source names, or the phase
    that records its measurements); ``references``: the topology references it
    reads. A topology that lacks one of them makes the check incomplete with that
    cause before it looks at any fact (burnin.checks.references); ``evidence``: the
    facts sections of a suite's phase it also judges when they are there.
    """
    if not sources:
        raise RuntimeError(f"check {check_id} declares no fact source")

    def register(func: CheckFunction) -> CheckFunction:
        if check_id in CHECKS:
            raise RuntimeError(f"check {check_id} registered twice")

        def guarded(facts: Facts, topology: Topology) -> Verdict:
            missing = missing_references(topology, references)
            if missing:
                return incomplete(check_id, facts.node, missing_reason(topology, missing))
            # Unmeasurable anywhere in a check means the whole check is incomplete.
            try:
                return func(facts, topology)
            except Unmeasurable as exc:
                return incomplete(check_id, facts.node, exc.reason)

        CHECKS[check_id] = CheckSpec(check_id, title, fast, guarded, tuple(references), tuple(sources),
                                     tuple(evidence))
        return guarded

    return register


def evaluate(check_id: str, facts: Facts, topology: Topology) -> Verdict:
    """Run one registered check."""
    return load_all()[check_id].func(facts, topology)


def _without_subject(subject: str, reason: str) -> str:
    """A reason as filed under its subject (``gpu3: ...``), without naming the subject twice."""
    return reason[len(subject) + 1:] if reason.startswith(subject + " ") else reason


# ------------------------------------------------------------------ GPUs


def gpu_subject(gpu: GpuFacts, topology: Topology) -> str:
    """``gpuN`` by the topology's slot at the GPU's bus id (NVML renumbers when one is missing)."""
    return _subject(gpu, _gpu_slots(topology))


def _gpu_slots(topology: Topology) -> dict[str, int]:
    """Bus id -> the index of the topology's GPU there (the first one listed at it)."""
    slots: dict[str, int] = {}
    for device in topology.gpus.devices:
        slots.setdefault(device.bus_id, device.index)
    return slots


def _subject(gpu: GpuFacts, slots: dict[str, int]) -> str:
    bus = gpu.get("bus_id")
    slot = slots.get(bus) if isinstance(bus, str) else None
    return f"gpu{slot}" if slot is not None else f"gpu{gpu.get('index')}"


def iter_gpus(facts: Facts, topology: Topology) -> Iterator[tuple[str, GpuFacts | None, str]]:
    """Yield (subject, the GPU's facts or None, why-not) for every GPU NVML enumerated.

    A lost GPU yields None with the NVML error, so checks report it as not
    measured rather than inventing values.
    """
    slots = _gpu_slots(topology)
    for gpu in facts.gpus():
        subject = _subject(gpu, slots)
        why = gpu.unanswered
        yield (subject, None, why) if why is not None else (subject, gpu, "")


def unlisted_gpus(facts: Facts, topology: Topology) -> list[Finding]:
    """A not-measured finding for each GPU of the topology that NVML did not list.

    The per-GPU checks cannot speak for a GPU they never saw; INV-01 fails
    the node for it, the others say it was not measured.
    """
    gpus = facts.gpus()
    if len(gpus) >= topology.gpus.count:
        return []
    listed = {g.get("bus_id") for g in gpus}
    missing = [d for d in topology.gpus.devices if d.bus_id not in listed]
    if len(missing) != topology.gpus.count - len(gpus):
        return [unknown("node", f"NVML lists {len(gpus)} of {topology.gpus.count} GPUs")]
    return [unknown(f"gpu{d.index}", f"not listed by NVML ({d.bus_id})") for d in missing]


def gpu_field(gpu: GpuFacts, *path: str) -> Any:
    """Nested field of a GPU's facts; Unmeasurable (with NVML's error) if absent (:meth:`GpuFacts.field`)."""
    return gpu.field(*path)


def per_gpu(facts: Facts, topology: Topology,
            judge_gpu: Callable[[str, GpuFacts], Finding]) -> list[Finding]:
    """One finding per GPU of the node, plus not-measured ones for GPUs NVML did not list."""
    findings: list[Finding] = []
    for subject, gpu, why in iter_gpus(facts, topology):
        if gpu is None:
            findings.append(unknown(subject, why))
            continue
        try:
            findings.append(judge_gpu(subject, gpu))
        except Unmeasurable as exc:
            findings.append(unknown(subject, _without_subject(subject, exc.reason)))
    return findings + unlisted_gpus(facts, topology)


# ------------------------------------------------------------------ HCAs


def per_hca(facts: Facts, hcas: tuple[Hca, ...], judge_hca: Callable[[Hca, HcaFacts], Finding]) -> list[Finding]:
    """One finding per HCA of ``hcas``: absent fails, an unreadable entry is not measured."""
    present: dict[str, Any] = facts.hcas()
    findings: list[Finding] = []
    for hca in hcas:
        data = present.get(hca.name)
        if data is None:
            findings.append(bad(hca.name, "absent", "present"))
            continue
        if not isinstance(data, dict):
            findings.append(unknown(hca.name, f"facts unreadable: {_quote(data)}"))
            continue
        try:
            findings.append(judge_hca(hca, HcaFacts(hca.name, data)))
        except Unmeasurable as exc:
            findings.append(unknown(hca.name, _without_subject(hca.name, exc.reason)))
    return findings


def parse_cpulist(text: str) -> frozenset[int]:
    """``0-3,8,10-11`` → {0,1,2,3,8,10,11}. Raises Unmeasurable on garbage."""
    from burnin.errors import ParseError
    from burnin.parsers._common import expand_cpu_list

    try:
        return frozenset(expand_cpu_list(text))
    except ParseError:
        raise Unmeasurable(f"unreadable cpulist {text!r}") from None
