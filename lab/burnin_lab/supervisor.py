"""The parent of a simulated rack's daemons, so ``burnin sim down`` leaves no zombie behind.

``burnin sim up`` exits while the rack's daemons run on; whatever it started
directly would be re-parented to PID 1, and where PID 1 does not reap (a
container's init, some VM agents) every stopped daemon would stay a zombie.
So ``up`` starts this small process instead, in a session of its own, and it
starts the daemons as its children. It is their child subreaper (Linux
``PR_SET_CHILD_SUBREAPER``), so anything a daemon forks and orphans is
re-parented to it too, and it reaps all of them as they exit.

Protocol (files next to the plan, written atomically):

- plan ``<name>.json``: ``{"daemons": [{"name", "argv", "log"?}]}``;
- pids ``<name>.pids``: ``{"generation", "supervisor", "pids": {name: pid}}``,
  rewritten after each (re)start;
- SIGUSR1: read the plan again and start every daemon that is not running
  (a node's sshd after ``stop_node``, or on a new port after a lost race);
- SIGTERM, SIGINT, SIGHUP: stop every child (SIGTERM, SIGKILL after a grace
  period), reap them all, exit 0.

Only this process itself is left to its own parent to reap when it exits.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

MODULE = "burnin_lab.supervisor"
STOP_GRACE_S = 5.0
POLL_S = 0.1
_PR_SET_CHILD_SUBREAPER = 36
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def pids_path(plan: Path) -> Path:
    return plan.with_suffix(".pids")


def command(plan: Path) -> list[str]:
    """The argv that runs a supervisor for ``plan`` (its cmdline identifies it, see :func:`is_supervisor`)."""
    return [sys.executable, "-m", MODULE, str(plan)]


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
    tmp.replace(path)


def read_pids(plan: Path) -> dict[str, Any]:
    """The supervisor's last pids file (empty until it has started the daemons)."""
    try:
        data = json.loads(pids_path(plan).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def is_supervisor(pid: int | None, plan: Path) -> bool:
    """``pid`` is alive and is the supervisor of ``plan`` (not a recycled pid)."""
    if not pid:
        return False
    try:
        if Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rpartition(")")[2].split()[0] == "Z":
            return False
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return MODULE.encode() in cmdline and str(plan).encode() in cmdline


# ------------------------------------------------------------ the supervisor


class _Supervisor:
    def __init__(self, plan: Path) -> None:
        self.plan = plan
        self.children: dict[str, subprocess.Popen[bytes]] = {}
        self.generation = 0
        self.restart_requested = False
        self.stop_requested = False

    def start_missing(self) -> None:
        """Start every daemon of the plan that is not running, then publish the pids."""
        plan = json.loads(self.plan.read_text(encoding="utf-8"))
        for daemon in plan["daemons"]:
            name = daemon["name"]
            if self.stop_requested:
                return
            if name in self.children and self.children[name].poll() is None:
                continue
            self.children[name] = self._spawn(daemon)
            _log(f"started {name} pid {self.children[name].pid}")
        self.generation += 1
        write_json(pids_path(self.plan), {
            "generation": self.generation, "supervisor": os.getpid(),
            "pids": {name: proc.pid for name, proc in self.children.items() if proc.returncode is None},
        })

    @staticmethod
    def _spawn(daemon: Mapping[str, Any]) -> subprocess.Popen[bytes]:
        log = daemon.get("log")
        with open(log or os.devnull, "ab") as out:
            return subprocess.Popen(daemon["argv"], stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT)

    def reap(self) -> None:
        """Collect every exited child and adopted orphan."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            for name, proc in self.children.items():
                if proc.pid == pid and proc.returncode is None:
                    proc.returncode = os.waitstatus_to_exitcode(status)
                    _log(f"{name} (pid {pid}) exited with status {proc.returncode}")

    def stop_all(self) -> None:
        """SIGTERM every child (daemons and adopted orphans), SIGKILL after the grace period, reap all."""
        for sig, wait in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, STOP_GRACE_S)):
            for pid in _children_of(os.getpid()):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                self.reap()
                if not _children_of(os.getpid()):
                    return
                time.sleep(0.02)


def stop_adopted(reap: Callable[[], None], grace: float = STOP_GRACE_S, limit: float = 3 * STOP_GRACE_S) -> None:
    """Stop every remaining child of this subreaper, adopted orphans included, until none is left.

    A killed process's own children are adopted next (a running job's slurmstepd,
    then its batch script, srun, the job's processes), so this signals in rounds:
    SIGTERM during ``grace``, SIGKILL after it, reaping between rounds.
    """
    start = time.monotonic()
    while time.monotonic() - start < limit:
        reap()
        children = _children_of(os.getpid())
        if not children:
            return
        sig = signal.SIGTERM if time.monotonic() - start < grace else signal.SIGKILL
        for pid in children:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        time.sleep(0.05)
    reap()


def _children_of(parent: int) -> list[int]:
    """Live and zombie children of ``parent`` (from /proc)."""
    children = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text(encoding="utf-8").rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[1]) == parent:
            children.append(int(entry.name))
    return children


def _become_subreaper() -> None:
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return
    libc = ctypes.CDLL(libc_name, use_errno=True)
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _log(text: str) -> None:
    sys.stderr.write(f"{time.strftime('%H:%M:%S')} supervisor: {text}\n")
    sys.stderr.flush()


def supervise(plan: Path) -> int:
    """Run the plan's daemons until a stop signal; reap everything; exit 0."""
    supervisor = _Supervisor(plan)

    def on_stop(signum: int, frame: object) -> None:
        supervisor.stop_requested = True

    def on_restart(signum: int, frame: object) -> None:
        supervisor.restart_requested = True

    # Flags, not exceptions: a signal never cuts a start short and leaves a daemon unrecorded.
    for sig in _STOP_SIGNALS:
        signal.signal(sig, on_stop)
    signal.signal(signal.SIGUSR1, on_restart)
    # The starter blocks these signals while it records our pid; the mask is inherited.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, (*_STOP_SIGNALS, signal.SIGUSR1))
    _become_subreaper()
    code = 0
    try:
        supervisor.start_missing()
        while not supervisor.stop_requested:
            supervisor.reap()
            if supervisor.restart_requested:
                supervisor.restart_requested = False
                supervisor.start_missing()
            time.sleep(POLL_S)
        _log("stopping")
    except Exception as exc:  # noqa: BLE001 - log it, and still stop every daemon
        _log(f"error: {type(exc).__name__}: {exc}")
        code = 1
    finally:
        for sig in _STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        supervisor.stop_all()
    return code


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        sys.stderr.write(f"usage: python -m {MODULE} PLAN.json\n")
        return 2
    return supervise(Path(argv[0]))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
