"""`burnin watch` as a process on simulated nodes under a simulated job: a stalled collective is found.

The job's states are the simulator's faults (job-running, job-stalled; none: no job) and its traffic is
pumped into the compute HCAs' counters by burnin.sim.job.TrafficPump. Every wait is on the watch's journal or
its metrics textfile (which says how long it has watched), never on the clock.
"""

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

from burnin.cli.main import main
from burnin.sim import SimNode, apply_fault, build_node, clear_faults
from burnin.sim.job import TrafficPump
from burnin.topology import find_topology

pytestmark = pytest.mark.daemon

BURNIN = [str(Path(sys.executable).parent / "burnin")]
if not Path(BURNIN[0]).exists():
    BURNIN = [sys.executable, "-m", "burnin.cli.main"]
AFTER_S = 2.0  # the site's stall time in these tests
INTERVAL_S = 0.25
WAIT_S = 120.0  # a failure bound only: every wait ends on an event


class Watch:
    """A running `burnin watch --dry-run` with a stall policy; its output, journal and metrics in files."""

    def __init__(self, node: SimNode, work: Path, policy: str) -> None:
        work.mkdir()
        self.node, self.state, self.metrics = node, work / "state", work / "watch.prom"
        config = work / "watch.yaml"
        config.write_text(f"stall:\n  interval_s: {INTERVAL_S}\n  after_s: {AFTER_S}\n  policy: {policy}\n")
        self.stdout_path, self.stderr_path = work / "out.txt", work / "err.txt"
        env = {**os.environ, **node.environment()}
        with self.stdout_path.open("w") as out, self.stderr_path.open("w") as err:
            self.proc = subprocess.Popen(
                [*BURNIN, "watch", "--dry-run", "--node", node.name, "--state-dir", str(self.state), "--config",
                 str(config), "--metrics", str(self.metrics)],
                env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL)

    def out(self) -> str:
        return self.stdout_path.read_text()

    def journal(self, kind: str = "stall") -> list[dict]:  # type: ignore[type-arg]
        path = self.state / "events.jsonl"
        entries = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
        return [e for e in entries if e["kind"] == kind]

    def metric(self, name: str) -> float | None:
        try:
            text = self.metrics.read_text()
        except FileNotFoundError:
            return None
        for line in text.splitlines():
            if line.startswith(f"burnin_watch_{name}{{"):
                return float(line.rsplit(" ", 1)[1])
        return None

    def last_change(self) -> float:
        """When the watch last saw the counters change (0: never)."""
        return self.metric("ib_counters_last_change_timestamp_seconds") or 0.0

    def wait_for_change_after(self, at: float) -> None:
        self.wait_for(f"a counter change seen after {at:.3f}", lambda: self.last_change() > at)

    def wait_for_stall(self) -> None:
        self.wait_for("the stall", lambda: bool(self.journal()))

    def watched_s(self) -> float:
        """How long the detector has sampled without a break (its metrics)."""
        last = self.metric("stall_sample_timestamp_seconds")
        since = self.metric("stall_watched_since_timestamp_seconds")
        return 0.0 if last is None or since is None else last - since

    def wait_for(self, what: str, check: Callable[[], bool]) -> None:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            if check():
                return
            if self.proc.poll() is not None:
                pytest.fail(f"watch exited {self.proc.returncode} waiting for {what}: {self.stderr_path.read_text()}")
            time.sleep(0.05)
        pytest.fail(f"no {what} within {WAIT_S:g} s; stdout: {self.out()!r}; stderr: {self.stderr_path.read_text()!r}")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=30)


@pytest.fixture
def nodes(tmp_path: Path) -> Callable[[int], list[SimNode]]:
    topology = find_topology("hgx-h100-8gpu")

    def make(count: int) -> list[SimNode]:
        return [build_node(tmp_path / f"sim0{i}", topology, f"sim0{i}") for i in range(1, count + 1)]

    return make


@pytest.fixture
def watch(tmp_path: Path) -> Iterator[Callable[..., Watch]]:
    started: list[Watch] = []

    def start(node: SimNode, policy: str = "alert") -> Watch:
        w = Watch(node, tmp_path / f"watch-{node.name}-{len(started)}", policy)
        started.append(w)
        return w

    yield start
    for w in started:
        w.stop()


def test_a_collective_that_stalls_is_recorded_and_alerted_and_its_end_too(
        nodes: Callable[[int], list[SimNode]], watch: Callable[..., Watch]) -> None:
    (node,) = nodes(1)
    apply_fault(node.dir, "job-running")
    with TrafficPump([node.dir]) as pump:
        w = watch(node)
        w.wait_for("the job's traffic", lambda: w.last_change() > 0)
        assert w.metric("job_running") == 1
        pump.pause(node.dir)
        apply_fault(node.dir, "job-stalled")  # utilisation 100%, power at idle, counters frozen
        w.wait_for("the stall", lambda: bool(w.journal()))
    (entry,) = w.journal()
    assert (entry["check"], entry["class"], entry["action"], entry["source"]) == ("NCCL-05", "record", "record",
                                                                                 "sampler")
    details = entry["stall"]
    assert details["found_at"] - details["since"] >= AFTER_S  # frozen for the configured time first
    assert details["counters_changed_after"] < details["counters_changed_at"] <= details["since"]
    assert all(g["utilisation_pct"] == 100 and g["power_w"] <= 75 and g["processes"] == 1 for g in details["gpus"])
    # the daemon journals an action before it prints it: the printed line is an event of its own
    w.wait_for("the alert line", lambda: "ALERT NCCL-05" in w.out())
    assert "ALERT NCCL-05 collective stalled: 8 GPUs at 100% utilisation" in w.out()
    assert "scontrol" not in w.out()  # alert: the stuck rank's node is often not the faulty one
    assert w.metric("stall_active") == 1 and w.metric("stalls_total") == 1
    clear_faults(node.dir)  # the job ends
    w.wait_for("the stall's end", lambda: bool(w.journal("stall-ended")))
    assert w.journal("stall-ended")[0]["stall"]["why"] == "no job on the node any more"
    assert w.stop() == 0


def test_under_the_drain_policy_a_stall_drains_the_node(nodes: Callable[[int], list[SimNode]],
                                                        watch: Callable[..., Watch]) -> None:
    (node,) = nodes(1)
    apply_fault(node.dir, "job-stalled")
    w = watch(node, "drain")
    w.wait_for("the stall", lambda: bool(w.journal()))
    w.wait_for("the drain line", lambda: "DRAIN NCCL-05" in w.out())
    (entry,) = w.journal()
    assert (entry["action"], entry["out_of_pool"], entry["dry_run"]) == ("drain", True, True)
    assert entry["stall"]["counters_changed_at"] is None  # never seen moving while watched
    assert "scontrol update NodeName=sim01 State=DRAIN 'Reason=burnin: NCCL-05 collective stalled" in w.out()
    assert "scontrol requeue" not in w.out()  # drained, not evicted: the job is not requeued by the watch


@pytest.mark.parametrize("job", [None, "job-running"])
def test_no_job_or_a_healthy_job_is_never_flagged(nodes: Callable[[int], list[SimNode]],
                                                  watch: Callable[..., Watch], job: str | None) -> None:
    (node,) = nodes(1)
    if job:
        apply_fault(node.dir, job)
    with TrafficPump([node.dir]):
        w = watch(node)
        w.wait_for("three stall times of sampling", lambda: w.watched_s() >= 3 * AFTER_S)
    assert w.metric("job_running") == (1 if job else 0)
    assert w.journal() == [] and w.metric("stalls_total") == 0 and "NCCL-05" not in w.out()


def test_across_nodes_the_node_whose_counters_stopped_first_is_named(
        nodes: Callable[[int], list[SimNode]], watch: Callable[..., Watch],
        capsys: pytest.CaptureFixture[str]) -> None:
    sims = nodes(3)
    for node in sims:
        apply_fault(node.dir, "job-running")
    with TrafficPump([n.dir for n in sims]) as pump:
        watches = {node.name: watch(node) for node in sims}
        for w in watches.values():
            w.wait_for_change_after(0)
        stuck = sims[1]  # the stuck rank's node
        pump.pause(stuck.dir)
        apply_fault(stuck.dir, "job-stalled")
        first = watches["sim02"]
        first.wait_for_stall()
        stopped = first.journal()[0]["stall"]["counters_changed_at"]
        for name in ("sim01", "sim03"):  # the others' traffic went on after it, past burnin stalls' margin (1 s)
            w = watches[name]
            w.wait_for_change_after(stopped + 1.0)
            w.wait_for_change_after(w.last_change())  # one more: the sample before the last change is past it too
        for node in (sims[0], sims[2]):  # the peers wait on the stuck rank: their collectives stall too
            pump.pause(node.dir)
            apply_fault(node.dir, "job-stalled")
        for w in watches.values():
            w.wait_for_stall()
    assert main(["stalls", *(str(w.state) for w in watches.values())]) == 0
    out = capsys.readouterr().out
    assert "episode 1: 3 node(s) stalled" in out and "likely culprit: sim02" in out, out
