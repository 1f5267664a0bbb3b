"""Check registry and the helpers every check uses to walk GPUs and HCAs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

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


CHECKS: dict[str, CheckSpec] = {}


def check(check_id: str, title: str, *, fast: bool = True) -> Callable[[CheckFunction], CheckFunction]:
    """Register a check function under its catalog id."""

    def register(func: CheckFunction) -> CheckFunction:
        if check_id in CHECKS:
            raise RuntimeError(f"check {check_id} registered twice")

        def guarded(facts: Facts, topology: Topology) -> Verdict:
            # Unmeasurable anywhere in a check means the whole check is incomplete.
            try:
                return func(facts, topology)
            except Unmeasurable as exc:
                return incomplete(check_id, facts.node, exc.reason)

        CHECKS[check_id] = CheckSpec(check_id, title, fast, guarded)
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


def iter_gpus(facts: Facts) -> Iterator[tuple[str, dict[str, Any] | None, str]]:
    """Yield (subject, gpu facts or None, why-not) for every GPU NVML enumerated.

    A lost GPU yields None with the NVML error, so checks report it as not
    measured rather than inventing values.
    """
    for gpu in facts.gpus():
        subject = f"gpu{gpu.get('index')}"
        if gpu.get("lost"):
            yield subject, None, "NVML_ERROR_GPU_IS_LOST"
        elif "handle" in gpu.get("errors", {}):
            yield subject, None, gpu["errors"]["handle"]
        else:
            yield subject, gpu, ""


def gpu_field(gpu: dict[str, Any], *path: str) -> Any:
    """Nested field of a GPU's facts; Unmeasurable (with NVML's error) if absent."""
    value: Any = gpu
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
        if value is None:
            error = gpu.get("errors", {}).get(path[0]) or next(
                (e for k, e in gpu.get("errors", {}).items() if k.startswith(path[0])), None)
            raise Unmeasurable(f"gpu{gpu.get('index')} {'.'.join(path)}: {error or 'not reported'}")
    return value


def per_gpu(facts: Facts, judge_gpu: Callable[[str, dict[str, Any]], Finding]) -> list[Finding]:
    findings: list[Finding] = []
    for subject, gpu, why in iter_gpus(facts):
        if gpu is None:
            findings.append(unknown(subject, why))
            continue
        try:
            findings.append(judge_gpu(subject, gpu))
        except Unmeasurable as exc:
            findings.append(unknown(subject, exc.reason))
    return findings


def per_hca(facts: Facts, hcas: tuple[Hca, ...], judge_hca: Callable[[Hca, dict[str, Any]], Finding]) -> list[Finding]:
    present = facts.hcas()
    findings: list[Finding] = []
    for hca in hcas:
        data = present.get(hca.name)
        if data is None:
            findings.append(bad(hca.name, "absent", "present"))
            continue
        try:
            findings.append(judge_hca(hca, data))
        except Unmeasurable as exc:
            findings.append(unknown(hca.name, exc.reason))
    return findings


def parse_cpulist(text: str) -> frozenset[int]:
    """``0-3,8,10-11`` → {0,1,2,3,8,10,11}. Raises Unmeasurable on garbage."""
    from burnin.errors import ParseError
    from burnin.parsers._common import expand_cpu_list

    try:
        return frozenset(expand_cpu_list(text))
    except ParseError:
        raise Unmeasurable(f"unreadable cpulist {text!r}") from None
