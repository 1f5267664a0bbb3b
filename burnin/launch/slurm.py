"""Launching through Slurm: one allocation, srun steps from where burnin runs, and the one srun argv builder.

- :meth:`SlurmLauncher.hold` sorts the nodes by what Slurm will do with them (:func:`triage`: run a job,
  recheck a node burnin drained, or refuse with the node's state and reason), then allocates the ones it
  can (``salloc --no-shell``, bounded wait; under ``--gate slurm`` the burnin-drained ones inside a
  maintenance reservation, :class:`~burnin.transport.slurm_jobs.Allocation`), or uses the allocation burnin
  runs in. A refused node gets results that say why; the others go on.
- :meth:`~SlurmLauncher.everywhere`: one step over the nodes, one labelled task each, split back per node;
  :meth:`~SlurmLauncher.per_node`: a step per node, every node at once (one node's failure or hang stays its
  own); :meth:`~SlurmLauncher.job`: one step of every rank; :meth:`~SlurmLauncher.collect`: the collector,
  shipped once with ``sbcast`` (unless ``--collector`` names one on the nodes), in one step (a step per node
  when that step reaches none: one node's slurmd gone can fail a whole step).
- Input a command reads on stdin is shipped once per content and redirected from that file; on
  :meth:`~SlurmLauncher.release` what was shipped is removed in a step of its own, then the allocation is
  released (``scancel`` still runs after an interrupt) and rechecked nodes are drained again.

Every client command goes to the launcher's command log.
"""

from __future__ import annotations

import dataclasses
import hashlib
import secrets
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from burnin.launch.base import (
    CLEANUP_TIMEOUT_S,
    SHIP_TIMEOUT_S,
    SLACK_S,
    Each,
    Hold,
    JobForm,
    JobSpec,
    NodeCommand,
    PlanItem,
    Preset,
    Shown,
    SrunOptions,
    fan_out,
    not_started,
    run_guarded,
    with_env,
    with_timeout,
)
from burnin.launch.log import NO_LOG, CommandLog
from burnin.nodes import fold
from burnin.transport.base import CommandResult
from burnin.transport.slurm import PER_NODE_TASK, QUICK_TIMEOUT, collect_command, minutes, sbcast_argv, split_step
from burnin.transport.slurm_jobs import Allocation, SlurmJobs, SlurmNode, job_ended, read_nodes, recheckable

STAGE_DIR = "/tmp"
"""Node-local folder for what is shipped (the collector, a command's input)."""
STDIN_FROM_FILE = 'f=$1; shift; exec "$@" < "$f"'
"""Runs ``"$@"`` with its stdin read from the file ``$1`` (the shipped input)."""
UNKNOWN_JOB_ID = "<allocation>"
"""The job id a dry run shows: the allocation a real run would make first."""
NO_ALLOCATION = "holds no Slurm allocation"


def srun_argv(job_id: str | None, nodes: Sequence[str], command: Sequence[str], *, time_limit_s: float,
              job_name: str, tasks_per_node: int = 1, label: bool = True, kill_on_bad_exit: bool = False,
              overlap: bool = True, options: SrunOptions | None = None) -> list[str]:
    """One job step: ``tasks_per_node`` tasks on each of ``nodes`` (folded), in allocation ``job_id`` (None: the
    one srun runs in), bounded by ``time_limit_s`` (whole minutes, rounded up).

    ``kill_on_bad_exit``: one failed task ends the step (an MPI job); otherwise the others go on (per-node
    tasks). ``overlap``: the step may share the allocation's resources with others (per-node steps, jobs
    in an allocation of burnin's own); ``label``: each output line says its task. ``options``: MPI, GPUs,
    binding, a container and the site's own arguments (last).
    """
    opts = options or SrunOptions()
    argv = ["srun"]
    if job_id is not None:
        argv.append(f"--jobid={job_id}")
    argv += [f"--job-name={job_name}", f"--nodes={len(nodes)}", f"--nodelist={fold(list(nodes))}",
             f"--ntasks={len(nodes) * tasks_per_node}", f"--ntasks-per-node={tasks_per_node}",
             f"--kill-on-bad-exit={1 if kill_on_bad_exit else 0}", f"--time={minutes(time_limit_s)}"]
    if overlap:
        argv.append("--overlap")
    if label:
        argv.append("--label")
    if opts.mpi:
        argv.append(f"--mpi={opts.mpi}")
    if opts.gpus_per_node:
        argv.append(f"--gpus-per-node={opts.gpus_per_node}")
    if opts.gpus_per_task:
        argv.append(f"--gpus-per-task={opts.gpus_per_task}")
    if opts.gpu_bind:
        argv.append(f"--gpu-bind={opts.gpu_bind}")
    if opts.cpu_bind:
        argv.append(f"--cpu-bind={opts.cpu_bind}")
    if opts.distribution:
        argv.append(f"--distribution={opts.distribution}")
    if opts.container is not None:
        argv.append(f"--container-image={opts.container.image}")
        if opts.container.mounts:
            argv.append(f"--container-mounts={','.join(opts.container.mounts)}")
        if opts.container.workdir:
            argv.append(f"--container-workdir={opts.container.workdir}")
        argv += list(opts.container.args)
    return [*argv, *opts.extra, *command]


# ---------------------------------------------------------------- which nodes Slurm will run a job on


@dataclass(frozen=True)
class Triage:
    """The nodes by what Slurm will do with them."""

    usable: list[str]
    recheck: dict[str, str] = field(default_factory=dict)
    """Drained by burnin, measured again inside a reservation (node -> the reason it had)."""
    refused: dict[str, str] = field(default_factory=dict)
    """Node -> why Slurm starts no job there (drained or down by someone else, unknown to Slurm)."""


def refusal(info: SlurmNode, *, rechecking: bool) -> str:
    """Why Slurm starts no job on a node, with how to recheck it when burnin drained it."""
    held = f"Slurm will start no job on {info.name}: State={info.state}"
    if info.reason:
        held += f", Reason={info.reason!r}"
    if info.ours and not rechecking:
        held += "; run with --gate slurm to recheck a node burnin drained"
    return held


def triage(nodes: Sequence[str], jobs: SlurmJobs, *, log: CommandLog = NO_LOG) -> Triage:
    """One ``scontrol show node`` over ``nodes``; when Slurm cannot be read, every node is tried (salloc then
    says what is wrong)."""
    current, error = read_nodes(list(nodes), timeout=QUICK_TIMEOUT, client=jobs.client)
    log.line(f"# node states: {error or 'ok'}")
    if error and not current:
        return Triage(list(nodes))
    usable: list[str] = []
    recheck: dict[str, str] = {}
    refused: dict[str, str] = {}
    for node in nodes:
        info = current.get(node)
        if info is None:
            refused[node] = f"{node} is not a node of this Slurm cluster (scontrol: not found)"
        elif info.schedulable:
            usable.append(node)
        elif jobs.recheck_drained and recheckable(info):
            recheck[node] = info.reason
        else:
            refused[node] = refusal(info, rechecking=jobs.recheck_drained)
    return Triage(usable, recheck, refused)


# ---------------------------------------------------------------- the launcher


class SlurmLauncher:
    """srun steps in one allocation of the nodes held (or the allocation burnin runs in)."""

    def __init__(self, jobs: SlurmJobs, *, preset: Preset = "production", log: CommandLog = NO_LOG,
                 stage_dir: str = STAGE_DIR) -> None:
        self.name = "slurm"
        self.form: JobForm = "srun"
        self.preset: Preset = preset
        self.jobs = jobs
        self._log = log
        self._stage_dir = stage_dir.rstrip("/") or "/"
        self._allocation: Allocation | None = None
        self._releasing = threading.Lock()
        self._label = "job"
        self._refused: dict[str, str] = {}
        self._usable: list[str] = []
        self._purpose = ""
        self._step_failed = False  # some step of the allocation held failed (its end is asked about on release)
        self._ended: dict[str, str] = {}  # node -> why: allocations of this launcher that ended under its steps
        self._measures: tuple[str, ...] = ()  # the held allocation's Hold.measures
        self._ended_measures: dict[str, frozenset[str]] = {}  # node -> what the ended allocations were to measure
        self._end_found: tuple[str, str] | None = None  # (job id, why) once Slurm said the held job ended
        self._shipped: dict[str, str] = {}  # digest -> path on the nodes
        # Job ids are no names: they start again at 1 after slurmctld loses its state, and two clusters (or
        # containers) may share a node's /tmp; another run's clean-up must never remove this run's file.
        self._token = secrets.token_hex(4)
        self._lock = threading.Lock()

    @property
    def job_id(self) -> str | None:
        """The allocation the steps run in (None: none held)."""
        if self._allocation is not None:
            return self._allocation.job_id
        return self.jobs.job_id

    @property
    def job_name(self) -> str:
        """What each step is called: ``burnin-<label>`` of the hold (the allocation adds a token of its own)."""
        return f"burnin-{self._label}"

    # -- holding --------------------------------------------------------------------------

    def hold(self, nodes: Sequence[str], how: Hold, plan: Sequence[PlanItem] = ()) -> str | None:
        if not nodes:
            return None
        return self.hold_triaged(triage(nodes, self.jobs, log=self._log), how)

    def hold_triaged(self, nodes: Triage, how: Hold) -> str | None:
        """Allocate the usable and rechecked nodes of ``nodes`` (sorted by :func:`triage`); why not, on failure."""
        self.release()
        self._label = how.label
        self._purpose = how.purpose
        self._measures = how.measures
        self._end_found = None  # job ids start again at 1 after slurmctld loses its state: asked afresh
        self._refused = dict(nodes.refused)
        self._usable = [*nodes.usable, *nodes.recheck]
        if not self._usable:
            return f"no node of {how.purpose} can run a Slurm job: " + "; ".join(nodes.refused.values())
        import secrets

        allocation = self._allocation = Allocation(
            self.jobs.client, self._usable, name=f"burnin-{how.label}-{secrets.token_hex(4)}", job_id=self.jobs.job_id,
            partition=self.jobs.partition, reservation=self.jobs.reservation, exclusive=how.exclusive,
            tasks_per_node=how.tasks_per_node, drained=nodes.recheck, purpose=how.purpose, run=self._client_run,
            qos=self.jobs.qos, nice=self.jobs.nice)
        failure = allocation.open(time_limit_s=how.time_limit_s, wait_s=how.wait_s, slack_s=SLACK_S)
        if failure is None and how.collects and self.jobs.collector is None:
            try:
                self.ship(_collector_bytes(), "collector.pyz")
            except ShipError as exc:
                failure = f"cannot ship the collector to the nodes of {how.purpose}: {exc}"
        if failure is not None:
            self.note(failure)
        return failure

    def release(self) -> None:
        with self._releasing:  # once, whichever thread gets here first (a worker, or close() after an interrupt)
            allocation, self._allocation = self._allocation, None
            step_failed, self._step_failed = self._step_failed, False
        try:
            if allocation is not None and allocation.job_id:
                if step_failed:  # did it end under the steps (ours, or the one burnin runs in)?
                    self._ask_ended(allocation.job_id)
                self._remove_shipped(allocation.job_id, allocation.name)
        finally:
            self._shipped.clear()
            if allocation is not None:
                allocation.close()

    def close(self) -> None:
        self.release()

    def ended_under(self) -> dict[str, str]:
        """The nodes of every allocation this launcher held that ended under its steps (cancelled, preempted,
        timed out while some step failed), with why: what those steps did not measure is not the nodes' doing."""
        with self._lock:
            return dict(self._ended)

    def ended_measures(self) -> dict[str, frozenset[str]]:
        """For the nodes of :meth:`ended_under`: the facts sections their ended allocations were to fill
        (:attr:`burnin.launch.base.Hold.measures`), whose checks went unmeasured."""
        with self._lock:
            return dict(self._ended_measures)

    def ended(self) -> str | None:
        """Asks Slurm (``scontrol show job``) only when called: callers do once their commands all failed."""
        job_id = self.job_id
        return None if job_id is None else self._ask_ended(job_id)

    def _ask_ended(self, job_id: str) -> str | None:
        """Why ``job_id`` ended (None: it runs, or Slurm could not say), noted once and kept for its nodes
        (:meth:`ended_under`); an ended job stays ended, so Slurm is asked again only while it has not."""
        if self._end_found is not None and self._end_found[0] == job_id:
            return self._end_found[1]
        why = job_ended(self._client_run, job_id)
        if why is None:
            return None
        self._end_found = (job_id, why)
        self.note(f"the allocation ended: {why}")
        with self._lock:
            self._ended.update(dict.fromkeys(self._usable, f"{why} during {self._purpose}" if self._purpose else why))
            for node in self._usable:
                self._ended_measures[node] = self._ended_measures.get(node, frozenset()) | frozenset(self._measures)
        return why

    def _remove_shipped(self, job_id: str, job_name: str) -> None:
        """Remove what this allocation shipped, and what earlier jobs of the run left on its nodes, in a step of
        its own after every other one (nodes sharing a file system must not lose a file another node still
        reads). A job that ended first (preempted, cancelled, timed out) takes no step: its files are kept in
        ``jobs.leftovers`` for the next allocation of those nodes, and noted in the log."""
        leftovers = self.jobs.leftovers
        shipped = sorted(self._shipped.values())
        paths = sorted({*shipped, *leftovers.on(self._usable)})
        if not paths:
            return
        removed = self._client_run(srun_argv(job_id, self._usable, ["rm", "-f", *paths],
                                             time_limit_s=CLEANUP_TIMEOUT_S, job_name=job_name, label=False),
                                   CLEANUP_TIMEOUT_S)
        if removed.ok:
            leftovers.removed(self._usable, paths)
            return
        leftovers.add(self._usable, shipped)
        self.note(f"left on {fold(self._usable)} until a later job of theirs removes it: {' '.join(paths)} "
                  f"(job {job_id} took no clean-up step: {removed.describe_failure()})")

    def note(self, text: str) -> None:
        self._log.line(f"# {text}")

    # -- running --------------------------------------------------------------------------

    def _client_run(self, argv: list[str], timeout: float) -> CommandResult:
        result = run_guarded("", argv, lambda: self.jobs.client.run(argv, timeout=timeout))
        self._log.command("", argv, result)
        if not result.ok and argv[:1] == ["srun"]:
            self._step_failed = True
        return result

    def _why_not(self, node: str) -> str | None:
        """Why nothing can start on ``node`` now (refused by Slurm, or no allocation held)."""
        if node in self._refused:
            return self._refused[node]
        return None if self.job_id is not None else f"the {self.job_name} launcher {NO_ALLOCATION}"

    def per_node(self, commands: Sequence[NodeCommand], *, job: bool = False) -> dict[str, CommandResult]:
        """A step per command (one node each), all at once."""
        results = fan_out(list(commands), self._step, workers=len(commands))
        return {command.node: result for command, result in zip(commands, results, strict=True)}

    def _step(self, command: NodeCommand) -> CommandResult:
        why = self._why_not(command.node)
        argv = with_env(command.argv, command.env)
        if why is None and command.stdin is not None:
            try:
                argv = ["sh", "-c", STDIN_FROM_FILE, "sh", self.ship(command.stdin, "stdin"), *argv]
            except ShipError as exc:
                why = f"cannot ship the command's input to the nodes: {exc}"
        if why is not None:
            return not_started(command.node, command.argv, why)
        step = srun_argv(self.job_id, [command.node], argv, time_limit_s=command.timeout_s + SLACK_S,
                         job_name=self.job_name, label=False, options=SrunOptions(mpi="none"))
        result = self._client_run(step, command.timeout_s + SLACK_S)
        return dataclasses.replace(result, node=command.node, argv=command.argv)

    def everywhere_argv(self, nodes: Sequence[str], argv: Sequence[str], *, timeout_s: float,
                        srun: SrunOptions | None = None) -> list[str]:
        """One step, one labelled task per node, each an independent process (``--mpi=none``)."""
        options = dataclasses.replace(srun or SrunOptions(), mpi="none")
        return srun_argv(self.job_id or UNKNOWN_JOB_ID, nodes, ["sh", "-c", PER_NODE_TASK, "sh", *argv],
                         time_limit_s=timeout_s + SLACK_S, job_name=self.job_name, options=options)

    def everywhere(self, nodes: Sequence[str], argv: Sequence[str], *, timeout_s: float,
                   srun: SrunOptions | None = None) -> dict[str, CommandResult]:
        results = {node: not_started(node, argv, why) for node in nodes if (why := self._why_not(node))}
        running = [node for node in nodes if node not in results]
        if running:
            step = self._client_run(self.everywhere_argv(running, argv, timeout_s=timeout_s, srun=srun),
                                    timeout_s + SLACK_S)
            results.update(split_step(step, running, node_argv=argv, chunked=False))
        return {node: results[node] for node in nodes}

    def job_argv(self, spec: JobSpec) -> list[str]:
        """One step of every rank: ``ranks_per_node`` tasks on each node, one failure ends them all."""
        program = with_env(with_timeout(spec.program, spec.timeout_s) if spec.time_limit else spec.program, spec.env)
        return srun_argv(self.job_id or UNKNOWN_JOB_ID, spec.nodes, program,
                         time_limit_s=spec.timeout_s + spec.slack_s, job_name=self.job_name,
                         tasks_per_node=spec.ranks_per_node, label=spec.label, kill_on_bad_exit=True,
                         options=spec.srun)

    def job(self, spec: JobSpec) -> CommandResult:
        first = spec.nodes[0]
        why = next((w for node in spec.nodes if (w := self._why_not(node))), None)
        argv = self.job_argv(spec)
        if why is not None:
            return not_started(first, argv, why)
        result = self._client_run(argv, spec.timeout_s + 2 * spec.slack_s)
        return dataclasses.replace(result, node=first)

    def collect(self, nodes: Sequence[str], args: Sequence[str], *, timeout_s: float,
                on_done: Callable[[str, CommandResult], None] | None = None) -> dict[str, CommandResult]:
        """The collector in one step over the nodes (shipped first unless it is on the nodes already)."""
        results = {node: not_started(node, ("srun",), why) for node in nodes if (why := self._why_not(node))}
        running = [node for node in nodes if node not in results]
        if running:
            path = self.jobs.collector
            failure = None
            if path is None:
                try:
                    path = self.ship(_collector_bytes(), "collector.pyz")
                except ShipError as exc:
                    failure = f"sbcast of the collector failed: {exc}"
            if failure is not None or path is None:
                results.update({node: not_started(node, ("sbcast",), failure or "") for node in running})
            else:
                collected = self._collect_step(running, path, args, timeout_s)
                if len(running) > 1 and not any(r.ok for r in collected.values()):
                    # one node's slurmd gone can fail a whole step: each node in a step of its own
                    alone = fan_out(running, lambda node: self._collect_step([node], path, args, timeout_s)[node],
                                    workers=len(running))
                    collected = dict(zip(running, alone, strict=True))
                results.update(collected)
        ordered = {node: results[node] for node in nodes}
        if on_done is not None:
            for node, result in ordered.items():
                on_done(node, result)
        return ordered

    def _collect_step(self, nodes: list[str], path: str, args: Sequence[str],
                      timeout_s: float) -> dict[str, CommandResult]:
        step = self._client_run(srun_argv(self.job_id, nodes, collect_command(path, args, timeout_s),
                                          time_limit_s=timeout_s + 2 * SLACK_S, job_name=self.job_name),
                                timeout_s + SLACK_S)
        return split_step(step, nodes, node_timeout_s=timeout_s, node_argv=["python3", path, *args])

    # -- shipping -------------------------------------------------------------------------

    def ship(self, data: bytes, name: str) -> str:
        """``data`` as a file on every allocated node, once per content; its path there (ShipError: sbcast
        failed). Removed on :meth:`release`."""
        job_id = self.job_id
        if job_id is None:
            raise ShipError(f"the launcher {NO_ALLOCATION}")
        digest = hashlib.sha256(data).hexdigest()[:16]
        with self._lock:
            known = self._shipped.get(digest)
            if known is not None:
                return known
            dest = f"{self._stage_dir}/burnin-{self._label}-{job_id}-{self._token}-{digest}-{name}"
            # the local copy lives only while sbcast reads it: a controller killed later leaves nothing behind
            with tempfile.TemporaryDirectory(prefix="burnin-ship-") as scratch:
                local = Path(scratch) / digest
                local.write_bytes(data)
                shipped = self._client_run(sbcast_argv(job_id, str(local), dest, timeout_s=SHIP_TIMEOUT_S / 2),
                                           SHIP_TIMEOUT_S)
            if not shipped.ok:
                raise ShipError(shipped.describe_failure())
            self._shipped[digest] = dest
            return dest

    # -- what would start -----------------------------------------------------------------

    def describe(self, item: PlanItem) -> list[Shown]:
        if isinstance(item, Each):
            return [("", self.everywhere_argv(item.nodes, item.argv, timeout_s=item.timeout_s, srun=item.srun))]
        if isinstance(item, NodeCommand):
            return [("", srun_argv(self.job_id or UNKNOWN_JOB_ID, [item.node], with_env(item.argv, item.env),
                                   time_limit_s=item.timeout_s + SLACK_S, job_name=self.job_name, label=False,
                                   options=SrunOptions(mpi="none")))]
        if isinstance(item, JobSpec):
            return [("", self.job_argv(item))]
        return []

    def describe_hold(self, nodes: Sequence[str], how: Hold) -> str | None:
        if self._allocation is None:
            self._label = how.label  # the steps shown below carry the hold's name
        whole = "an exclusive" if how.exclusive else "a"
        return (f"{whole} Slurm allocation of {fold(list(nodes))} (or the one burnin runs in); "
                "every step below runs in it")


class ShipError(Exception):
    """sbcast could not put a file on the nodes."""


def _collector_bytes() -> bytes:
    from burnin.transport.payload import collector_zipapp

    return collector_zipapp()
