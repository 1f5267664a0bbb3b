"""An interrupted run stops what it runs over SSH on the nodes themselves (issue 10).

A 2-node rack behind real sshd, all_reduce_perf hung on sim01 (fault nccl-hang).
`burnin run --via ssh --suite fabric`, with a fabric timeout of an hour, gets
SIGTERM once the tools run on the nodes: it must exit 3 with one line and leave
no process of the run on any node. Before, burnin exited but the hung tool
lived on for the hour under the node's own `timeout`. The transport is also
driven directly: an interrupt in the main thread, a stop seen by a worker
thread, and close() with a command still running.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sshrack import Rack, make_state_dir, require_sim_ssh, worker_subnet

from burnin.transport.base import CommandResult
from burnin.transport.ssh import SshTransport

pytestmark = pytest.mark.sim_ssh

NODES = ["sim01", "sim02"]
WAIT_S = 120.0  # bound on waiting for a marker or a process to go (a failure, never a measurement)
HUNG_AFTER_S = 2.0  # a simulated all_reduce_perf alive this long is the hung one (a healthy run takes ms)


@pytest.fixture(scope="module")
def hang_rack() -> Iterator[Rack]:
    require_sim_ssh()
    from burnin.dispatch.sim import parse_fault_args
    from burnin.topology import find_topology
    from burnin_lab import ssh as lab_ssh

    state = make_state_dir("burnin-sim-ssh-interrupt-")
    try:
        lab = lab_ssh.up(state, find_topology("hgx-h100-8gpu"), NODES, parse_fault_args(["sim01:nccl-hang"], NODES),
                         subnet=worker_subnet(2))
        yield Rack(state, lab)
    finally:
        if (state / "lab.json").exists():
            lab_ssh.down(state)
        shutil.rmtree(state, ignore_errors=True)


def _on_nodes(rack: Rack, needle: str = "") -> list[tuple[int, str, str]]:
    """(pid, node, command line) of the live processes run as one of the rack's nodes (their
    environment points into its state folder), sshd itself aside, whose command line holds ``needle``."""
    found = []
    marker = f"{rack.state}/nodes/".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "stat").read_text().rpartition(")")[2].split()[0] == "Z":
                continue
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker in environ and not cmdline.startswith("sshd") and needle in cmdline:
            node = environ.split(marker, 1)[1].split(b"/", 1)[0].decode(errors="replace")
            found.append((int(entry.name), node, cmdline))
    return found


def _nodes_running(rack: Rack, needle: str) -> set[str]:
    return {node for _, node, _ in _on_nodes(rack, needle)}


def _wait(what: str, ready: Callable[[], bool], proc: subprocess.Popen[str] | None = None) -> None:
    deadline = time.monotonic() + WAIT_S
    while not ready():
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"burnin ended (exit {proc.returncode}) before {what}: {proc.communicate()[1][-2000:]}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {WAIT_S:g} s")
        time.sleep(0.05)


def _kill_leftovers(rack: Rack) -> None:
    for pid, _, _ in _on_nodes(rack):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _transport(rack: Rack) -> SshTransport:
    from burnin.dispatch.ssh import SshDispatcher
    from burnin.inventory import load_inventory

    return SshDispatcher.for_nodes(inventory=load_inventory(rack.inventory)).transport


SLEEPER = ["sh", "-c", "sleep 3601 & sleep 3602"]  # a command and a child of it, both hung


def test_sigterm_during_the_fabric_phase_stops_the_tools_on_the_nodes(hang_rack: Rack, tmp_path: Path) -> None:
    config = tmp_path / "fabric.yaml"
    config.write_text("timeout_s: 3600\n")
    proc = subprocess.Popen([sys.executable, "-m", "burnin.cli.main", "run", "--via", "ssh",
                             "--inventory", str(hang_rack.inventory), "--suite", "fabric",
                             "--fabric-config", str(config), "--out", str(tmp_path / "out")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # hung, not just started: one all_reduce_perf process on sim01 has lived for a while, far
        # longer than a healthy simulated run takes, and none runs elsewhere (a tool still printing
        # would die of SIGPIPE once burnin's connections close, whatever burnin did). sim02's own
        # run may be over between two looks at /proc under load, so it is not waited for.
        first_seen: dict[int, float] = {}

        def hung_on_sim01() -> bool:
            running = [(pid, node) for pid, node, _ in _on_nodes(hang_rack, "perf all_reduce")]
            now = time.monotonic()
            for pid, _ in running:
                first_seen.setdefault(pid, now)
            return ({node for _, node in running} == {"sim01"}
                    and any(now - first_seen[pid] >= HUNG_AFTER_S for pid, _ in running))

        _wait("all_reduce_perf hung on sim01", hung_on_sim01, proc)
        proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=WAIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail(f"burnin still running {WAIT_S:g} s after SIGTERM")
        assert proc.returncode == 3, err
        assert err.strip().splitlines() == ["burnin run: interrupted (SIGTERM)"], err
        _wait("node left without the run's processes", lambda: not _on_nodes(hang_rack))
    finally:
        if proc.poll() is None:
            proc.kill()
        _kill_leftovers(hang_rack)


def test_an_interrupt_in_the_main_thread_stops_the_command_on_its_node(hang_rack: Rack) -> None:
    from burnin.cli import interrupt

    transport = _transport(hang_rack)

    def signal_once_running() -> None:
        deadline = time.monotonic() + WAIT_S
        while "sim01" not in _nodes_running(hang_rack, "sleep 3602") and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)

    interrupt.reset()
    previous = interrupt.install()
    sender = threading.Thread(target=signal_once_running, daemon=True)
    try:
        sender.start()
        with pytest.raises(interrupt.Interrupted):
            transport.run("sim01", SLEEPER, timeout=3600)
        _wait("node left without the command", lambda: not _on_nodes(hang_rack, "sleep 36"))
    finally:
        sender.join()
        interrupt.restore(previous)
        interrupt.reset()
        transport.close()
        _kill_leftovers(hang_rack)


def test_a_stop_reaches_commands_in_worker_threads_and_no_new_one_starts(hang_rack: Rack) -> None:
    from burnin.transport import ssh

    transport = _transport(hang_rack)
    pool = ThreadPoolExecutor(max_workers=2)
    try:
        futures = [pool.submit(transport.run, node, SLEEPER, timeout=3600) for node in NODES]
        _wait("both sleepers running", lambda: _nodes_running(hang_rack, "sleep 3602") == set(NODES))
        ssh.stop_commands()
        results: list[CommandResult] = [f.result(timeout=WAIT_S) for f in futures]
        late = pool.submit(transport.run, "sim01", ["true"], timeout=60).result(timeout=WAIT_S)
        assert [r.error for r in results] == [ssh.STOPPED_ERROR] * 2, results
        assert late.error == ssh.INTERRUPTED_ERROR
        _wait("nodes left without the sleepers", lambda: not _on_nodes(hang_rack, "sleep 36"))
    finally:
        ssh.allow_commands()
        _kill_leftovers(hang_rack)  # a failed stop would otherwise hold the workers for an hour
        pool.shutdown(wait=True, cancel_futures=True)
        transport.close()


def test_close_stops_a_command_still_running(hang_rack: Rack) -> None:
    from burnin.transport import ssh

    transport = _transport(hang_rack)
    pool = ThreadPoolExecutor(max_workers=1)
    try:
        future = pool.submit(transport.run, "sim02", SLEEPER, timeout=3600)
        _wait("the sleeper running", lambda: "sim02" in _nodes_running(hang_rack, "sleep 3602"))
        transport.close()
        assert future.result(timeout=WAIT_S).error == ssh.CLOSED_ERROR
        _wait("node left without the sleeper", lambda: not _on_nodes(hang_rack, "sleep 36"))
        assert transport.run("sim02", ["echo", "again"], timeout=60).stdout == "again\n"  # still usable
    finally:
        _kill_leftovers(hang_rack)
        pool.shutdown(wait=True, cancel_futures=True)
        transport.close()
