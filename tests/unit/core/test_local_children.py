"""An interrupted run stops every child process group at once, and starts no new one."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from burnin.transport import local
from burnin.transport.base import CommandResult
from burnin.transport.local import INTERRUPTED_ERROR, LocalTransport

pytestmark = pytest.mark.proc


@pytest.fixture(autouse=True)
def _allow_children_again() -> Iterator[None]:
    yield
    local.allow_children()


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def _dead_within(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    return not _alive(pid)


def _wait_for_file(path: Path, timeout: float = 60.0) -> int:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text().strip()):
        assert time.monotonic() < deadline, f"{path} never written"
        time.sleep(0.01)
    return int(path.read_text().split()[0])


def test_stop_children_kills_a_group_that_ignores_sigterm(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    script = f'trap "" TERM; sleep 300 & echo $! > {pid_file}; wait'
    results: list[CommandResult] = []
    worker = threading.Thread(target=lambda: results.append(
        LocalTransport().run("n1", ["sh", "-c", script], timeout=300)))
    worker.start()
    grandchild = _wait_for_file(pid_file)
    assert _alive(grandchild)
    deadline = time.monotonic() + 60
    while local.running_children() < 1:  # registered right after the child started
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert local.stop_children() == 1
    worker.join(60)
    assert not worker.is_alive(), "the run did not return after its group was stopped"
    # SIGTERM ignored: SIGKILL after the grace period got it (the kernel delivers it when the process runs next:
    # on a loaded machine that can be after the group's leader was reaped)
    assert _dead_within(grandchild, 60)
    assert results[0].exit_status is not None and results[0].exit_status < 0
    assert local.running_children() == 0


def test_after_an_interrupt_worker_threads_start_nothing_but_cleanup_may(tmp_path: Path) -> None:
    local.stop_children()
    marker = tmp_path / "started"
    results: list[CommandResult] = []
    worker = threading.Thread(target=lambda: results.append(
        LocalTransport().run("n1", ["touch", str(marker)], timeout=30)))
    worker.start()
    worker.join(60)
    assert results[0].error == INTERRUPTED_ERROR and not marker.exists()
    # The main thread still may (scancel, deleting a reservation on the way out).
    cleanup = LocalTransport().run("n1", [sys.executable, "-c", "print('cleanup')"], timeout=30)
    assert cleanup.ok and cleanup.stdout.strip() == "cleanup"


def test_a_finished_command_leaves_no_background_child_behind(tmp_path: Path) -> None:
    result = LocalTransport().run("n1", ["sh", "-c", "sleep 300 >/dev/null 2>&1 & echo $!"], timeout=30)
    assert result.ok
    pid = int(result.stdout.split()[0])
    assert _dead_within(pid, 30)


def test_close_ends_the_transports_children_still_running(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    transport, other = LocalTransport(), LocalTransport()
    results: list[CommandResult] = []
    workers = [threading.Thread(target=lambda t=t: results.append(
        t.run("n1", ["sh", "-c", f"echo $$ >> {pid_file}; exec sleep 300"], timeout=300))) for t in (transport, other)]
    for worker in workers:
        worker.start()
    deadline = time.monotonic() + 60
    while len(pid_file.read_text().split() if pid_file.exists() else []) < 2 or local.running_children() < 2:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    transport.close()  # an interrupted run: its dispatcher closes while a worker still waits
    workers[0].join(60)
    assert not workers[0].is_alive() and results[0].exit_status is not None and results[0].exit_status < 0
    assert workers[1].is_alive()  # another transport's command is not touched
    other.close()
    workers[1].join(60)
    assert all(_dead_within(int(pid), 60) for pid in pid_file.read_text().split())
