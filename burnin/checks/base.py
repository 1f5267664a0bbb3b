"""Check registry and the helpers every check uses to walk GPUs and HCAs.

Every value a check judges comes through one of the ``measured_*`` helpers or
an accessor that raises :class:`Unmeasurable`: a value a node did not report,
reported as NaN or infinity, of the wrong type, or outside what the hardware can
physically show, makes the subject ``incomplete`` with the value quoted, never
``pass``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from burnin.checks.references import missing_reason, missing_references
from burnin.evaluate.verdict import Finding, Status, Unmeasurable, Verdict, incomplete
from burnin.facts import Facts
from burnin.topology.model import Hca, Topology

CheckFunction = Callable[[Facts, Topology], Verdict]


@dataclass(frozen=True, slots=True)
class CheckSpec:
    check_id: str
    title: str
    fast: bool
    func: CheckFunction
    references: tuple[str, ...] = ()
    """Names in ``topology.references`` the check reads (burnin.checks.references)."""
    sources: tuple[str, ...] = ()
    """Where its facts come from: collector sources (``nvml``, ``pci``, ``dmesg``...) or a phase (``fabric``)."""


CHECKS: dict[str, CheckSpec] = {}

#: check id -> the node type's own reason the check does not apply to it (None: it applies).
APPLICABILITY: dict[str, Callable[[Topology], str | None]] = {}


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
        from burnin.checks import load_all

        load_all()
    rule = APPLICABILITY.get(check_id)
    return rule(topology) if rule is not None else None


def check(check_id: str, title: str, *, sources: tuple[str, ...], references: tuple[str, ...] = (),
          fast: bool = True) -> Callable[[CheckFunction], CheckFunction]:
    """Register a check function under its catalog id, with what it needs.

    ``sources``: the fact sources it reads (collector source names, or the phase
    that records its measurements); ``references``: the topology references it
    reads. A topology that lacks one of them makes the check incomplete with that
    cause before it looks at any fact (burnin.checks.references).
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

        CHECKS[check_id] = CheckSpec(check_id, title, fast, guarded, tuple(references), tuple(sources))
        return guarded

    return register


def evaluate(check_id: str, facts: Facts, topology: Topology) -> Verdict:
    """Run one registered check."""
    from burnin.checks import load_all

    return load_all()[check_id].func(facts, topology)


def ok(subject: str, measured: str, expected: str) -> Finding:
    return Finding(subject, Status.PASS, measured, expected)


def bad(subject: str, measured: str, expected: str) -> Finding:
    return Finding(subject, Status.FAIL, measured, expected)


def unknown(subject: str, note: str, expected: str = "") -> Finding:
    return Finding(subject, Status.INCOMPLETE, "not measured", expected, note)


def judge(subject: str, measured: bool, text: str, expected: str) -> Finding:
    return ok(subject, text, expected) if measured else bad(subject, text, expected)


# ------------------------------------------------------------ measured values

COUNTER_MAX = 2**64 - 1
"""Hardware error counters are unsigned and at most 64 bits wide."""


@dataclass(frozen=True, slots=True)
class PhysicalRange:
    """What a sensor or register can show at all (not what is healthy: that is the topology's)."""

    lo: float
    hi: float
    unit: str = ""

    def describe(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        return f"{self.lo:g}..{self.hi:g}{unit}"


ERROR_COUNT = PhysicalRange(0, COUNTER_MAX)
GPU_TEMPERATURE_C = PhysicalRange(0, 150, "C")  # NVML reports unsigned degrees; a running GPU shuts down near 92 C
GPU_TEMPERATURE_LIMIT_C = PhysicalRange(1, 150, "C")  # a threshold of 0 C is a threshold not set
POWER_LIMIT_MW = PhysicalRange(1000, 5_000_000, "mW")  # NVML reports milliwatts
PCIE_GENERATION = PhysicalRange(1, 7)
PCIE_WIDTH = PhysicalRange(1, 32, "lanes")
GPU_MEMORY_MIB = PhysicalRange(1, 2**24, "MiB")
CLOCK_EVENT_MASK = PhysicalRange(0, COUNTER_MAX)
GPU_COUNT = PhysicalRange(0, 1024)
NVML_ENUM = PhysicalRange(0, 2**32 - 1)  # an NVML enum or return code (unsigned int)
NUMA_NODE = PhysicalRange(-1, 1023)
NUMA_BALANCING_MODE = PhysicalRange(0, 3)
IB_RATE_GBPS = PhysicalRange(1, 10000, "Gb/s")


def _quote(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def measured_number(value: object, subject: str, what: str, valid: PhysicalRange, *,
                    integer: bool = False) -> float:
    """``value`` as a finite number inside its physical range, else Unmeasurable quoting it.

    ``None`` (not reported), booleans and strings, NaN and infinities, fractions
    where the hardware counts (``integer``) and values outside ``valid`` are
    not measurements.
    """
    if value is None:
        raise Unmeasurable(f"{subject} {what} not reported")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Unmeasurable(f"{subject} {what} {_quote(value)} is not a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise Unmeasurable(f"{subject} {what} {_quote(value)} is not a finite number")
    if integer and isinstance(value, float) and not value.is_integer():
        raise Unmeasurable(f"{subject} {what} {_quote(value)} is not a whole number")
    if value < valid.lo or value > valid.hi:
        raise Unmeasurable(f"{subject} {what} {_quote(value)} outside its physical range {valid.describe()}")
    return value


def measured_count(value: object, subject: str, what: str, valid: PhysicalRange = ERROR_COUNT) -> int:
    """A whole number (counter, index, mode) inside ``valid``; Unmeasurable otherwise."""
    return int(measured_number(value, subject, what, valid, integer=True))


def measured_flag(value: object, subject: str, what: str) -> bool:
    """A yes/no the collector reports as a boolean; anything else is not a measurement."""
    if value is None:
        raise Unmeasurable(f"{subject} {what} not reported")
    if not isinstance(value, bool):
        raise Unmeasurable(f"{subject} {what} {_quote(value)} is not true/false")
    return value


def _without_subject(subject: str, reason: str) -> str:
    """A reason as filed under its subject (``gpu3: ...``), without naming the subject twice."""
    return reason[len(subject) + 1:] if reason.startswith(subject + " ") else reason


# ------------------------------------------------------------------ GPUs


def gpu_subject(gpu: dict[str, Any], topology: Topology) -> str:
    """``gpuN`` by the topology's slot at the GPU's bus id (NVML renumbers when one is missing)."""
    bus = gpu.get("bus_id")
    for device in topology.gpus.devices:
        if bus is not None and device.bus_id == bus:
            return f"gpu{device.index}"
    return f"gpu{gpu.get('index')}"


def iter_gpus(facts: Facts, topology: Topology) -> Iterator[tuple[str, dict[str, Any] | None, str]]:
    """Yield (subject, gpu facts or None, why-not) for every GPU NVML enumerated.

    A lost GPU yields None with the NVML error, so checks report it as not
    measured rather than inventing values.
    """
    gpus = facts.gpus()
    if not isinstance(gpus, list):
        raise Unmeasurable(f"NVML GPU list unreadable: {_quote(gpus)}")
    for gpu in gpus:
        if not isinstance(gpu, dict):
            raise Unmeasurable(f"NVML GPU entry unreadable: {_quote(gpu)}")
        subject = gpu_subject(gpu, topology)
        errors = gpu.get("errors") or {}
        if gpu.get("lost"):
            yield subject, None, "NVML_ERROR_GPU_IS_LOST"
        elif "handle" in errors:
            yield subject, None, str(errors["handle"])
        else:
            yield subject, gpu, ""


def unlisted_gpus(facts: Facts, topology: Topology) -> list[Finding]:
    """A not-measured finding for each GPU of the topology that NVML did not list.

    The per-GPU checks cannot speak for a GPU they never saw; INV-01 fails
    the node for it, the others say it was not measured.
    """
    gpus = facts.gpus()
    if not isinstance(gpus, list) or len(gpus) >= topology.gpus.count:
        return []
    listed = {g.get("bus_id") for g in gpus if isinstance(g, dict)}
    missing = [d for d in topology.gpus.devices if d.bus_id not in listed]
    if len(missing) != topology.gpus.count - len(gpus):
        return [unknown("node", f"NVML lists {len(gpus)} of {topology.gpus.count} GPUs")]
    return [unknown(f"gpu{d.index}", f"not listed by NVML ({d.bus_id})") for d in missing]


def gpu_field(gpu: dict[str, Any], *path: str) -> Any:
    """Nested field of a GPU's facts; Unmeasurable (with NVML's error) if absent.

    The reason does not name the GPU: :func:`per_gpu` files it under the GPU's subject.
    """
    value: Any = gpu
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
        if value is None:
            errors = gpu.get("errors") or {}
            error = errors.get(path[0]) or next(
                (e for k, e in errors.items() if k.startswith(path[0])), None)
            raise Unmeasurable(f"{'.'.join(path)}: {error or 'not reported'}")
    return value


def per_gpu(facts: Facts, topology: Topology,
            judge_gpu: Callable[[str, dict[str, Any]], Finding]) -> list[Finding]:
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


def per_hca(facts: Facts, hcas: tuple[Hca, ...], judge_hca: Callable[[Hca, dict[str, Any]], Finding]) -> list[Finding]:
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
            findings.append(judge_hca(hca, data))
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
