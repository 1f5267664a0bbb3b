"""Launching over a transport (SSH, or the local one): every node through its connection, jobs with mpirun.

:class:`TransportLauncher` runs each node's command through a
:class:`~burnin.transport.base.Transport`, all nodes at once (a bounded pool), and a multi-node job as
``timeout -k 5 T mpirun -np N -N R --host a:R,b:R -x K=V ... program`` from the job's first node
(:func:`mpirun_argv`, the one place that argv is built). Nothing is held: the transport reaches the nodes
all along. :class:`SshLauncher` adds the SSH collector run: the collector zipapp on the channel's stdin to
the node's own python3, each node's connection released as soon as its facts are in, the whole gather
bounded by its timeout times the number of waves.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from burnin.launch.base import (
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
    missing_launcher,
    not_started,
    run_guarded,
    with_timeout,
)
from burnin.launch.log import NO_LOG, CommandLog
from burnin.nodes import fold
from burnin.transport.base import CommandResult, Transport

if TYPE_CHECKING:
    from burnin.transport.ssh import SshTransport

DEFAULT_FANOUT = 64
NODE_PYTHON = "python3"


def mpirun_argv(nodes: Sequence[str], ranks_per_node: int, program: Sequence[str], *,
                env: Mapping[str, str] | None = None, mpirun: str = "mpirun",
                args: Sequence[str] = ()) -> list[str]:
    """``mpirun -np N -N R --host a:R,b:R ARGS -x K=V ... program``: R ranks on each node, started from the
    first node over its SSH connections to the others; every variable reaches every rank (``-x``)."""
    argv = [mpirun, "-np", str(len(nodes) * ranks_per_node), "-N", str(ranks_per_node),
            "--host", ",".join(f"{node}:{ranks_per_node}" for node in nodes), *args]
    for key, value in (env or {}).items():
        argv += ["-x", f"{key}={value}"]
    return [*argv, *program]


class TransportLauncher:
    """Every node through ``transport``; jobs with mpirun from their first node. See the module docstring."""

    def __init__(self, transport: Transport, *, name: str, form: JobForm = "mpirun",
                 preset: Preset = "production", fanout: int = DEFAULT_FANOUT, collect_fanout: int | None = None,
                 log: CommandLog = NO_LOG) -> None:
        """``fanout``: commands in flight at once (a job's commands all start together whatever it is);
        ``collect_fanout``: collector runs in flight at once (default: ``fanout``)."""
        self.name = name
        self.form: JobForm = form
        self.preset: Preset = preset
        self.transport = transport
        self._fanout = fanout
        self._collect_fanout = collect_fanout or fanout
        self._log = log

    # -- holding: nothing to hold ---------------------------------------------------------

    def hold(self, nodes: Sequence[str], how: Hold, plan: Sequence[PlanItem] = ()) -> str | None:
        return None

    def release(self) -> None:
        """Nothing is held."""

    def ended(self) -> str | None:
        return None  # nothing is held, so nothing can end: each command reaches its node on its own

    def close(self) -> None:
        """The transport belongs to the dispatcher, which closes it."""

    def note(self, text: str) -> None:
        self._log.line(f"# {text}")

    # -- running --------------------------------------------------------------------------

    def _run(self, command: NodeCommand) -> CommandResult:
        result = run_guarded(command.node, command.argv, lambda: self.transport.run(
            command.node, list(command.argv), timeout=command.timeout_s, stdin=command.stdin,
            env=dict(command.env) or None))
        self._log.command(f"[{command.node}]", command.argv, result)
        return result

    def per_node(self, commands: Sequence[NodeCommand], *, job: bool = False) -> dict[str, CommandResult]:
        """``job``: the commands are one job's (a launcher on each node, as torchrun): all start together."""
        commands = [self._as_job(commands, c) for c in commands] if job else list(commands)
        workers = max(self._fanout, len(commands)) if job else self._fanout
        results = fan_out(commands, self._run, workers=workers)
        return {command.node: result for command, result in zip(commands, results, strict=True)}

    def _as_job(self, commands: Sequence[NodeCommand], command: NodeCommand) -> NodeCommand:
        """A command of a job over ``commands``' nodes (a simulated rack names the members to it)."""
        return command

    def everywhere(self, nodes: Sequence[str], argv: Sequence[str], *, timeout_s: float,
                   srun: SrunOptions | None = None) -> dict[str, CommandResult]:
        commands = [NodeCommand(node, tuple(argv), timeout_s) for node in nodes]
        results = fan_out(commands, self._run, workers=self._fanout)
        return {command.node: result for command, result in zip(commands, results, strict=True)}

    def job_argv(self, spec: JobSpec) -> list[str]:
        """What :meth:`job` starts on the job's first node."""
        argv = mpirun_argv(spec.nodes, spec.ranks_per_node, spec.program, env=spec.env,
                           mpirun=spec.mpirun.program, args=spec.mpirun.args)
        return with_timeout(argv, spec.timeout_s) if spec.time_limit else argv

    def job(self, spec: JobSpec) -> CommandResult:
        first = spec.nodes[0]
        argv = self.job_argv(spec)
        result = self._run(NodeCommand(first, tuple(argv), spec.timeout_s + spec.slack_s))
        missing = missing_launcher(result, argv)
        if missing is not None:  # the launcher is not there: say so, never blame the program it was to start
            return replace(result, error=missing)
        return result

    def collect(self, nodes: Sequence[str], args: Sequence[str], *, timeout_s: float,
                on_done: Callable[[str, CommandResult], None] | None = None) -> dict[str, CommandResult]:
        """The collector as a module of this machine's python (simulated nodes, a local toy dispatcher)."""
        import sys

        argv = (sys.executable, "-m", "burnin.collector", *args)
        commands = [NodeCommand(node, argv, timeout_s) for node in nodes]
        done = (lambda command, result: on_done(command.node, result)) if on_done is not None else None
        results = fan_out(commands, self._collect_one, workers=self._collect_fanout, on_done=done)
        return {command.node: result for command, result in zip(commands, results, strict=True)}

    def _collect_one(self, command: NodeCommand) -> CommandResult:
        return run_guarded(command.node, command.argv, lambda: self.transport.run(
            command.node, list(command.argv), timeout=command.timeout_s, stdin=command.stdin))

    # -- what would start -----------------------------------------------------------------

    def describe(self, item: PlanItem) -> list[Shown]:
        if isinstance(item, Each):
            return [(f"[{fold(list(item.nodes))}]", list(item.argv))]
        if isinstance(item, NodeCommand):
            return [(f"[{item.node}]", list(item.argv))]
        if isinstance(item, JobSpec):
            return [(f"[{item.nodes[0]}]", self.job_argv(item))]
        return []

    def describe_hold(self, nodes: Sequence[str], how: Hold) -> str | None:
        return None


class SshLauncher(TransportLauncher):
    """Over the pooled SSH connections; the collector runs agentless from a zipapp on stdin."""

    def __init__(self, transport: SshTransport, *, preset: Preset = "production", fanout: int = DEFAULT_FANOUT,
                 python: str = NODE_PYTHON, log: CommandLog = NO_LOG) -> None:
        super().__init__(transport, name="ssh", form="mpirun", preset=preset, fanout=fanout, log=log)
        self._ssh = transport
        self._python = python

    def collector_argv(self, args: Sequence[str]) -> list[str]:
        from burnin.transport import payload

        return payload.stdin_argv(self._python, args=tuple(args))

    def collect(self, nodes: Sequence[str], args: Sequence[str], *, timeout_s: float,
                on_done: Callable[[str, CommandResult], None] | None = None) -> dict[str, CommandResult]:
        """The collector zipapp on each node's stdin, run by the node's python3 (nothing is written there)."""
        from burnin.transport import payload

        return self.once_per_node(nodes, self.collector_argv(args), stdin=payload.collector_zipapp(),
                                  timeout_s=timeout_s, on_done=on_done)

    def once_per_node(self, nodes: Sequence[str], argv: Sequence[str], *, stdin: bytes | None, timeout_s: float,
                      on_done: Callable[[str, CommandResult], None] | None = None) -> dict[str, CommandResult]:
        """``argv`` once on every node: at most ``fanout`` nodes at a time, each bounded by ``timeout_s``, all by
        ``timeout_s`` times the waves; each node's connection closed as soon as it is done (a 1,000-node gather
        never holds more than ``fanout`` connections)."""
        waves = -(-len(nodes) // self._fanout) if nodes else 1
        deadline = time.monotonic() + timeout_s * waves
        command = tuple(argv)

        def one(node: str) -> CommandResult:
            left = deadline - time.monotonic()
            if left <= 0:
                return replace(not_started(node, command, "not started: the run's overall timeout expired first"),
                               timed_out=True)
            try:
                return run_guarded(node, command, lambda: self._ssh.run(node, command, timeout=min(timeout_s, left),
                                                                        stdin=stdin))
            finally:
                self._ssh.release(node)

        results = fan_out(list(nodes), one, workers=self._fanout, on_done=on_done)
        return dict(zip(nodes, results, strict=True))


__all__ = ["DEFAULT_FANOUT", "SshLauncher", "TransportLauncher", "mpirun_argv"]
