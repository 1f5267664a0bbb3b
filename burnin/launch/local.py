"""Launching on simulated racks: each node a local process with the node's environment.

The local transport runs every node's command as that node (shim PATH, NVML library, sysfs root), so
per-node commands and the collector take the production code path. A multi-node job may run as one
process on its first node that models the group: the dispatcher's ``job_env(nodes)`` names the members
to the simulated tools; asked for ``mpirun`` (a site's fabric setting), it starts mpirun as on any rack.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from burnin.launch.base import JobSpec, NodeCommand, Preset, with_env, with_timeout
from burnin.launch.log import NO_LOG, CommandLog
from burnin.launch.ssh import TransportLauncher
from burnin.transport.base import CommandResult, Transport

JobEnv = Callable[[Sequence[str]], Mapping[str, str]]
"""The environment that makes a command on one simulated node a job over ``nodes``."""


class LocalLauncher(TransportLauncher):
    """Simulated nodes through the local transport; a job runs as one process modelling its group."""

    def __init__(self, transport: Transport, job_env: JobEnv, *, name: str = "sim", preset: Preset = "simulated",
                 fanout: int = 64, collect_fanout: int = 8, log: CommandLog = NO_LOG) -> None:
        """A simulated rack shares this machine's cores: at most ``collect_fanout`` collectors at a time."""
        super().__init__(transport, name=name, form="local", preset=preset, fanout=fanout,
                         collect_fanout=collect_fanout, log=log)
        self._job_env = job_env

    def _as_job(self, commands: Sequence[NodeCommand], command: NodeCommand) -> NodeCommand:
        members = [c.node for c in commands]
        return replace(command, env={**command.env, **self._job_env(members)})

    def job_argv(self, spec: JobSpec) -> list[str]:
        if spec.launcher == "mpirun":
            return super().job_argv(spec)
        program = with_timeout(spec.program, spec.timeout_s) if spec.time_limit else list(spec.program)
        return with_env(program, {**spec.env, **self._job_env(spec.nodes)})

    def job(self, spec: JobSpec) -> CommandResult:
        if spec.launcher == "mpirun":
            return super().job(spec)
        argv = self.job_argv(spec)
        return self._run(NodeCommand(spec.nodes[0], tuple(argv), spec.timeout_s + spec.slack_s))
