"""What the sweep reads from Slurm: job states, the partition's size, host names, its own jobs (pure parsers)."""

from __future__ import annotations

from burnin.sweep.slurm_state import (
    PartitionInfo,
    idle,
    outside,
    parse_host_names,
    parse_jobs_named,
    parse_partition,
)
from burnin.transport.base import CommandResult
from burnin.transport.slurm_jobs import RunCommand, SlurmNode, job_ended, parse_show_job

# As slurmctld 22.05 printed them in the lab (cut to the fields that matter and a few around them).
PREEMPTED = ("JobId=1 JobName=burnin-sweep-x UserId=root(0) GroupId=root(0) Priority=4294901759 Nice=0 "
             "JobState=PREEMPTED Reason=None Dependency=(null) Requeue=1 Restarts=0 BatchFlag=0 Partition=sweep "
             "ReqNodeList=sim01 ExcNodeList=(null) NodeList=sim01 BatchHost=sim01 NumNodes=1")
RUNNING = ("JobId=11 JobName=burnin-sweep-d8-sim01-d9 UserId=root(0) JobState=RUNNING Reason=None "
           "Partition=sweep NodeList=sim01 NumNodes=1")


def test_job_state_of_the_asked_job_only() -> None:
    text = PREEMPTED + "\n" + RUNNING + "\n"
    preempted = parse_show_job(text, "1")
    assert preempted is not None and preempted.state == "PREEMPTED" and not preempted.running
    assert preempted.nodes == "sim01"
    running = parse_show_job(text, "11")
    assert running is not None and running.running
    assert parse_show_job(text, "12") is None
    assert parse_show_job("slurm_load_jobs error: Invalid job id specified", "1") is None


def _answer(stdout: str = "", stderr: str = "", status: int = 0) -> RunCommand:
    def run(argv: list[str], timeout: float) -> CommandResult:
        assert argv == ["scontrol", "--oneliner", "show", "job", "1"] and timeout > 0
        return CommandResult("", tuple(argv), status, stdout, stderr, 0.01)
    return run


def test_a_job_ends_only_when_slurm_says_so() -> None:
    """What stops a soak whose allocation went: a state no step runs in, or a job Slurm no longer knows; never
    a controller that did not answer (that ends no job)."""
    cancelled = PREEMPTED.replace("JobState=PREEMPTED", "JobState=CANCELLED")
    assert job_ended(_answer(cancelled), "1") == "job 1 CANCELLED"
    assert job_ended(_answer(PREEMPTED), "1") == "job 1 PREEMPTED"
    completing = PREEMPTED.replace("JobState=PREEMPTED Reason=None", "JobState=COMPLETING Reason=TimeLimit")
    assert job_ended(_answer(completing), "1") == "job 1 COMPLETING (TimeLimit)"
    for live in ("RUNNING", "CONFIGURING", "SUSPENDED"):
        assert job_ended(_answer(PREEMPTED.replace("JobState=PREEMPTED", f"JobState={live}")), "1") is None
    gone = _answer(stderr="slurm_load_jobs error: Invalid job id specified\n", status=1)
    assert job_ended(gone, "1") == "job 1 is gone (Slurm no longer knows it)"
    down = _answer(stderr="slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n", status=1)
    assert job_ended(down, "1") is None
    assert job_ended(_answer(RUNNING), "1") is None  # another job's line is no answer about this one


def test_partition_size_and_host_names() -> None:
    sweep = parse_partition("PartitionName=sweep AllowGroups=ALL Nodes=sim[01-06] TotalCPUs=12 "
                            "TotalNodes=6 SelectTypeParameters=NONE")
    assert sweep == PartitionInfo(6, "sim[01-06]")
    assert parse_partition("slurm_load_partitions: Invalid partition name specified") is None
    assert outside(["sim01", "sim06", "sim07", "gpu1"], sweep) == ["sim07", "gpu1"]
    assert outside(["gpu1"], PartitionInfo(3, "ALL")) == []
    text = ("NodeName=sim01 Arch=x86_64 NodeAddr=127.0.0.1 NodeHostName=sim01 Version=22.05.8 State=IDLE\n"
            "NodeName=gpu7 NodeAddr=10.0.0.7 NodeHostName=gpu7.cluster.local State=MIXED\n")
    assert parse_host_names(text) == {"sim01": "sim01", "gpu7": "gpu7.cluster.local"}


def test_idle_is_idle_and_nothing_else() -> None:
    assert idle(SlurmNode("n", "IDLE"))
    for state in ("MIXED", "ALLOCATED", "IDLE+DRAIN", "IDLE*", "IDLE+PLANNED", "IDLE+RESERVED", "DOWN",
                  "IDLE+COMPLETING", "IDLE+POWERING_UP"):
        assert not idle(SlurmNode("n", state)), state


def test_jobs_named_for_this_sweep_only() -> None:
    text = "12 burnin-sweep-aa-sim01-1\n13 burnin-sweep-bb-sim02-2\n14 training\n15 burnin-sweep-aa-sim03-3\n"
    assert parse_jobs_named(text, "burnin-sweep-aa-") == ["12", "15"]


def test_the_sweeps_allocation_names_its_qos_and_the_lowest_priority() -> None:
    from burnin.sweep.loop import NICE
    from burnin.transport.slurm import salloc_argv

    argv = salloc_argv(["gpu1"], job_name="burnin-sweep-x", time_limit_s=200, immediate_s=10, partition="scav",
                       exclusive=True, qos="scavenger", nice=NICE)
    assert argv[-3:] == ["--partition=scav", "--qos=scavenger", "--nice=2147483645"]
    plain = salloc_argv(["gpu1"], job_name="burnin-x", time_limit_s=200, immediate_s=10)
    assert not [a for a in plain if a.startswith(("--qos", "--nice"))]
