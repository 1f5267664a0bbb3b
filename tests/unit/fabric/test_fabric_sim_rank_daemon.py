"""A simulated mpirun rank ends when the daemon that started it (mpirun, or its node's orted) is gone, as a
real rank does when its PMIx link to the daemon is lost: an mpirun killed before it stopped its own node's
ranks left rank 0 waiting out its rendezvous after an interrupted run (the SSH lab's SIGTERM test)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.proc

WAIT_S = 60.0

# The daemon: starts the rank, says its pid, then waits to be killed. The rank: asks to end with it, says so.
DAEMON = """
import subprocess, sys, time
rank = subprocess.Popen([sys.executable, "-c", sys.argv[1]])
print(rank.pid, flush=True)
time.sleep(600)
"""
RANK = """
import sys, time
sys.path.insert(0, {root!r})
from burnin.sim.fabric_model import end_with_daemon
{call}
open({ready!r}, "w").close()
time.sleep(600)
"""


def _stat(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return []


def _alive(pid: int) -> bool:
    fields = _stat(pid)
    return bool(fields) and fields[0] != "Z"


def _wait(what: str, condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {WAIT_S:g} s"
        time.sleep(0.02)


@contextlib.contextmanager
def _daemon_killed(tmp_path: Path, call: str) -> Iterator[tuple[int, int]]:
    """A daemon that started a rank (which ran ``call``), then was killed: yields (daemon pid, rank pid)."""
    ready = tmp_path / "ready"
    root = str(Path(__file__).resolve().parents[3])
    daemon = subprocess.Popen([sys.executable, "-c", DAEMON, RANK.format(root=root, call=call, ready=str(ready))],
                              stdout=subprocess.PIPE, text=True)
    assert daemon.stdout is not None
    rank = int(daemon.stdout.readline())
    try:
        _wait("the rank started", lambda: ready.exists() or not _alive(rank))
        assert _alive(rank), "the rank died before its daemon"
        daemon.kill()  # SIGKILL: the daemon stops nothing of its own
        daemon.wait()
        yield daemon.pid, rank
    finally:
        if _alive(rank):
            os.kill(rank, signal.SIGKILL)
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_rank_ends_when_its_daemon_is_killed(tmp_path: Path) -> None:
    with _daemon_killed(tmp_path, "end_with_daemon()") as (_, rank):
        _wait("the rank ended after its daemon", lambda: not _alive(rank))


def test_without_it_the_rank_outlives_its_daemon(tmp_path: Path) -> None:
    """The check above can fail: the same rank, not asking, is handed to another parent and runs on."""
    with _daemon_killed(tmp_path, "pass") as (daemon, rank):
        _wait("the rank handed to another parent", lambda: not _alive(rank) or int(_stat(rank)[1]) != daemon)
        assert _alive(rank)


# The rank's interpreter still starting when its daemon is killed: the parent it then sees is a subreaper.
LATE = """
import os, time
os.environ["BURNIN_SIM_LAUNCHER_PID"] = str(os.getppid())  # as the tool's shim records its $PPID
open({ready!r}, "w").close()
while os.getppid() == int(os.environ["BURNIN_SIM_LAUNCHER_PID"]):
    time.sleep(0.01)
{call}
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_rank_whose_daemon_died_while_it_started_ends_too(tmp_path: Path) -> None:
    """An mpirun killed while its rank's Python started: the rank was another parent's before it asked."""
    call = LATE.format(ready=str(tmp_path / "ready"), call="end_with_daemon()")
    with _daemon_killed(tmp_path, call) as (_, rank):
        _wait("the rank ended after its daemon", lambda: not _alive(rank))


def test_without_the_launcher_pid_a_late_rank_runs_on(tmp_path: Path) -> None:
    """The check above can fail: asked against the parent it sees now, the late rank runs on."""
    call = LATE.format(ready=str(tmp_path / "ready"),
                       call='del os.environ["BURNIN_SIM_LAUNCHER_PID"]\nend_with_daemon()\n'
                            'open({!r}, "w").close()'.format(str(tmp_path / "asked")))
    with _daemon_killed(tmp_path, call) as (_, rank):
        _wait("the rank asked", lambda: (tmp_path / "asked").exists() or not _alive(rank))
        time.sleep(0.5)  # a signal, were one sent, would have been delivered at once
        assert _alive(rank)
