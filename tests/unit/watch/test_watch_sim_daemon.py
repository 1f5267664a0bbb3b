"""`burnin watch --dry-run` as a process on a simulated node: the real NVML and kernel-log paths."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from burnin.sim import SimNode, apply_fault, build_node
from burnin.sim.events import KMSG_FILE, append_nvml_events
from burnin.topology import find_topology

pytestmark = pytest.mark.daemon

BURNIN = [str(Path(sys.executable).parent / "burnin")]
if not Path(BURNIN[0]).exists():
    BURNIN = [sys.executable, "-m", "burnin.cli.main"]


class Watch:
    """A running `burnin watch`; its stdout and stderr go to files the test polls."""

    def __init__(self, node: SimNode, work: Path, *args: str) -> None:
        self.node = node
        self.state = work / "state"
        self.stdout_path, self.stderr_path = work / "out.txt", work / "err.txt"
        env = {**os.environ, **node.environment()}
        with self.stdout_path.open("w") as out, self.stderr_path.open("w") as err:
            self.proc = subprocess.Popen([*BURNIN, "watch", "--dry-run", "--state-dir", str(self.state), *args],
                                         env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL)

    def out(self) -> str:
        return self.stdout_path.read_text()

    def err(self) -> str:
        return self.stderr_path.read_text()

    def journal(self) -> list[dict]:  # type: ignore[type-arg]
        path = self.state / "events.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def wait_for(self, what: str, check: Callable[[], bool], timeout: float = 120.0) -> None:
        """``timeout``: a failure bound, never a measurement (a loaded 2-core machine starts a watch slowly)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if check():
                return
            if self.proc.poll() is not None:
                pytest.fail(f"watch exited {self.proc.returncode} waiting for {what}: {self.err()}")
            time.sleep(0.05)
        pytest.fail(f"no {what} within {timeout:g} s; stdout: {self.out()!r}; stderr: {self.err()!r}")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=15)


@pytest.fixture
def node(tmp_path: Path) -> SimNode:
    return build_node(tmp_path / "node", find_topology("hgx-h100-8gpu"), "sim01")


@pytest.fixture
def watch(tmp_path: Path) -> Iterator[Callable[..., Watch]]:
    started: list[Watch] = []

    def start(node: SimNode, *args: str) -> Watch:
        work = tmp_path / f"watch{len(started)}"
        work.mkdir()
        w = Watch(node, work, *args)
        started.append(w)
        return w

    yield start
    for w in started:
        w.stop()


def _ready(w: Watch, sessions: int = 1) -> None:
    w.wait_for(f"NVML session {sessions}", lambda: f"(session {sessions})" in w.err())
    w.wait_for("the kernel log", lambda: "watching (" in w.err())
    _following(w)


def _following(w: Watch) -> None:
    """The kernel-log thread has looked for the node's log (none until a fault first writes it): what appears
    there from now on is read from its start. The main thread says "watching (" once that thread is started, not
    once it has looked: a fault written in between is found there at its first look, and skipped as history."""
    w.wait_for("the kernel log looked for", lambda: "No such file" in w.err())


def test_xid_79_is_evicted_once_and_xid_63_only_recorded(node: SimNode, watch: Callable[..., Watch]) -> None:
    w = watch(node)
    _ready(w)
    apply_fault(node.dir, "xid:79@gpu2")
    w.wait_for("the eviction", lambda: "EVICT GPU-04 gpu2 Xid 79" in w.out())
    apply_fault(node.dir, "xid:63@gpu1")
    w.wait_for("the record", lambda: "record GPU-04 gpu1 Xid 63" in w.out())
    # Each Xid reached NVML and the kernel log: one incident, whichever source was heard first (on a loaded
    # machine the kernel log can win the race), the other's sighting a duplicate.
    for cause in ("gpu2 Xid 79", "gpu1 Xid 63"):
        w.wait_for(f"the second sighting of {cause}", lambda c=cause: any(  # type: ignore[misc]
            f": GPU-04 {c} (" in line and "heard again" in line and line.split(": ")[2] in ("kmsg", "nvml")
            for line in w.err().splitlines()))
    assert w.stop() == 0
    out = w.out()
    assert out.count("scontrol update NodeName=sim01 State=DRAIN") == 1  # NVML and kmsg saw it: one action
    assert "'Reason=burnin: GPU-04 gpu2 Xid 79 (GPU has fallen off the bus)'" in out
    entries = w.journal()
    assert [(e["code"], e["action"]) for e in entries] == [(79, "evict"), (63, "record")]
    assert all(e["detected_at"] <= e["acted_at"] for e in entries)
    assert "2 duplicate sightings ignored" in w.err()


def test_kernel_log_alone_catches_an_xid(node: SimNode, watch: Callable[..., Watch]) -> None:
    w = watch(node, "--no-nvml", "--probe-interval", "3600")
    w.wait_for("start", lambda: "watching (" in w.err())
    _following(w)
    apply_fault(node.dir, "xid:48@gpu5")
    # Without NVML the GPU is named by its PCI address, as the kernel printed it.
    w.wait_for("the eviction", lambda: "EVICT GPU-04 PCI 0000:c3:00 Xid 48 (double-bit ECC error)" in w.out())
    first = w.journal()[0]
    assert first["source"] == "kmsg" and first["kernel_seq"] is not None and first["code"] == 48


def test_survives_an_nvml_error_and_a_kernel_log_rotation(node: SimNode, watch: Callable[..., Watch]) -> None:
    w = watch(node)
    _ready(w)
    apply_fault(node.dir, "xid:13@gpu0")  # creates the kernel log
    w.wait_for("first record", lambda: "Xid 13" in w.out())
    append_nvml_events(node.dir, ["error 999"])  # the driver goes away under the event set
    _ready(w, sessions=2)
    assert "NVML: Unknown Error" in w.err()
    log = node.dir / KMSG_FILE
    rotated = log.with_name("kmsg.rotated")
    rotated.write_text(log.read_text())
    os.replace(rotated, log)  # a new file with the old records: nothing replays
    apply_fault(node.dir, "xid:79@gpu4")
    w.wait_for("the eviction after both", lambda: "EVICT GPU-04 gpu4 Xid 79" in w.out())
    assert [e["code"] for e in w.journal()] == [13, 79]


def test_gpu_lost_evicts(node: SimNode, watch: Callable[..., Watch]) -> None:
    w = watch(node)
    _ready(w)
    apply_fault(node.dir, "gpu-lost@gpu6")
    w.wait_for("the eviction", lambda: "EVICT INV-01 gpu6 GPU is lost" in w.out())


def test_ib_port_down_by_site_policy_drains(node: SimNode, watch: Callable[..., Watch]) -> None:
    w = watch(node, "--ib-port-down", "drain")
    _ready(w)
    apply_fault(node.dir, "ib-port-down@mlx5_2")
    w.wait_for("the drain", lambda: "DRAIN IB-01 mlx5_2 port down" in w.out())
    assert "scontrol requeue" not in w.out()


def test_without_nvml_events_the_fast_probe_drains(node: SimNode, watch: Callable[..., Watch]) -> None:
    with node.nvml_state.open("a") as fh:
        fh.write("supported_event_types=0\n")
    w = watch(node, "--probe-interval", "1")
    w.wait_for("fallback", lambda: "NVML events unavailable: none of 8 GPUs offers events" in w.err())
    apply_fault(node.dir, "nvlink-down@gpu1")  # a fault no event reports
    w.wait_for("the probe's drain", lambda: "DRAIN GPU-10" in w.out())
    (entry,) = w.journal()
    assert entry["source"] == "probe" and entry["check"] == "GPU-10" and "gpu1" in entry["cause"]


def test_nvml_down_for_a_while_then_back(node: SimNode, watch: Callable[..., Watch]) -> None:
    w = watch(node)
    _ready(w)
    healthy = node.nvml_state.read_text()
    node.nvml_state.write_text(healthy + "init_error=9\n")  # the driver is being reloaded
    append_nvml_events(node.dir, ["error 9"])
    w.wait_for("the failed re-init", lambda: "NVML: Driver Not Loaded" in w.err())
    node.nvml_state.write_text(healthy)
    _ready(w, sessions=2)
    apply_fault(node.dir, "ecc-uncorrectable@gpu4")  # only NVML reports this one
    w.wait_for("the eviction", lambda: "EVICT GPU-01 gpu4 double-bit (uncorrectable) ECC error" in w.out())
