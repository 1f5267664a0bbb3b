"""The Megatron phase: the placement probe and the training runs, launched the way the nodes are reached.

Order (:func:`burnin.megatron.measure.measure`): the placement probe on every
node, the single-node run on every node, then one multi-node run of the nodes
that passed alone. Through Slurm every run is an ``srun`` step started where
burnin runs, in one exclusive allocation of the nodes (or the allocation burnin
runs in; burnin-drained nodes are rechecked as the collector step does);
otherwise each node runs its ``torchrun`` command through the dispatcher's
transport, all nodes of a run at once. Every launch is bounded by its timeout.

Each node's facts get a ``megatron`` and a ``placement`` section; every rank's
log goes under ``OUT/megatron/``; every command to ``OUT/megatron-commands.log``.
With ``--dry-run`` the commands are printed and nothing is launched (every
MEG/PIN check is then incomplete, saying so).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from burnin.dispatch.base import JobLauncher, launcher_of
from burnin.errors import UsageError
from burnin.facts import Facts
from burnin.megatron.commands import Launch, plan, slack
from burnin.megatron.config import MegatronSettings, load_megatron_settings
from burnin.megatron.measure import Measurement, RunAll, measure, transport_runner, unavailable
from burnin.megatron.record import Outcome
from burnin.topology.model import Topology
from burnin.transport.base import CommandResult
from burnin.transport.slurm import SlurmRunner
from burnin.transport.slurm_jobs import SlurmJobs

LOG_FILE = "megatron-commands.log"
ALLOC_WAIT_S = 60.0
MAX_SRUN = 256  # srun processes in flight at once


@dataclass(frozen=True, slots=True)
class MegatronOptions:
    """What ``burnin run`` passes in: the site config file (``--megatron-config``)."""

    config: Path | None = None


class _CommandLog:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def line(self, text: str) -> None:
        with self._lock:
            try:
                with self.path.open("a", encoding="utf-8") as handle:
                    handle.write(f"{time.strftime('%H:%M:%S')} {text}\n")
            except OSError:
                pass  # the log is an aid; the run goes on

    def result(self, node: str, argv: Sequence[str], result: Outcome) -> None:
        status = "timed out" if result.timed_out else result.error or f"exit {result.exit_status}"
        self.line(f"$ [{node}] {' '.join(argv)[:2000]}\n  -> {status} in {result.duration_s:.2f} s")


def run_megatron_phase(dispatcher: object, facts: dict[str, Facts], *, topology: Topology, out_dir: Path,
                       options: MegatronOptions, dry_run: bool = False,
                       say: Callable[[str], None] = print) -> Measurement:
    """Measure (or, with ``dry_run``, print the commands), merge each node's sections, write the logs."""
    nodes = [node for node, node_facts in facts.items() if not node_facts.unreachable]
    jobs = launcher_of(dispatcher, facts)
    settings = load_megatron_settings(options.config, simulated=jobs.preset == "simulated")
    form = settings.launcher_for(slurm=jobs.slurm is not None)
    if form == "srun" and jobs.slurm is None:
        raise UsageError("megatron setting launcher: srun needs --via slurm")
    if form == "torchrun" and jobs.transport is None:
        raise UsageError(f"megatron setting launcher: torchrun needs a transport to the nodes, which "
                         f"{jobs.name} dispatch does not offer (use launcher: srun)")
    if form == "torchrun" and settings.container is not None and settings.container.runner == "pyxis":
        raise UsageError("megatron setting container.runner: pyxis runs a container only through srun "
                         "(--via slurm); with torchrun use runner: docker or apptainer")
    log = _CommandLog(out_dir / LOG_FILE)
    if not nodes:
        result = Measurement()
    elif dry_run:  # the one seam: the launches are printed where they would be run
        from burnin.phases import DRY_RUN_REASON

        job_id = jobs.slurm.job_id if jobs.slurm is not None else None
        for launch in plan(settings, topology, nodes, form=form, job_id=job_id):
            say(f"# {launch.label}\n{launch.display()}")
        result = unavailable(nodes, DRY_RUN_REASON)
    elif jobs.slurm is not None and form == "srun":
        result = _over_slurm(settings, topology, nodes, jobs.slurm, log)
    else:
        result = measure(settings, topology, nodes, _logged(_transport_runner(jobs), log), form=form)
    for node in nodes:
        facts[node].data.update(result.facts_for(node))
    write_logs(out_dir, result.logs)
    return result


def _transport_runner(jobs: JobLauncher) -> RunAll:
    assert jobs.transport is not None
    return transport_runner(jobs.transport, extra_env=lambda launch: jobs.job_env(launch.nodes))


def _over_slurm(settings: MegatronSettings, topology: Topology, nodes: list[str], jobs: SlurmJobs,
                log: _CommandLog) -> Measurement:
    """Every run an srun step in one allocation of the nodes (or the allocation burnin runs in)."""
    def run(argv: list[str], timeout: float) -> CommandResult:
        result = jobs.client.run(argv, timeout=timeout)
        log.result("slurm", argv, result)
        return result

    allocation = jobs.allocation(nodes, label="megatron", purpose="the megatron phase", run=run)
    try:
        failure = allocation.open(time_limit_s=_time_limit(settings), wait_s=min(ALLOC_WAIT_S, settings.timeout_s),
                                  slack_s=slack(settings.timeout_s))
        if failure:
            log.line(f"# {failure}")
            return unavailable(nodes, failure)
        return measure(settings, topology, nodes, _logged(srun_runner(jobs.client), log), form="srun",
                       job_id=allocation.job_id)
    finally:
        allocation.close()


def _time_limit(settings: MegatronSettings) -> float:
    """The probe, the single-node runs and the multi-node run one after the other, each with its slack."""
    runs = 2 if settings.multi_node_run else 1
    return (settings.probe_timeout_s + slack(settings.probe_timeout_s)
            + runs * (settings.timeout_s + slack(settings.timeout_s)) + 120.0)


def srun_runner(client: SlurmRunner) -> RunAll:
    """``run_all`` under Slurm: each launch's srun argv run where burnin runs, all launches of a batch at once."""
    def run_all(launches: Sequence[Launch]) -> list[Mapping[str, Outcome]]:
        if not launches:
            return []
        with ThreadPoolExecutor(max_workers=min(len(launches), MAX_SRUN)) as pool:
            futures = [pool.submit(_srun, client, launch) for launch in launches]
        return [future.result() for future in futures]

    return run_all


def _srun(client: SlurmRunner, launch: Launch) -> dict[str, Outcome]:
    node = launch.nodes[0]
    argv = launch.argv_by_node[node]
    try:
        result = client.run(list(argv), timeout=launch.timeout_s + slack(launch.timeout_s))
    except Exception as exc:  # noqa: BLE001 - one launch's failure must not stop the others
        return {node: CommandResult(node, tuple(argv), None, "", "", 0.0, error=f"{type(exc).__name__}: {exc}")}
    return {node: CommandResult(node, tuple(argv), result.exit_status, result.stdout, result.stderr,
                                result.duration_s, timed_out=result.timed_out, error=result.error)}


def _logged(run_all: RunAll, log: _CommandLog) -> RunAll:
    def logged(launches: Sequence[Launch]) -> list[Mapping[str, Outcome]]:
        results = run_all(launches)
        for launch, by_node in zip(launches, results, strict=True):
            for node, result in by_node.items():
                log.result(node, launch.argv_by_node.get(node, ()), result)
        return results

    return logged


def write_logs(out_dir: Path, logs: Mapping[str, str]) -> None:
    """Every rank's log (``relative path -> text``) under ``out_dir``; a path leaving it is skipped."""
    root = out_dir.resolve()
    for relative, text in logs.items():
        path = (out_dir / relative).resolve()
        if not path.is_relative_to(root):
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
