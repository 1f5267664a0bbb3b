"""A stage's outputs on one node, read into a :class:`ChunkRecord` (pure).

Per stage:

- ``dcgm``: ``dcgmi diag -j``; every test not ``Pass``/``Skip`` is a failure (BRN-01: a ``Warn`` is
  investigated, never admitted silently);
- ``gpu``: gpu_burn's progress lines become one point per GPU and tenth of the run (Gflop/s, the
  tenth's time within the stage); compare errors, a dead worker or ``FAULTY`` are failures;
- ``nccl``: the largest message's busbw (GB/s), one point at the stage's end; ``#wrong`` is a failure;
- ``cpu``: stress-ng's failures (``--verify``), STREAM triad per socket (GB/s), a failed validation;
- ``disk``: ``nvme smart-log``: critical_warning non-zero or media errors are failures.

A step that did not run or whose output cannot be read is an ``error``: the
stage could not be measured on that node (incomplete), not a failure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from burnin.errors import ParseError
from burnin.soak.plan import Chunk
from burnin.text import printable
from burnin.transport.base import CommandResult


@dataclass(frozen=True, slots=True)
class ChunkRecord:
    node: str
    stage: str
    start: float
    end: float
    attempt: int
    errors: tuple[str, ...] = ()  # steps that could not be run or read (incomplete)
    failures: tuple[str, ...] = ()  # what the stage found wrong (fail)
    series: dict[str, list[tuple[float, float]]] = field(default_factory=dict)  # name -> (t, value)
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ChunkRecord:
        return cls(node=data["node"], stage=data["stage"], start=float(data["start"]), end=float(data["end"]),
                   attempt=int(data["attempt"]), errors=tuple(data.get("errors", ())),
                   failures=tuple(data.get("failures", ())),
                   series={k: [(float(t), float(v)) for t, v in pts] for k, pts in data.get("series", {}).items()},
                   details=dict(data.get("details", {})))


def _failed_run(result: CommandResult) -> str | None:
    if result.error or result.timed_out or result.exit_status is None:
        return result.describe_failure()
    if result.exit_status == 127 or "command not found" in result.stderr:
        return f"{result.argv[0] if result.argv else 'command'} not found on the node: {printable(result.tail(1))}"
    return None


def _dcgm(result: CommandResult) -> tuple[list[str], list[str], dict[str, Any]]:
    from burnin.parsers.dcgmi import parse_dcgmi_diag

    why = _failed_run(result)
    if why:
        return [f"dcgmi: {why}"], [], {}
    try:
        diag = parse_dcgmi_diag(result.stdout)
    except ParseError as exc:
        return [f"dcgmi output unreadable: {exc}"], [], {}
    failures = []
    for test in diag.tests:
        if test.result not in ("Pass", "Skip"):
            gpus = ",".join(str(g) for g in test.gpu_results.get(test.result, ()))
            detail = "; ".join(d.text for d in test.details)[:200]
            failures.append(f"dcgmi {test.name}: {test.result}" + (f" on GPU {gpus}" if gpus else "")
                            + (f" ({detail})" if detail else ""))
    failures += [f"dcgmi error: {e}" for e in diag.errors]
    if not diag.tests and not failures:
        return ["dcgmi printed no test result"], [], {}
    return [], failures, {"tests": len(diag.tests), "version": diag.metadata.get("version")}


def _gpu(result: CommandResult, start: float, end: float, gpu_names: Sequence[str]
         ) -> tuple[list[str], list[str], dict[str, list[tuple[float, float]]]]:
    from burnin.parsers.gpu_burn import parse_gpu_burn

    why = _failed_run(result)
    if why:
        return [f"gpu stress: {why}"], [], {}
    try:
        report = parse_gpu_burn(result.stdout)
    except ParseError as exc:
        return [f"gpu stress output unreadable: {exc}"], [], {}

    def name(k: int) -> str:
        return gpu_names[k] if k < len(gpu_names) else f"gpu{k}"

    series: dict[str, list[tuple[float, float]]] = {}
    for line in report.progress:
        t = start + (end - start) * min(100.0, line.percent) / 100.0
        for k, rate in enumerate(line.gflops):
            if line.processed[k] >= 0 and line.faults[k] != "DIED":
                series.setdefault(name(k), []).append((t, rate))
    failures: list[str] = []
    if report.progress:
        last = report.progress[-1]
        failures += [f"{name(k)} {count} compare errors" for k, count in enumerate(last.errors) if count]
        failures += [f"{name(k)} stress worker died" for k, fault in enumerate(last.faults) if fault == "DIED"]
    failures += [f"{name(k)} FAULTY" for k, verdict in sorted(report.verdicts.items()) if verdict == "FAULTY"]
    errors: list[str] = []
    if report.aborted:
        failures.append("gpu stress aborted: no worker alive")
    elif not report.finished:
        errors.append(f"gpu stress ended before its summary: {printable(result.tail(1))}")
    expected = len(gpu_names)
    if expected and report.progress and len(report.progress[-1].gflops) < expected:
        failures.append(f"gpu stress ran on {len(report.progress[-1].gflops)} of {expected} GPUs")
    return list(dict.fromkeys(errors)), list(dict.fromkeys(failures)), series


def _nccl(result: CommandResult, end: float) -> tuple[list[str], list[str], dict[str, list[tuple[float, float]]]]:
    from burnin.parsers.nccl_tests import parse_nccl_tests

    why = _failed_run(result)
    if why or result.exit_status != 0:
        return [f"all_reduce_perf: {why or result.describe_failure()}"], [], {}
    try:
        run = parse_nccl_tests(result.stdout, "all_reduce")
    except ParseError as exc:
        return [f"all_reduce_perf output unreadable: {exc}"], [], {}
    if not run.rows:
        return ["all_reduce_perf printed no result row"], [], {}
    row = max(run.rows, key=lambda r: r.size_bytes)
    wrong = [m.wrong for m in (row.out_of_place, row.in_place) if isinstance(m.wrong, int) and m.wrong > 0]
    failures = [f"all_reduce #wrong {wrong[0]} at {row.size_bytes} B"] if wrong else []
    busbw = [m.busbw_gbps for m in (row.out_of_place, row.in_place) if m.busbw_gbps is not None]
    if not busbw:
        return ["all_reduce_perf printed no busbw"], failures, {}
    return [], failures, {"busbw": [(end, max(busbw))]}


def _cpu(steps: Sequence[tuple[str, CommandResult]], end: float
         ) -> tuple[list[str], list[str], dict[str, list[tuple[float, float]]]]:
    from burnin.parsers.stream import parse_stream, parse_stress_ng

    errors: list[str] = []
    failures: list[str] = []
    series: dict[str, list[tuple[float, float]]] = {}
    for name, result in steps:
        why = _failed_run(result)
        if why:
            errors.append(f"{name}: {why}")
            continue
        try:
            if name == "stress-ng":
                report = parse_stress_ng(result.stdout + "\n" + result.stderr)
                if report.ok is False:
                    failures += [f"stress-ng: {f}" for f in report.failures] or ["stress-ng: unsuccessful run"]
                elif report.ok is None:
                    errors.append("stress-ng printed no outcome")
            else:
                stream = parse_stream(result.stdout)
                if stream.validates is False:
                    failures.append(f"{name}: STREAM failed validation")
                if stream.triad_gbs is None:
                    errors.append(f"{name}: no Triad row")
                else:
                    series[name] = [(end, stream.triad_gbs)]
        except ParseError as exc:
            errors.append(f"{name} output unreadable: {exc}")
    return errors, failures, series


def _disk(steps: Sequence[tuple[str, CommandResult]]) -> tuple[list[str], list[str], dict[str, Any]]:
    from burnin.parsers.nvme import parse_smart_log

    errors: list[str] = []
    failures: list[str] = []
    details: dict[str, Any] = {}
    for name, result in steps:
        device = name.removeprefix("smart-log ")
        why = _failed_run(result)
        if why:
            errors.append(f"nvme smart-log {device}: {why}")
            continue
        try:
            smart = parse_smart_log(result.stdout)
        except ParseError as exc:
            errors.append(f"nvme smart-log {device} unreadable: {exc}")
            continue
        if smart.critical_warning is None or smart.media_errors is None:
            errors.append(f"{device}: critical_warning or media_errors not reported")
            continue
        if smart.critical_warning:
            failures.append(f"{device} critical_warning 0x{smart.critical_warning:x}")
        if smart.media_errors:
            failures.append(f"{device} {smart.media_errors} media errors")
        details[device] = {"critical_warning": smart.critical_warning, "media_errors": smart.media_errors}
    return errors, failures, details


def read_chunk(chunk: Chunk, node: str, steps: Sequence[tuple[str, CommandResult]], *, start: float, end: float,
               attempt: int, gpu_names: Sequence[str]) -> ChunkRecord:
    """What one node's run of ``chunk`` measured."""
    series: dict[str, list[tuple[float, float]]] = {}
    details: dict[str, Any] = {}
    if chunk.stage == "dcgm":
        errors, failures, details = _dcgm(steps[0][1])
    elif chunk.stage == "gpu":
        errors, failures, series = _gpu(steps[0][1], start, end, gpu_names)
    elif chunk.stage == "nccl":
        errors, failures, series = _nccl(steps[0][1], end)
    elif chunk.stage == "cpu":
        errors, failures, series = _cpu(steps, end)
    else:
        errors, failures, details = _disk(steps)
    return ChunkRecord(node, chunk.stage, start, end, attempt, tuple(printable(e) for e in errors),
                       tuple(printable(f) for f in failures), series, details)
