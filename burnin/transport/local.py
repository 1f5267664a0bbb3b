"""Run commands as local processes: on this node, or as a simulated node.

A simulated node is a local process with the node's environment (shim PATH,
NVML library path, sysfs root), so the collector runs exactly as on hardware.

Every child starts in a session (and process group) of its own, so a terminal's
Ctrl-C does not reach it and nothing it forks can outlive it: on a timeout, and
on an interrupt (:func:`stop_children`), the whole group is killed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence

from burnin.transport.base import CommandResult

NodeEnvironment = Callable[[str], Mapping[str, str]]

# Seconds a child gets between SIGTERM and SIGKILL when the run is interrupted
# (srun needs SIGTERM to cancel its job step; a hung tool gets SIGKILL after it).
STOP_GRACE_S = 2.0
INTERRUPTED_ERROR = "not started: the run was interrupted"
# Longest close() waits for the runs of children it killed to return.
CLOSE_WAIT_S = 10.0


class _Children:
    """The process groups of every child still running, so an interrupt can stop them all.

    After :meth:`stop` only the main thread, and commands marked as cleanup
    (``scancel``), may start processes; other runs in worker threads get
    :data:`INTERRUPTED_ERROR` instead, so the rest of a fan-out does not start
    once the run is interrupted.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()  # re-entrant: the signal handler runs in the main thread
        self._running: dict[int, object] = {}  # process group -> the transport that started it
        self.stopping = False

    def may_start(self, cleanup: bool = False) -> bool:
        return not self.stopping or cleanup or threading.current_thread() is threading.main_thread()

    def add(self, proc: subprocess.Popen[bytes], owner: object, cleanup: bool) -> bool:
        """Track ``proc``; False (and the group killed) when the run was interrupted meanwhile."""
        with self._lock:
            if self.may_start(cleanup):
                self._running[proc.pid] = owner
                return True
        kill_group(proc.pid, signal.SIGKILL)
        return False

    def remove(self, proc: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._running.pop(proc.pid, None)

    def stop(self, *, force: bool) -> int:
        """SIGTERM every group (SIGKILL with ``force``), SIGKILL what is left after the grace period."""
        with self._lock:
            self.stopping = True
            groups = list(self._running)
        for pgid in groups:
            kill_group(pgid, signal.SIGKILL if force else signal.SIGTERM)
        if groups and not force:
            timer = threading.Timer(STOP_GRACE_S, self._kill_remaining, args=(groups,))
            timer.daemon = True
            timer.start()
        return len(groups)

    def _kill_remaining(self, groups: list[int]) -> None:
        with self._lock:
            still = [pgid for pgid in groups if pgid in self._running]
        for pgid in still:
            kill_group(pgid, signal.SIGKILL)

    def count(self) -> int:
        with self._lock:
            return len(self._running)

    def end_owned(self, owner: object, timeout: float) -> None:
        """SIGKILL the groups ``owner`` started that still run, and wait until their runs returned."""
        deadline = time.monotonic() + timeout
        killed: set[int] = set()
        while True:
            with self._lock:
                groups = [pgid for pgid, who in self._running.items() if who is owner]
            if not groups or time.monotonic() > deadline:
                return
            for pgid in set(groups) - killed:
                kill_group(pgid, signal.SIGKILL)
                killed.add(pgid)
            time.sleep(0.01)


_CHILDREN = _Children()


def stop_children(*, force: bool = False) -> int:
    """Stop every child process group this process started; returns how many there were.

    Called from the interrupt handler: afterwards no worker thread starts a new
    child. Without ``force`` the groups get SIGTERM now and SIGKILL after
    :data:`STOP_GRACE_S`.
    """
    return _CHILDREN.stop(force=force)


def allow_children() -> None:
    """Let worker threads start children again (a process that runs more than one command, e.g. tests)."""
    _CHILDREN.stopping = False


def running_children() -> int:
    """How many children are running right now (tests and diagnostics)."""
    return _CHILDREN.count()


def kill_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


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
        cleanup: bool = False,
    ) -> CommandResult:
        """Run ``argv``; ``cleanup`` marks a command that releases what the run holds (it still
        runs after an interrupt, from any thread)."""
        started = time.monotonic()
        if not _CHILDREN.may_start(cleanup):
            return CommandResult(node, tuple(argv), None, "", "", 0.0, error=INTERRUPTED_ERROR)
        full_env = dict(os.environ)
        if self._node_env is not None:
            full_env.update(self._node_env(node))
        if env:
            full_env.update(env)
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
        if not _CHILDREN.add(proc, self, cleanup):
            proc.communicate()
            return CommandResult(node, tuple(argv), None, "", "", time.monotonic() - started,
                                 error=INTERRUPTED_ERROR)
        try:
            try:
                out, err = proc.communicate(stdin, timeout=timeout)
            except subprocess.TimeoutExpired:
                kill_group(proc.pid, signal.SIGKILL)
                out, err = proc.communicate()
                return CommandResult(
                    node, tuple(argv), None, _text(out), _text(err), time.monotonic() - started,
                    timed_out=True,
                )
            except BaseException:  # interrupted in the main thread: the group goes with us
                _stop_now(proc)
                raise
            # The leader is done; whatever it left running in its group goes too.
            kill_group(proc.pid, signal.SIGKILL)
        finally:
            _CHILDREN.remove(proc)
        return CommandResult(
            node, tuple(argv), proc.returncode, _text(out), _text(err), time.monotonic() - started,
        )

    def close(self) -> None:
        """Return once every process this transport started has ended.

        In a finished run there are none. In an interrupted one, worker threads
        may still wait on children that the interrupt is stopping: they are
        killed now, so nothing writes into a scratch folder removed after this.
        """
        _CHILDREN.end_owned(self, CLOSE_WAIT_S)


def _stop_now(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the group, SIGKILL it after the grace period, and reap the leader."""
    kill_group(proc.pid, signal.SIGTERM)
    try:
        proc.wait(STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    finally:
        kill_group(proc.pid, signal.SIGKILL)
        proc.wait()


def _text(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", errors="replace")
