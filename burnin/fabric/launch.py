"""Launchers: run the fabric phase's commands through the dispatcher's job launcher.

Nothing here starts a process: :class:`TransportLauncher` calls a
:class:`~burnin.transport.base.Transport` (local, simulated, ssh) and
:class:`SlurmLauncher` calls Slurm's client commands in an allocation of
Slurm's job layer (:mod:`burnin.transport.slurm_jobs`).

- per-node runs: every node at once (single-node nccl-tests, nvbandwidth);
- jobs: one multi-node nccl-tests run, ``srun --mpi=...`` under Slurm,
  ``mpirun --host ...`` from the first node otherwise. On a simulated rack a
  job is one local process running as the group's first node with the
  dispatcher's job environment naming its members (the shims model the group).

``--dry-run`` wraps either launcher in :class:`DryRunLauncher`: the one place
the phase asks to run becomes the place each command is printed instead.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Literal, Protocol

from burnin.dispatch.sim import SIM_JOB_ENV, sim_job_env
from burnin.fabric import commands
from burnin.fabric.settings import FabricSettings
from burnin.nodes import fold
from burnin.topology.model import Topology
from burnin.transport.base import CommandResult, Transport
from burnin.transport.slurm import SlurmRunner, split_step
from burnin.transport.slurm_jobs import Allocation, SlurmJobs

__all__ = ["SIM_JOB_ENV", "DryRunLauncher", "Launcher", "OnCommand", "SlurmLauncher", "TransportLauncher",
           "split_per_node"]

SLACK_S = 30.0  # beyond a launch's own `timeout`: start-up, srun, output transfer
ALLOC_WAIT_S = 60.0
JobEnv = Callable[[Sequence[str]], Mapping[str, str]]

OnCommand = Callable[[Sequence[str], CommandResult], None]
Shown = tuple[str, list[str]]
"""Where a command starts (``[node,...]``: on each of those nodes; ``""``: where burnin runs) and its argv."""
UNKNOWN_JOB_ID = "<allocation>"
"""The job id a dry run shows in srun's ``--jobid``: the allocation a real run would make first."""


def _ignore(argv: Sequence[str], result: CommandResult) -> None:
    """No command log."""


class Launcher(Protocol):
    name: str

    def open(self, nodes: Sequence[str]) -> str | None:
        """Get ready to run on ``nodes`` (e.g. allocate them); a reason when that failed."""

    def per_node(self, nodes: Sequence[str], command: Sequence[str], *, timeout: float) -> dict[str, CommandResult]:
        """Run ``command`` on every node, all at once."""

    def job(self, nodes: Sequence[str], collective: str, *, ib_hca: str | None, timeout: float,
            evidence: commands.NcclEvidence | None = None) -> CommandResult:
        """One multi-node nccl-tests run over ``nodes``: the job's output (rank 0's table; with ``evidence``,
        every rank's NCCL INFO lines too)."""

    def pause(self) -> None:
        """Let the dispatcher reach the nodes itself for a while (NVL-04 gathers NVML again between the
        single-node and the multi-node runs): an allocation of the launcher's own is given back."""

    def resume(self, nodes: Sequence[str]) -> str | None:
        """Take the nodes again after :meth:`pause`; a reason when that failed."""

    def close(self) -> None: ...


class TransportLauncher:
    """Per-node runs through any transport; jobs as a simulated job or with mpirun."""

    def __init__(self, transport: Transport, topology: Topology, settings: FabricSettings,
                 mode: Literal["sim", "mpirun"], *, fanout: int = 32,
                 on_command: OnCommand | None = None, job_env: JobEnv | None = None) -> None:
        """``mode`` sim: a job is one process on its first node, with ``job_env`` (default: the simulated
        rack's) naming the members; mpirun: ``mpirun`` from the first node."""
        self.name = f"{transport.name}+{mode}"
        self._job_env = job_env or sim_job_env
        self._on_command = on_command or _ignore
        self._transport = transport
        self._topology = topology
        self._settings = settings
        self._mode = mode
        self._fanout = fanout

    def open(self, nodes: Sequence[str]) -> str | None:
        return None

    def per_node(self, nodes: Sequence[str], command: Sequence[str], *, timeout: float) -> dict[str, CommandResult]:
        if not nodes:
            return {}
        with ThreadPoolExecutor(max_workers=max(1, min(self._fanout, len(nodes)))) as pool:
            futures = {node: pool.submit(self._transport.run, node, list(command), timeout=timeout + SLACK_S)
                       for node in nodes}
        results = {node: _result_or_error(node, command, future.result) for node, future in futures.items()}
        for node, result in results.items():
            self._on_command([f"[{node}]", *command], result)
        return results

    def per_node_argv(self, nodes: Sequence[str], command: Sequence[str], *, timeout: float) -> Shown:
        """What :meth:`per_node` starts: ``command`` itself on each node."""
        return f"[{fold(nodes)}]", list(command)

    def job_argv(self, nodes: Sequence[str], collective: str, *, ib_hca: str | None, timeout: float,
                 evidence: commands.NcclEvidence | None = None) -> Shown:
        """What :meth:`job` starts on the group's first node."""
        if self._mode == "sim":
            argv = commands.rank_command(self._topology, self._settings, collective, ib_hca=ib_hca,
                                         extra_env=self._job_env(nodes), evidence=evidence, timeout_s=timeout)
        else:
            argv = commands.mpirun_argv(nodes, self._topology, self._settings, collective, ib_hca=ib_hca,
                                        evidence=evidence, timeout_s=timeout)
        return f"[{nodes[0]}]", argv

    def job(self, nodes: Sequence[str], collective: str, *, ib_hca: str | None, timeout: float,
            evidence: commands.NcclEvidence | None = None) -> CommandResult:
        _, argv = self.job_argv(nodes, collective, ib_hca=ib_hca, timeout=timeout, evidence=evidence)
        result = _result_or_error(nodes[0], argv, lambda: self._transport.run(nodes[0], argv,
                                                                            timeout=timeout + SLACK_S))
        self._on_command([f"[{nodes[0]}]", *argv], result)
        return result

    def pause(self) -> None:
        """Nothing is held: the dispatcher's transport reaches the nodes all along."""

    def resume(self, nodes: Sequence[str]) -> str | None:
        return None

    def close(self) -> None:
        """The transport belongs to the dispatcher, which closes it."""


class SlurmLauncher:
    """srun steps inside one exclusive allocation of the nodes (or the allocation we run in).

    With ``recheck_drained`` (``--gate slurm``, not ``--dry-run``) nodes burnin
    drained are measured too: one maintenance reservation over all the nodes,
    the drained ones resumed inside it, the allocation made in it; on close they
    are drained again with their old reason and the reservation is deleted
    (:class:`burnin.transport.slurm_jobs.Allocation`). Nodes drained by anyone else are not touched.
    """

    name = "slurm"

    def __init__(self, client: SlurmRunner, topology: Topology, settings: FabricSettings, *,
                 job_id: str | None = None, partition: str | None = None,
                 reservation: str | None = None, recheck_drained: bool = False,
                 on_command: OnCommand | None = None) -> None:
        self._client = client
        self._topology = topology
        self._settings = settings
        self._jobs = SlurmJobs(client, job_id=job_id, partition=partition, reservation=reservation,
                               recheck_drained=recheck_drained)
        self._job_id = job_id
        self._allocation: Allocation | None = None
        self._paused = False
        self._name = "burnin-fabric"
        self._on_command = on_command or _ignore

    @classmethod
    def over(cls, jobs: SlurmJobs, topology: Topology, settings: FabricSettings, *,
             on_command: OnCommand | None = None) -> SlurmLauncher:
        """The launcher for a dispatcher's Slurm access."""
        return cls(jobs.client, topology, settings, job_id=jobs.job_id, partition=jobs.partition,
                   reservation=jobs.reservation, recheck_drained=jobs.recheck_drained, on_command=on_command)

    def open(self, nodes: Sequence[str]) -> str | None:
        if self._job_id is not None or not nodes:
            return None
        allocation = self._allocation = self._jobs.allocation(nodes, label="fabric", purpose="the fabric phase",
                                                              run=self._run)
        self._name = allocation.name
        failure = allocation.open(time_limit_s=self._time_limit(), wait_s=min(ALLOC_WAIT_S, self._settings.timeout_s),
                                  slack_s=SLACK_S)
        self._job_id = allocation.job_id
        return failure

    def _time_limit(self) -> float:
        # single-node runs per collective, nvbandwidth, the group, localisation and rail rounds
        return 40 * (self._settings.timeout_s + SLACK_S)

    def per_node_argv(self, nodes: Sequence[str], command: Sequence[str], *, timeout: float) -> Shown:
        """What :meth:`per_node` starts where burnin runs: one srun step over the nodes."""
        return "", commands.srun_per_node_argv(self._job_id or UNKNOWN_JOB_ID, nodes, command, self._settings,
                                               time_limit_s=timeout + SLACK_S, job_name=self._name)

    def job_argv(self, nodes: Sequence[str], collective: str, *, ib_hca: str | None, timeout: float,
                 evidence: commands.NcclEvidence | None = None) -> Shown:
        """What :meth:`job` starts where burnin runs: one srun step of every rank."""
        command = commands.rank_command(self._topology, self._settings, collective, ib_hca=ib_hca,
                                        evidence=evidence, timeout_s=timeout)
        return "", commands.srun_job_argv(self._job_id or UNKNOWN_JOB_ID, nodes, command, self._settings,
                                          time_limit_s=timeout + SLACK_S, job_name=self._name)

    def per_node(self, nodes: Sequence[str], command: Sequence[str], *, timeout: float) -> dict[str, CommandResult]:
        if not nodes:
            return {}
        assert self._job_id is not None
        _, argv = self.per_node_argv(nodes, command, timeout=timeout)
        return split_per_node(self._run(argv, timeout + 2 * SLACK_S), nodes, command)

    def job(self, nodes: Sequence[str], collective: str, *, ib_hca: str | None, timeout: float,
            evidence: commands.NcclEvidence | None = None) -> CommandResult:
        assert self._job_id is not None
        _, argv = self.job_argv(nodes, collective, ib_hca=ib_hca, timeout=timeout, evidence=evidence)
        result = self._run(argv, timeout + 2 * SLACK_S)
        return CommandResult(nodes[0], tuple(argv), result.exit_status, result.stdout, result.stderr,
                             result.duration_s, timed_out=result.timed_out, error=result.error)

    def pause(self) -> None:
        """An allocation of our own is released (it is exclusive: the dispatcher's own steps would wait for
        it); inside the allocation burnin runs in, nothing changes."""
        if self._allocation is not None:
            self.close()
            self._paused = True

    def resume(self, nodes: Sequence[str]) -> str | None:
        """Allocate the nodes again after :meth:`pause` (waiting as long as the first time)."""
        if not self._paused:
            return None
        self._paused = False
        return self.open(nodes)

    def close(self) -> None:
        if self._allocation is not None:
            self._allocation.close()
            self._allocation = None
            self._job_id = self._jobs.job_id

    def _run(self, argv: list[str], timeout: float) -> CommandResult:
        result = self._client.run(argv, timeout=timeout)
        self._on_command(argv, result)
        return result


class DryRunLauncher:
    """``--dry-run``: prints each command ``inner`` would start and starts none, not even an allocation.

    Every result is a command that did not run (its error is ``reason``), so nothing is measured from it.
    """

    def __init__(self, inner: TransportLauncher | SlurmLauncher, say: Callable[[str], None], reason: str) -> None:
        self.name = inner.name
        self._inner = inner
        self._say = say
        self._reason = reason

    def open(self, nodes: Sequence[str]) -> str | None:
        if isinstance(self._inner, SlurmLauncher) and nodes:
            self._say(f"# an exclusive Slurm allocation of {fold(nodes)} (or the one burnin runs in); "
                      f"every step below runs in it")
        return None

    def per_node(self, nodes: Sequence[str], command: Sequence[str], *, timeout: float) -> dict[str, CommandResult]:
        if not nodes:
            return {}
        self._show(*self._inner.per_node_argv(nodes, command, timeout=timeout))
        return {node: self._not_run(node, command) for node in nodes}

    def job(self, nodes: Sequence[str], collective: str, *, ib_hca: str | None, timeout: float,
            evidence: commands.NcclEvidence | None = None) -> CommandResult:
        where, argv = self._inner.job_argv(nodes, collective, ib_hca=ib_hca, timeout=timeout, evidence=evidence)
        self._show(where, argv)
        return self._not_run(nodes[0], argv)

    def pause(self) -> None:
        """Nothing is held."""

    def resume(self, nodes: Sequence[str]) -> str | None:
        return None

    def close(self) -> None:
        """Nothing was opened."""

    def _show(self, where: str, argv: Sequence[str]) -> None:
        self._say(f"{where} {shlex.join(argv)}".strip())

    def _not_run(self, node: str, argv: Sequence[str]) -> CommandResult:
        return CommandResult(node, tuple(argv), None, "", "", 0.0, error=self._reason)


def _result_or_error(node: str, argv: Sequence[str], call: object) -> CommandResult:
    try:
        result = call()  # type: ignore[operator]
    except Exception as exc:  # noqa: BLE001 - one node's transport failure must not stop the phase
        return CommandResult(node, tuple(argv), None, "", "", 0.0, error=f"{type(exc).__name__}: {exc}")
    assert isinstance(result, CommandResult)
    return result


def split_per_node(result: CommandResult, nodes: Sequence[str], command: Sequence[str]) -> dict[str, CommandResult]:
    """Each node's output of a labelled per-node step (:func:`burnin.transport.slurm.split_step`, line by line)."""
    return split_step(result, nodes, node_argv=command, chunked=False)
