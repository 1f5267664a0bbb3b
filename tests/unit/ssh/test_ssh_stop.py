"""Stopping commands that run over SSH, without a server (issue 10); tests/sim_ssh/test_ssh_interrupt.py
does it against real sshd.

sshd turns a ``signal`` request into a signal to the login shell's process group. The remote
command line (:func:`remote_command`) must carry it to a command that ``timeout(1)`` runs in a
group of its own, and keep giving the command the session's input; a run that was interrupted
starts nothing more from worker threads.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from burnin.cli import interrupt
from burnin.transport import ssh
from burnin.transport.ssh import SshTransport, remote_command

WAIT_S = 60.0


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.proc
def test_the_remote_command_still_reads_the_session_input() -> None:
    line = remote_command(["sh", "-c", "read x; echo got $x; exit 4"], timeout=30)
    proc = subprocess.run(["sh", "-c", line], input="payload\n", capture_output=True, text=True, timeout=WAIT_S,
                          check=False)
    assert (proc.returncode, proc.stdout) == (4, "got payload\n"), proc.stderr


@pytest.mark.proc
@pytest.mark.parametrize("shell", ["sh", "bash"])
def test_a_signal_to_the_login_shells_group_stops_the_command_and_its_children(shell: str, tmp_path: Path) -> None:
    """As sshd does it: killpg(login shell, SIGTERM). The command and its child run under timeout(1),
    in another process group, and must go too (they used to run on until their timeout)."""
    pids = tmp_path / "pids"
    command = ["sh", "-c", f"sleep 3601 & echo $$ $! > {pids}; wait"]
    login = subprocess.Popen([shell, "-c", remote_command(command, timeout=3600)], stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + WAIT_S
        while not (pids.exists() and len(pids.read_text().split()) == 2) and time.monotonic() < deadline:
            time.sleep(0.02)
        tool, child = (int(p) for p in pids.read_text().split())
        assert os.getpgid(tool) != login.pid  # timeout(1) gave it a group of its own
        os.killpg(login.pid, signal.SIGTERM)
        _, err = login.communicate(timeout=WAIT_S)
        deadline = time.monotonic() + WAIT_S
        while (_alive(tool) or _alive(child)) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _alive(tool) and not _alive(child)
        assert "killed by signal 15 (SIGTERM)" in err
    finally:
        for pid in (int(p) for p in (pids.read_text().split() if pids.exists() else ())):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        if login.poll() is None:
            os.killpg(login.pid, signal.SIGKILL)
            login.wait()


def _no_endpoint(node: str) -> ssh.Endpoint:
    raise AssertionError(f"connected to {node} after the run was interrupted")


def test_after_an_interrupt_worker_threads_start_no_command() -> None:
    transport = SshTransport(_no_endpoint)
    results = []
    ssh.stop_commands()
    try:
        worker = threading.Thread(target=lambda: results.append(transport.run("n1", ["true"], timeout=5)))
        worker.start()
        worker.join(WAIT_S)
    finally:
        ssh.allow_commands()
    assert [r.error for r in results] == [ssh.INTERRUPTED_ERROR]


def test_the_interrupt_handler_stops_ssh_commands_and_reset_allows_them_again() -> None:
    interrupt.reset()
    previous = interrupt.install()
    try:
        with pytest.raises(interrupt.Interrupted):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(WAIT_S)  # the handler raises in this thread before this ends
        assert ssh._STOP.requested
    finally:
        interrupt.restore(previous)
        interrupt.reset()
    assert not ssh._STOP.requested
