"""What the Megatron phase stores in a node's facts: the ``megatron`` and ``placement`` sections (pure).

The phase launches (burnin.megatron.commands), hands each launch's results to
:func:`run_record` or :func:`placement_record`, and merges the sections into the
facts; the checks (burnin.checks.workload) judge them. Facts are JSON without NaN
or infinities, so a loss printed as ``NAN`` is kept as the string ``"NAN"``.
The full shapes are documented in docs/megatron.md.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from burnin.errors import ParseError
from burnin.launch.base import NOT_EXECUTABLE_EXIT, NOT_FOUND_EXIT, missing_program
from burnin.megatron import logs
from burnin.megatron.mfu import flops_per_iteration

if TYPE_CHECKING:  # the launch's machinery is not the checks' to import (burnin.checks.workload reads the keys)
    from burnin.megatron.commands import Launch
    from burnin.megatron.config import MegatronSettings

PROBE_MARKER = "BURNIN-PLACEMENT "
FLEET_KEY = "single.tflops_per_gpu"
MEMBERS_KEY = "members_single"
"""In a ``multi`` entry: the median single-node TFLOP/s/GPU of the run's members (``{"median", "count"}``)."""
MIN_FLEET = 3  # a median of fewer nodes says nothing about who is slow


class Outcome(Protocol):
    """What a launch returned on one node (burnin.transport.base.CommandResult fits)."""

    @property
    def argv(self) -> tuple[str, ...]: ...
    @property
    def exit_status(self) -> int | None: ...
    @property
    def stdout(self) -> str: ...
    @property
    def stderr(self) -> str: ...
    @property
    def duration_s(self) -> float: ...
    @property
    def timed_out(self) -> bool: ...
    @property
    def error(self) -> str | None: ...


def _number(value: float | None) -> float | str | None:
    """A parsed float as facts can hold it: finite as is, NaN/inf as printed-style text."""
    if value is None or math.isfinite(value):
        return value
    return "NAN" if math.isnan(value) else ("INF" if value > 0 else "-INF")


def rank_outputs(launch: Launch, results: Mapping[str, Outcome]) -> dict[int, list[str]]:
    """Each rank's lines (and the launchers' under rank -1) from every node's stdout and stderr."""
    parts = []
    for node_rank, node in enumerate(launch.nodes):
        result = results.get(node)
        if result is None:
            continue
        for text in (result.stdout, result.stderr):
            parts.append(logs.split_ranks(text, launch.form, node_rank=node_rank,
                                          ranks_per_node=launch.ranks_per_node))
    return logs.merge(parts)


def rank_log_files(launch: Launch, results: Mapping[str, Outcome]) -> dict[str, str]:
    """``rank-N.log`` (and ``launcher.log``) -> text: every rank's log, for the run's output folder."""
    files = {}
    for rank, lines in sorted(rank_outputs(launch, results).items()):
        name = "launcher.log" if rank == logs.LAUNCHER else f"rank-{rank}.log"
        files[name] = "\n".join(lines) + "\n"
    return files


def _outcome(launch: Launch, results: Mapping[str, Outcome]) -> dict[str, Any]:
    """One exit for the run: the first node's error, any timeout, the worst exit status."""
    from burnin.megatron.commands import TIMED_OUT_EXITS

    missing = [n for n in launch.argv_by_node if n not in results]
    got = [results[n] for n in launch.argv_by_node if n in results]
    errors = [f"{n}: {results[n].error}" for n in launch.argv_by_node if n in results and results[n].error]
    if missing:
        errors.append(f"no result from {', '.join(missing)}")
    # ``timeout`` inside the command stopped it (124, or 137 after SIGKILL) once its limit had passed: a hang
    timed_out = any(r.timed_out or (r.exit_status in TIMED_OUT_EXITS and r.duration_s >= launch.timeout_s)
                    for r in got)
    statuses = [r.exit_status for r in got]
    status: int | None = None
    if statuses and all(s is not None for s in statuses) and not timed_out:
        status = next((s for s in statuses if s != 0), 0)
    return {"exit_status": status, "timed_out": timed_out, "error": "; ".join(errors) or None,
            "duration_s": round(max((r.duration_s for r in got), default=0.0), 3),
            "timeout_s": launch.timeout_s,
            "node_exits": {n: results[n].exit_status for n in launch.argv_by_node if n in results}}


def _chain(launch: Launch, argv: Sequence[str]) -> list[str]:
    """The programs that start the ranks: the wrappers (container runner, ``timeout``, ``env``) and the
    launcher; what comes after torchrun's first option runs as the ranks. Under srun, srun alone."""
    if launch.form == "srun":
        return ["srun"]  # the step starts where burnin runs; what its tasks miss is a rank's line
    end = next((i for i, arg in enumerate(argv) if arg.startswith("--nproc_per_node")), None)
    if end is None:
        return list(argv[:1])
    return [arg for arg in argv[:end] if not arg.startswith("-") and "=" not in arg and not arg.isdigit()]


def missing_launcher(launch: Launch, results: Mapping[str, Outcome]) -> str | None:
    """``torchrun not found: /nonexistent/torchrun`` when a node could not start the launcher (or a wrapper
    before it): it exited 127 (126: not executable), no rank printed a line, and the launcher's own output
    names the program (:func:`burnin.launch.base.missing_program`). None otherwise: a rank that ran and failed
    is the training's failure, not this."""
    for node_rank, (node, argv) in enumerate(launch.argv_by_node.items()):
        result = results.get(node)
        if result is None or result.exit_status not in (NOT_FOUND_EXIT, NOT_EXECUTABLE_EXIT):
            continue
        ranks = logs.merge(logs.split_ranks(text, launch.form, node_rank=node_rank,
                                            ranks_per_node=launch.ranks_per_node)
                           for text in (result.stdout, result.stderr))
        if set(ranks) - {logs.LAUNCHER}:
            continue
        missing = missing_program(result.exit_status, ranks.get(logs.LAUNCHER, []), _chain(launch, argv), node)
        if missing is not None:
            return missing
    return None


def _command(launch: Launch, results: Mapping[str, Outcome]) -> dict[str, list[str]]:
    """What started the run on each node (srun: the step where burnin runs, under the first node)."""
    return {node: list(results[node].argv) if node in results else list(argv)
            for node, argv in launch.argv_by_node.items()}


def _iterations(text: str) -> tuple[list[dict[str, Any]], str | None]:
    from burnin.parsers.megatron import parse_megatron_log

    try:
        parsed = parse_megatron_log(text)
    except ParseError as exc:
        return [], str(exc)
    return [{"iteration": it.iteration, "total": it.total, "elapsed_ms": _number(it.elapsed_ms),
             "tflops_per_gpu": _number(it.tflops_per_gpu), "lm_loss": _number(it.lm_loss),
             "grad_norm": _number(it.grad_norm), "skipped": it.skipped, "nan": it.nan}
            for it in parsed.iterations], None


def run_record(launch: Launch, results: Mapping[str, Outcome], settings: MegatronSettings, *,
               log_dir: str | None = None) -> dict[str, Any]:
    """A training launch's record: exit, iterations parsed from the logging rank, NCCL errors, tails."""
    if launch.kind == "probe" or launch.parallel is None:
        raise ValueError("run_record takes a training launch")
    ranks = rank_outputs(launch, results)
    iterations, parse_error = _iterations(logs.logging_rank_text(ranks))
    parallel = launch.parallel
    record: dict[str, Any] = {
        "kind": launch.kind, "nodes": list(launch.nodes), "form": launch.form, "binding": launch.binding,
        "world_size": launch.world_size, "ranks_per_node": launch.ranks_per_node,
        "tensor": parallel.tensor, "pipeline": parallel.pipeline,
        "data": parallel.data_parallel(launch.world_size),
        "global_batch_size": parallel.batch_for(launch.world_size), "micro_batch_size": parallel.micro_batch_size,
        "train_iters": settings.train_iters, "log_interval": settings.log_interval,
        "warmup_iters": settings.warmup_iters,
        "model": settings.model.model_dump(),
        "flops_per_iteration": flops_per_iteration(settings.model, parallel.batch_for(launch.world_size),
                                                   tensor_parallel=parallel.tensor),
        "command": _command(launch, results),
        **_outcome(launch, results),
        "iterations": iterations,
        "parse_error": parse_error,
        "nccl_errors": [{"rank": e.rank, "line": e.line} for e in logs.nccl_errors(ranks)],
        "tails": {str(rank): lines for rank, lines in logs.tails(ranks).items()},
        "log_dir": log_dir,
        "unavailable": missing_launcher(launch, results),
    }
    return record


# ------------------------------------------------------------------ placement


def _probe_lines(lines: Iterable[str]) -> Iterable[tuple[str, str]]:
    for line in lines:
        at = line.find(PROBE_MARKER)
        if at >= 0:
            yield line, line[at + len(PROBE_MARKER):].strip()


def placement_record(launch: Launch, results: Mapping[str, Outcome]) -> dict[str, Any]:
    """The placement probe's record: one entry per rank that reported, srun's own binding report, problems."""
    from burnin.facts import NonFiniteNumber, loads_facts
    from burnin.parsers.cpubind import parse_cpu_bind

    ranks = rank_outputs(launch, results)
    records: list[dict[str, Any]] = []
    problems: list[str] = []
    for rank in sorted(ranks):
        for line, payload in _probe_lines(ranks[rank]):
            try:
                data = loads_facts(payload)
            except (ValueError, NonFiniteNumber):
                problems.append(f"rank {rank}: unreadable probe line {line.strip()[:160]!r}")
                continue
            if not isinstance(data, dict):
                problems.append(f"rank {rank}: probe line is not an object")
                continue
            if rank != logs.LAUNCHER:
                data.setdefault("rank", rank)
            records.append(data)
    cpu_bind: list[dict[str, Any]] = []
    verbose = "\n".join(line for lines in ranks.values() for line in lines if "bind" in line)
    if "mask" in verbose:
        try:
            report = parse_cpu_bind(verbose)
            cpu_bind = [{"node": t.node, "task": t.task, "local_task": t.local_task, "pid": t.pid,
                         "bind_type": t.bind_type, "cpus": t.cpu_list} for t in report.tasks]
        except ParseError as exc:
            problems.append(str(exc))
    return {"unavailable": missing_launcher(launch, results),
            "form": launch.form, "binding": launch.binding, "nodes": list(launch.nodes),
            "ranks_per_node": launch.ranks_per_node,
            "command": _command(launch, results),
            **_outcome(launch, results), "ranks": records, "cpu_bind": cpu_bind, "problems": problems,
            "tails": {str(rank): lines for rank, lines in logs.tails(ranks).items()}}


# ------------------------------------------------------------------ fleet and groups


def multi_section(group: Sequence[str], record: dict[str, Any] | None, *, applicable: bool = True,
                  reason: str = "", excluded: str | None = None, unavailable: str | None = None) -> dict[str, Any]:
    """A node's ``multi`` entry: its group's run, or why it has none (not applicable, left out, or unmeasured)."""
    section = {"applicable": applicable, "reason": reason, "excluded": excluded, "group": list(group),
               "run": record}
    if unavailable is not None:
        section["unavailable"] = unavailable
    return section


def dumps(section: Mapping[str, Any]) -> str:
    """A section as facts JSON (no NaN: the loss is already text where it was not finite)."""
    return json.dumps(section, allow_nan=False)
