"""Launchers: run the fabric phase's commands through the dispatcher's own transport.

Nothing here starts a process: :class:`TransportLauncher` calls a
:class:`~burnin.transport.base.Transport` (local, simulated, ssh) and
:class:`SlurmLauncher` calls Slurm's client commands through
:class:`~burnin.transport.slurm.SlurmClient`.

- per-node runs: every node at once (single-node nccl-tests, nvbandwidth);
- jobs: one multi-node nccl-tests run, ``srun --mpi=...`` under Slurm,
  ``mpirun --host ...`` from the first node otherwise. On a simulated rack a
  job is one local process running as the group's first node with
  ``BURNIN_SIM_JOB_NODES`` naming its members (the shims model the group).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Literal, Protocol

from burnin.fabric import commands
from burnin.fabric.settings import FabricSettings
from burnin.gate.recheck import Recheck, plan_recheck
from burnin.gate.slurm import read_nodes
from burnin.topology.model import Topology
from burnin.transport.base import CommandResult, Transport
from burnin.transport.slurm import QUICK_TIMEOUT, SlurmRunner

SLACK_S = 30.0  # beyond a launch's own `timeout`: start-up, srun, output transfer
ALLOC_WAIT_S = 60.0
SIM_JOB_ENV = "BURNIN_SIM_JOB_NODES"
_LABEL = re.compile(r"^\s*(\d+): ?(.*)$")
_NODE = re.compile(r"^@burnin-node ([^@\s]+)@$")
_EXIT = re.compile(r"^@burnin-exit (\d+)@$")
_GRANTED = re.compile(r"Granted job allocation (\d+)")

OnCommand = Callable[[Sequence[str], CommandResult], None]


def _ignore(argv: Sequence[str], result: CommandResult) -> None:
    """No command log."""


class Launcher(Protocol):
    name: str

    def open(self, nodes: Sequence[str]) -> str | None:
        """Get ready to run on ``nodes`` (e.g. allocate them); a reason when that failed."""

    def per_node(self, nodes: Sequence[str], command: Sequence[str], *, timeout: float) -> dict[str, CommandResult]:
        """Run ``command`` on every node, all at once."""

    def job(self, nodes: Sequence[str], collective: str, *, ib_hca: str | None, timeout: float) -> CommandResult:
        """One multi-node nccl-tests run over ``nodes``; rank 0's output."""

    def close(self) -> None: ...


class TransportLauncher:
    """Per-node runs through any transport; jobs as a simulated job or with mpirun."""

    def __init__(self, transport: Transport, topology: Topology, settings: FabricSettings,
                 mode: Literal["sim", "mpirun"], *, fanout: int = 32,
                 on_command: OnCommand | None = None) -> None:
        self.name = f"{transport.name}+{mode}"
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

    def job(self, nodes: Sequence[str], collective: str, *, ib_hca: str | None, timeout: float) -> CommandResult:
        if self._mode == "sim":
            argv = commands.rank_command(self._topology, self._settings, collective, ib_hca=ib_hca,
                                         extra_env={SIM_JOB_ENV: ",".join(nodes)})
        else:
            argv = commands.mpirun_argv(nodes, self._topology, self._settings, collective, ib_hca=ib_hca)
        result = _result_or_error(nodes[0], argv, lambda: self._transport.run(nodes[0], argv,
                                                                            timeout=timeout + SLACK_S))
        self._on_command([f"[{nodes[0]}]", *argv], result)
        return result

    def close(self) -> None:
        """The transport belongs to the dispatcher, which closes it."""


SlurmClientLike = SlurmRunner


class SlurmLauncher:
    """srun steps inside one exclusive allocation of the nodes (or the allocation we run in).

    With ``recheck_drained`` (``--gate slurm``, not ``--dry-run``) nodes burnin
    drained are measured too: one maintenance reservation over all the nodes,
    the drained ones resumed inside it, the allocation made in it; on close they
    are drained again with their old reason and the reservation is deleted
    (:mod:`burnin.gate.recheck`). Nodes drained by anyone else are not touched.
    """

    name = "slurm"

    def __init__(self, client: SlurmClientLike, topology: Topology, settings: FabricSettings, *,
                 job_id: str | None = None, partition: str | None = None,
                 reservation: str | None = None, recheck_drained: bool = False,
                 on_command: OnCommand | None = None) -> None:
        self._client = client
        self._topology = topology
        self._settings = settings
        self._job_id = job_id
        self._own = job_id is None
        self._partition = partition
        self._reservation = reservation
        self._recheck_drained = recheck_drained
        self._recheck: Recheck | None = None
        self._name = f"burnin-fabric-{secrets.token_hex(4)}"
        self._on_command = on_command or _ignore

    def open(self, nodes: Sequence[str]) -> str | None:
        if self._job_id is not None or not nodes:
            return None
        reservation = self._reservation
        if self._recheck_drained:
            current, _ = read_nodes(list(nodes), timeout=QUICK_TIMEOUT, client=self._client)
            self._recheck = plan_recheck(self._name, nodes, current)
            if self._recheck is not None:
                failure = self._recheck.open(self._run)
                if failure:
                    return f"no Slurm allocation for the fabric phase: {failure}"
                reservation = self._recheck.name
        wait = min(ALLOC_WAIT_S, self._settings.timeout_s)
        argv = commands.salloc_argv(nodes, job_name=self._name, time_limit_s=self._time_limit(),
                                    immediate_s=wait, partition=self._partition, reservation=reservation)
        if self._recheck is not None:
            result, drained_again = self._recheck.allocate(self._run, self._client, argv, wait + SLACK_S,
                                                           self._name)
        else:
            result, drained_again = self._run(argv, wait + SLACK_S), ""
        match = _GRANTED.search(result.stderr)
        if match is None:
            if result.timed_out:
                self._run(["scancel", f"--name={self._name}"], 10.0)
            return f"no Slurm allocation for the fabric phase: {drained_again or result.describe_failure()}"
        self._job_id = match.group(1)
        return None

    def _time_limit(self) -> float:
        # single-node runs per collective, nvbandwidth, the group, localisation and rail rounds
        return 40 * (self._settings.timeout_s + SLACK_S)

    def per_node(self, nodes: Sequence[str], command: Sequence[str], *, timeout: float) -> dict[str, CommandResult]:
        if not nodes:
            return {}
        assert self._job_id is not None
        argv = commands.srun_per_node_argv(self._job_id, nodes, command, self._settings,
                                           time_limit_s=timeout + SLACK_S, job_name=self._name)
        return split_per_node(self._run(argv, timeout + 2 * SLACK_S), nodes, command)

    def job(self, nodes: Sequence[str], collective: str, *, ib_hca: str | None, timeout: float) -> CommandResult:
        assert self._job_id is not None
        command = commands.rank_command(self._topology, self._settings, collective, ib_hca=ib_hca)
        argv = commands.srun_job_argv(self._job_id, nodes, command, self._settings,
                                      time_limit_s=timeout + SLACK_S, job_name=self._name)
        result = self._run(argv, timeout + 2 * SLACK_S)
        return CommandResult(nodes[0], tuple(argv), result.exit_status, result.stdout, result.stderr,
                             result.duration_s, timed_out=result.timed_out, error=result.error)

    def close(self) -> None:
        try:
            if self._own and self._job_id is not None:
                self._run(["scancel", self._job_id], 10.0)
                self._job_id = None
        finally:
            if self._recheck is not None:
                self._recheck.close(self._run, self._client)
                self._recheck = None

    def _run(self, argv: list[str], timeout: float) -> CommandResult:
        result = self._client.run(argv, timeout=timeout)
        self._on_command(argv, result)
        return result


def _result_or_error(node: str, argv: Sequence[str], call: object) -> CommandResult:
    try:
        result = call()  # type: ignore[operator]
    except Exception as exc:  # noqa: BLE001 - one node's transport failure must not stop the phase
        return CommandResult(node, tuple(argv), None, "", "", 0.0, error=f"{type(exc).__name__}: {exc}")
    assert isinstance(result, CommandResult)
    return result


def split_per_node(result: CommandResult, nodes: Sequence[str], command: Sequence[str]) -> dict[str, CommandResult]:
    """Each node's output of a labelled per-node step, framed by its node and exit markers.

    A node whose task printed no marker gets an ``error`` with srun's lines that
    name it (or srun's last lines).
    """
    tasks: dict[int, list[str]] = {}
    errors: dict[int, list[str]] = {}
    srun_lines: list[str] = []
    for text, into in ((result.stdout, tasks), (result.stderr, errors)):
        for line in text.splitlines():
            match = _LABEL.match(line)
            if match is None:
                if line.strip() and into is errors:
                    srun_lines.append(line.strip())
                continue
            into.setdefault(int(match.group(1)), []).append(match.group(2))
    found: dict[str, CommandResult] = {}
    for task, lines in tasks.items():
        node = next((m.group(1) for m in map(_NODE.match, lines) if m), None)
        if node is None or node not in nodes:
            continue
        start = next(i for i, line in enumerate(lines) if _NODE.match(line)) + 1
        exits = [i for i, line in enumerate(lines) if _EXIT.match(line)]
        end = exits[-1] if exits else len(lines)
        status = int(_EXIT.match(lines[end]).group(1)) if exits else None  # type: ignore[union-attr]
        body = "\n".join(lines[start:end]).strip("\n")
        error = None
        if status is None:
            why = "srun timed out" if result.timed_out else "the task ended without an exit status"
            error = f"no complete result from {node}: {why}"
        found[node] = CommandResult(node, tuple(command), status, body + "\n" if body else "",
                                    "\n".join(errors.get(task, [])), result.duration_s,
                                    timed_out=result.timed_out and status is None, error=error)
    for node in nodes:
        if node not in found:
            named = [line for line in srun_lines if node in line] or srun_lines[-2:]
            why = result.error or ("srun timed out" if result.timed_out else f"srun ran no task on {node}")
            detail = f": {named[-1][:200]}" if named else ""
            found[node] = CommandResult(node, tuple(command), None, "", "\n".join(named), result.duration_s,
                                        timed_out=result.timed_out, error=why + detail)
    return {node: found[node] for node in nodes}
