"""Run commands as local processes: on this node, or as a simulated node.

A simulated node is a local process with the node's environment (shim PATH,
NVML library path, sysfs root), so the collector runs exactly as on hardware.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence

from burnin.transport.base import CommandResult

NodeEnvironment = Callable[[str], Mapping[str, str]]


class LocalTransport:
    """Runs argv lists with ``subprocess`` (never a shell), bounded by a timeout.

    ``node_env`` gives extra environment per node (used for simulated nodes).
    On timeout the whole process group is killed, so a hung tool cannot leave
    children behind.
    """

    name = "local"

    def __init__(self, node_env: NodeEnvironment | None = None) -> None:
        self._node_env = node_env

    def run(
        self,
        node: str,
        argv: Sequence[str],
        *,
        timeout: float,
        stdin: bytes | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        full_env = dict(os.environ)
        if self._node_env is not None:
            full_env.update(self._node_env(node))
        if env:
            full_env.update(env)
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=full_env,
                start_new_session=True,
            )
        except OSError as exc:
            return CommandResult(
                node, tuple(argv), None, "", "", time.monotonic() - started,
                error=f"cannot start {argv[0]}: {exc.strerror or exc}",
            )
        try:
            out, err = proc.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, err = proc.communicate()
            return CommandResult(
                node, tuple(argv), None, _text(out), _text(err), time.monotonic() - started,
                timed_out=True,
            )
        return CommandResult(
            node, tuple(argv), proc.returncode, _text(out), _text(err), time.monotonic() - started,
        )

    def close(self) -> None:
        """Nothing to release: every process is waited for in :meth:`run`."""


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _text(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", errors="replace")
