"""``--dry-run`` is a launcher: it prints the plan a caller declares when it holds its nodes, the way the
launcher it stands for would start it, refuses the hold with its reason, and starts nothing, ever."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from launch_support import FakeSlurm
from test_launch_transport import Flaky

from burnin.launch.base import Each, Hold, JobSpec, Launcher, NodeCommand, Note, fan_out
from burnin.launch.dryrun import DryRunLauncher
from burnin.launch.local import LocalLauncher
from burnin.launch.log import CommandLog
from burnin.launch.slurm import SlurmLauncher
from burnin.launch.ssh import TransportLauncher
from burnin.transport.slurm_jobs import SlurmJobs

HOLD = Hold("fabric", "the fabric phase", 600)
PLAN = (Note("fabric: per-node runs"), Each(("n1", "n2"), ("nvbandwidth", "-i", "3"), 60),
        NodeCommand("n1", ("torchrun", "--nnodes=2"), 60), JobSpec(("n1", "n2"), ("all_reduce_perf",), 60))


def test_over_a_transport_the_plan_is_printed_node_by_node_and_nothing_starts(tmp_path: Path) -> None:
    transport = Flaky("none")
    said: list[str] = []
    dry = DryRunLauncher(TransportLauncher(transport, name="ssh", log=CommandLog(tmp_path / "log")), said.append,
                         "dry run: not measured")
    launcher: Launcher = dry  # the dry run is one more implementation of the protocol
    assert launcher.hold(["n1", "n2"], HOLD, PLAN) == "dry run: not measured"
    assert said == ["# fabric: per-node runs", "[n[1-2]] nvbandwidth -i 3", "[n1] torchrun --nnodes=2",
                    "[n1] timeout -k 5 60 mpirun -np 2 -N 1 --host n1:1,n2:1 all_reduce_perf"]
    results = [*dry.everywhere(["n1"], ["x"], timeout_s=1).values(), dry.job(JobSpec(("n1",), ("z",), 1)),
               *dry.per_node([NodeCommand("n2", ("y",), 1)], job=True).values(),
               *dry.collect(["n1"], ["--sources", "nvml"], timeout_s=1).values()]
    assert {r.error for r in results} == {"dry run: not measured"} and not any(r.ok for r in results)
    assert transport.ran == [] and not (tmp_path / "log").exists()


def test_a_simulated_job_shows_its_members() -> None:
    said: list[str] = []
    inner = LocalLauncher(Flaky("none"), lambda nodes: {"MEMBERS": ",".join(nodes)})
    DryRunLauncher(inner, said.append, "why").hold(["s1", "s2"], HOLD, [JobSpec(("s1", "s2"), ("tool",), 60)])
    assert said == ["[s1] env MEMBERS=s1,s2 timeout -k 5 60 tool"]


def test_through_slurm_it_says_the_allocation_and_shows_the_steps_without_allocating() -> None:
    fake = FakeSlurm()
    said: list[str] = []
    dry = DryRunLauncher(SlurmLauncher(SlurmJobs(fake)), said.append, "why")
    assert dry.hold(["n1", "n2"], HOLD, PLAN) == "why"
    assert fake.calls == []  # not even the node states
    assert said[0] == ("# an exclusive Slurm allocation of n[1-2] (or the one burnin runs in); every step below "
                       "runs in it")
    steps = [line for line in said if line.startswith("srun ")]
    assert len(steps) == 3 and all("--jobid=<allocation>" in line for line in steps)
    assert "--nodelist=n[1-2]" in steps[0] and "--nodelist=n1 " in steps[1]


def test_holding_no_node_prints_nothing() -> None:
    said: list[str] = []
    assert DryRunLauncher(TransportLauncher(Flaky("x"), name="t"), said.append, "why").hold([], HOLD, PLAN) is None
    assert said == []


def test_fan_out_keeps_the_order_and_an_interrupt_waits_for_nothing_in_flight() -> None:
    assert fan_out([3, 1, 2], lambda n: n * 10, workers=2) == [30, 10, 20]
    release = threading.Event()

    def call(n: int) -> int:
        if n == 0:
            raise KeyboardInterrupt
        release.wait(30)  # a hung node: the interrupt must not wait for it
        return n

    try:
        with pytest.raises(KeyboardInterrupt):
            fan_out([1, 0], call, workers=2)
        assert not release.is_set()  # returned while the other call still hangs
    finally:
        release.set()
