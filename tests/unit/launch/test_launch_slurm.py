"""The Slurm launcher against a fake client (the real daemons: tests/sim_slurm*): one allocation of the nodes
Slurm will run a job on, a step per node or one step over them, what is shipped sent once and removed, the
burnin-drained nodes measured inside a reservation, everything released."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

import pytest
from launch_support import STATES, FakeSlurm, node_line

from burnin.launch.base import ALLOC_WAIT_S, Each, Hold, JobSpec, NodeCommand, SrunOptions
from burnin.launch.log import CommandLog
from burnin.launch.slurm import STDIN_FROM_FILE, SlurmLauncher, Triage
from burnin.transport.base import CommandResult
from burnin.transport.slurm import PER_NODE_TASK
from burnin.transport.slurm_jobs import SlurmJobs

SOAK = Hold("soak", "the soak", 3 * 3600 + 600, wait_s=30, tasks_per_node=1, collects=True)


def _held(fake: FakeSlurm, tmp_path: Path, nodes: Sequence[str] = ("n1", "n2", "n3"),
          how: Hold = SOAK) -> tuple[SlurmLauncher, str | None]:
    launcher = SlurmLauncher(SlurmJobs(fake), log=CommandLog(tmp_path / "slurm-commands.log"))
    return launcher, launcher.hold(nodes, how)


def test_one_allocation_of_the_nodes_slurm_runs_jobs_on_and_the_others_say_why(tmp_path: Path) -> None:
    fake = FakeSlurm(STATES)
    launcher, failure = _held(fake, tmp_path)
    assert failure is None and fake.tools() == ["scontrol", "salloc", "sbcast"]
    salloc = fake.calls[1]
    assert "--exclusive" in salloc and "--nodelist=n[1-2]" in salloc and "--time=190" in salloc
    assert fake.calls[2][-1].startswith("/tmp/burnin-soak-42-") and fake.calls[2][-1].endswith("-collector.pyz")
    refused = launcher.collect(["n3"], ["--sources", "nvml"], timeout_s=10)["n3"]
    assert refused.error == "Slurm will start no job on n3: State=IDLE+DRAIN, Reason='bad dimm'"
    assert not launcher.per_node([NodeCommand("n3", ("stress-ng",), 5)])["n3"].ok
    assert len(fake.calls) == 3  # nothing was started for the refused node
    log = (tmp_path / "slurm-commands.log").read_text()
    assert "$ salloc --no-shell" in log and "-> exit 0 in" in log


def test_a_step_per_node_and_the_input_shipped_once(tmp_path: Path) -> None:
    fake = FakeSlurm(STATES)
    launcher, _ = _held(fake, tmp_path)
    fake.calls.clear()
    for _ in range(2):
        commands = [NodeCommand(n, ("python3", "-", "60"), 60, stdin=b"print('burn')\n") for n in ("n1", "n2")]
        results = launcher.per_node(commands)
        assert {n: (r.ok, r.argv, r.stdout) for n, r in results.items()} == {
            "n1": (True, ("python3", "-", "60"), "ran on n1\n"), "n2": (True, ("python3", "-", "60"), "ran on n2\n")}
    assert fake.tools() == ["sbcast", "srun", "srun", "srun", "srun"]
    shipped = fake.calls[0][-1]
    assert shipped.startswith("/tmp/burnin-soak-42-") and shipped.endswith("-stdin")
    step = fake.calls[1]
    assert step[:2] == ["srun", "--jobid=42"] and "--label" not in step and "--mpi=none" in step
    assert step[step.index("sh"):] == ["sh", "-c", STDIN_FROM_FILE, "sh", shipped, "python3", "-", "60"]


def test_the_local_copy_of_a_shipped_file_lives_only_while_sbcast_reads_it(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A controller killed (SIGKILL) later in the run leaves nothing in its TMPDIR."""
    scratch_root = tmp_path / "tmp"
    scratch_root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch_root))
    read: list[bytes] = []

    class Reading(FakeSlurm):
        def run(self, argv: Sequence[str], *, timeout: float = 10.0) -> CommandResult:
            if argv[0] == "sbcast":
                read.append(Path(argv[-2]).read_bytes())  # there while sbcast runs
            return super().run(argv, timeout=timeout)

    launcher, failure = _held(Reading(STATES), tmp_path)
    assert failure is None and list(scratch_root.iterdir()) == []  # the collector shipped, its copy gone
    launcher.per_node([NodeCommand("n1", ("python3", "-"), 60, stdin=b"print('burn')\n")])
    assert len(read) == 2 and read[1] == b"print('burn')\n"
    assert list(scratch_root.iterdir()) == []  # before anything is released


def test_the_collector_is_one_labelled_step_split_per_node(tmp_path: Path) -> None:
    fake = FakeSlurm("\n".join([node_line("n1"), node_line("n2")]))
    launcher, _ = _held(fake, tmp_path, ("n1", "n2"))
    fake.calls.clear()
    results = launcher.collect(["n1", "n2"], ["--sources", "nvml"], timeout_s=20)
    assert [r.ok for r in results.values()] == [True, True] and '"from": "n2"' in results["n2"].stdout
    assert fake.tools() == ["srun-labelled"] and "--nodelist=n[1-2]" in fake.calls[0]
    assert results["n1"].argv[:1] == ("python3",)


def test_release_removes_what_was_shipped_then_cancels_the_allocation(tmp_path: Path) -> None:
    fake = FakeSlurm(STATES)
    launcher, _ = _held(fake, tmp_path)
    launcher.per_node([NodeCommand("n1", ("python3", "-"), 5, stdin=b"x")])
    fake.calls.clear()
    launcher.close()
    assert fake.tools() == ["srun", "scancel"]
    removed = fake.calls[0][fake.calls[0].index("rm"):]
    assert removed[:2] == ["rm", "-f"] and len(removed) == 4
    assert all(path.startswith("/tmp/burnin-soak-42-") for path in removed[2:])
    assert fake.calls[1] == ["scancel", "42"]
    after = launcher.per_node([NodeCommand("n1", ("true",), 5)])["n1"]
    assert after.error is not None and "holds no Slurm allocation" in after.error


class _ExpiringSlurm(FakeSlurm):
    """Every clean-up step refused while ``expired`` is set: the job was preempted (or cancelled) first."""

    expired = True

    def run(self, argv: Sequence[str], *, timeout: float = 10.0) -> CommandResult:
        if self.expired and argv[0] == "srun" and "rm" in argv:
            self.calls.append(list(argv))
            return CommandResult("", tuple(argv), 1, "", "srun: error: Slurm job 42 has expired", 0.1)
        return super().run(argv, timeout=timeout)


def test_what_a_job_ended_too_early_to_remove_goes_with_the_next_job_of_that_node(tmp_path: Path) -> None:
    fake = _ExpiringSlurm(STATES)
    jobs = SlurmJobs(fake)  # one run's launchers share it (a sweep's job per node)
    log = CommandLog(tmp_path / "slurm-commands.log")
    first = SlurmLauncher(jobs, log=log)
    assert first.hold(["n1"], SOAK) is None
    first.close()
    shipped = fake.calls[-2][fake.calls[-2].index("rm") + 2:]
    assert len(shipped) == 1 and shipped[0].startswith("/tmp/burnin-soak-42-")
    assert jobs.leftovers.remaining() == {"n1": shipped}
    said = (tmp_path / "slurm-commands.log").read_text()
    assert f"left on n1 until a later job of theirs removes it: {shipped[0]}" in said
    elsewhere = SlurmLauncher(jobs, log=log)  # a job on another node leaves n1's file alone
    assert elsewhere.hold(["n2"], Hold("fabric", "the fabric phase", 600)) is None
    fake.calls.clear()
    elsewhere.close()
    assert fake.tools() == ["scancel"] and jobs.leftovers.remaining() == {"n1": shipped}
    fake.expired = False
    again = SlurmLauncher(jobs, log=log)
    assert again.hold(["n1"], SOAK) is None
    fake.calls.clear()
    again.close()
    removed = fake.calls[0][fake.calls[0].index("rm") + 2:]
    assert fake.tools() == ["srun", "scancel"] and shipped[0] in removed and len(removed) == 2
    assert jobs.leftovers.remaining() == {}


def test_no_allocation_and_no_schedulable_node_are_one_line_each(tmp_path: Path) -> None:
    fake = FakeSlurm(STATES, salloc=False)
    launcher, failure = _held(fake, tmp_path)
    assert failure is not None and failure.startswith("no Slurm allocation for the soak: salloc exited 1: salloc:")
    launcher.close()
    assert fake.tools() == ["scontrol", "salloc"]
    _, failure = _held(FakeSlurm(STATES), tmp_path, ("n3",))
    assert failure == ("no node of the soak can run a Slurm job: Slurm will start no job on n3: State=IDLE+DRAIN, "
                       "Reason='bad dimm'")
    _, failure = _held(FakeSlurm(STATES, sbcast_ok=False), tmp_path)
    assert failure is not None and failure.startswith("cannot ship the collector to the nodes of the soak: sbcast")


def test_one_step_over_the_nodes_and_a_job_of_every_rank(tmp_path: Path) -> None:
    fake = FakeSlurm(STATES)
    launcher, _ = _held(fake, tmp_path, ("n1", "n2"), Hold("fabric", "the fabric phase", 600))
    fake.calls.clear()
    options = SrunOptions(gpus_per_node=8, extra=("--qos=x",))
    results = launcher.everywhere(["n1", "n2"], ["nvbandwidth", "-i", "3"], timeout_s=60, srun=options)
    assert [r.ok for r in results.values()] == [True, True]
    (step,) = fake.calls
    assert PER_NODE_TASK in step and "--mpi=none" in step and "--gpus-per-node=8" in step and "--qos=x" in step
    assert fake.timeouts[-1] == 60 + 30.0
    job = launcher.job(JobSpec(("n1", "n2"), ("all_reduce_perf",), 60, ranks_per_node=4, env={"A": "1"},
                               srun=SrunOptions(mpi="pmi2")))
    argv = fake.calls[-1]
    assert job.node == "n1" and argv[:2] == ["srun", "--jobid=42"] and "--ntasks=8" in argv
    assert "--mpi=pmi2" in argv and "--kill-on-bad-exit=1" in argv and "--label" not in argv
    assert argv[-7:] == ["env", "A=1", "timeout", "-k", "5", "60", "all_reduce_perf"]


def test_inside_the_allocation_burnin_runs_in_nothing_is_allocated_or_cancelled(tmp_path: Path) -> None:
    fake = FakeSlurm(STATES)
    launcher = SlurmLauncher(SlurmJobs(fake, job_id="99"))
    assert launcher.hold(["n1", "n2"], Hold("fabric", "the fabric phase", 600)) is None
    launcher.everywhere(["n1", "n2"], ["true"], timeout_s=5)
    launcher.close()
    assert fake.tools() == ["scontrol", "srun-labelled"] and "--jobid=99" in fake.calls[1]


class Drainable(FakeSlurm):
    """Node states that ``scontrol update`` changes."""

    def __init__(self, states: dict[str, str]) -> None:
        super().__init__()
        self.states = states

    def run(self, argv: Sequence[str], *, timeout: float = 10.0) -> CommandResult:
        if list(argv[:4]) == ["scontrol", "--oneliner", "show", "node"]:
            self.nodes = "".join(f"NodeName={n} {s}\n" for n, s in self.states.items())
        elif list(argv[:2]) == ["scontrol", "update"]:
            node = argv[2].split("=", 1)[1]
            self.states[node] = ("State=IDLE" if argv[3] == "State=RESUME" else f"State=IDLE+DRAIN {argv[4]} [root@t]")
        return super().run(argv, timeout=timeout)


def test_burnin_drained_nodes_are_measured_in_a_reservation_and_drained_again(tmp_path: Path) -> None:
    drained = "State=IDLE+DRAIN Reason=burnin: NCCL-05 wrong values [root@t]"
    fake = Drainable({"sim01": "State=IDLE", "sim02": drained, "sim03": "State=IDLE+DRAIN Reason=dimm [alice@t]"})
    launcher = SlurmLauncher(SlurmJobs(fake, recheck_drained=True))
    assert launcher.hold(["sim01", "sim02", "sim03"], Hold("fabric", "the fabric phase", 600)) is None
    launcher.close()
    calls = [" ".join(c) for c in fake.calls if c[:2] != ["scontrol", "--oneliner"]]
    name = calls[0].split("ReservationName=")[1].split()[0]
    assert calls[0].startswith("scontrol create reservation") and "Nodes=sim[01-02]" in calls[0]
    assert "Flags=MAINT,IGNORE_JOBS" in calls[0] and name.startswith("burnin-fabric-")
    assert calls[1:] == [
        "scontrol update NodeName=sim02 State=RESUME",
        next(c for c in calls if c.startswith("salloc")),
        "scancel 42",
        "scontrol update NodeName=sim02 State=DRAIN Reason=burnin: NCCL-05 wrong values",
        f"scontrol delete ReservationName={name}",
    ]
    assert f"--reservation={name}" in calls[2] and "--nodelist=sim[01-02]" in calls[2]  # sim03: someone else's
    assert fake.states["sim03"] == "State=IDLE+DRAIN Reason=dimm [alice@t]"


def test_without_the_gate_a_burnin_drained_node_is_refused_with_how_to_recheck_it(tmp_path: Path) -> None:
    fake = Drainable({"sim01": "State=IDLE", "sim02": "State=IDLE+DRAIN Reason=burnin: IB-01 down [root@t]"})
    launcher = SlurmLauncher(SlurmJobs(fake))
    assert launcher.hold(["sim01", "sim02"], Hold("fabric", "the fabric phase", 600)) is None
    refused = launcher.everywhere(["sim02"], ["true"], timeout_s=5)["sim02"]
    assert refused.error is not None and refused.error.endswith("; run with --gate slurm to recheck a node burnin "
                                                                "drained")
    assert not any("reservation" in " ".join(c) or c[:2] == ["scontrol", "update"] for c in fake.calls)


def test_a_dispatcher_holds_nodes_it_sorted_itself(tmp_path: Path) -> None:
    fake = FakeSlurm(STATES)
    launcher = SlurmLauncher(SlurmJobs(fake))
    assert launcher.hold_triaged(Triage(["n1"]), Hold("collector", "the collector", 60,
                                                           wait_s=ALLOC_WAIT_S)) is None
    assert fake.tools() == ["salloc"] and "--exclusive" in fake.calls[0]


@pytest.mark.parametrize("exclusive", [True, False])
def test_a_dry_run_shows_the_allocation_it_would_make(exclusive: bool) -> None:
    launcher = SlurmLauncher(SlurmJobs(FakeSlurm()))
    text = launcher.describe_hold(["n1", "n2"], Hold("x", "y", 60, exclusive=exclusive))
    assert text is not None and text.startswith("an exclusive" if exclusive else "a Slurm") and "n[1-2]" in text
    ((where, argv),) = launcher.describe(Each(("n1", "n2"), ("nvbandwidth",), 60))
    assert where == "" and "--jobid=<allocation>" in argv and "--nodelist=n[1-2]" in argv


class Labelled(FakeSlurm):
    """A per-node step whose tasks printed what ``steps`` says (srun's own lines on stderr)."""

    def __init__(self, stdout: str, stderr: str = "", status: int | None = 0, timed_out: bool = False) -> None:
        super().__init__()
        self.step = CommandResult("ctl", ("srun",), status, stdout, stderr, 2.0, timed_out=timed_out)

    def run(self, argv: Sequence[str], *, timeout: float = 10.0) -> CommandResult:
        if argv[0] == "srun":
            self.calls.append(list(argv))
            return self.step
        return super().run(argv, timeout=timeout)


def labelled(*tasks: tuple[int, str, list[str], int | None]) -> str:
    lines = []
    for task, node, body, status in tasks:
        lines += [f"{task}: ", f"{task}: @burnin-node {node}@", *(f"{task}: {b}" for b in body)]
        if status is not None:
            lines += [f"{task}: ", f"{task}: @burnin-exit {status}@"]
    return "\n".join(lines) + "\n"


def test_a_per_node_step_keeps_each_nodes_lines_and_exit_and_says_what_srun_said_of_a_missing_one() -> None:
    fake = Labelled(labelled((1, "sim02", ["# nThread 1", "     8     2  float"], 0), (0, "sim01", ["a", "b"], 3)),
                    stderr="srun: error: sim03: task 2: Exited with exit code 1\n")
    launcher = SlurmLauncher(SlurmJobs(fake, job_id="5"))
    split = launcher.everywhere(["sim01", "sim02", "sim03"], ["nvbandwidth"], timeout_s=60)
    assert split["sim02"].stdout == "# nThread 1\n     8     2  float\n" and split["sim02"].exit_status == 0
    assert split["sim01"].exit_status == 3 and split["sim01"].argv == ("nvbandwidth",)
    assert split["sim03"].error is not None and "sim03: task 2" in split["sim03"].error


def test_a_task_cut_off_keeps_what_it_printed_and_says_srun_timed_out() -> None:
    fake = Labelled(labelled((0, "sim01", ["row 1", "row 2"], None)), status=None, timed_out=True)
    split = SlurmLauncher(SlurmJobs(fake, job_id="5")).everywhere(["sim01"], ["all_reduce_perf"], timeout_s=60)
    assert split["sim01"].exit_status is None and split["sim01"].timed_out
    assert "row 2" in split["sim01"].stdout and "srun timed out" in (split["sim01"].error or "")


class _CancelledSlurm(FakeSlurm):
    """Job 42 cancelled under its steps: every step fails, ``scontrol show job 42`` says CANCELLED."""

    cancelled = True

    def run(self, argv: Sequence[str], *, timeout: float = 10.0) -> CommandResult:
        if argv[:3] == ["scontrol", "show", "job"] or argv[:4] == ["scontrol", "--oneliner", "show", "job"]:
            self.calls.append(list(argv))
            state = "CANCELLED" if self.cancelled else "RUNNING"
            return CommandResult("", tuple(argv), 0, f"JobId=42 JobName=burnin-fabric JobState={state} "
                                 "Reason=None Dependency=(null)\n", "", 0.1)
        if self.cancelled and argv[0] == "srun":
            self.calls.append(list(argv))
            return CommandResult("", tuple(argv), 1, "", "srun: error: Slurm job 42 has expired", 0.1)
        return super().run(argv, timeout=timeout)


def test_an_allocation_that_ended_under_failed_steps_is_said_once_per_hold_with_its_nodes(tmp_path: Path) -> None:
    fake = _CancelledSlurm(STATES)
    launcher, failure = _held(fake, tmp_path, ("n1", "n2"), Hold("fabric", "the fabric phase", 600,
                                                                 measures=("fabric", "nccl_runtime")))
    assert failure is None
    assert not launcher.per_node([NodeCommand("n1", ("ib_write_bw",), 5)])["n1"].ok
    assert launcher.ended_under() == {}  # asked when the hold is released, not at every failed step
    launcher.close()
    asked = [call for call in fake.calls if call[0] == "scontrol" and "job" in call]
    assert len(asked) == 1, fake.calls
    assert launcher.ended_under() == dict.fromkeys(("n1", "n2"), "job 42 CANCELLED during the fabric phase")
    assert launcher.ended_measures() == dict.fromkeys(("n1", "n2"), frozenset({"fabric", "nccl_runtime"}))
    # the next hold of the same launcher measures something else, and ends too: each node keeps both
    fake.calls.clear()
    launcher2_failure = launcher.hold(["n2"], Hold("megatron", "the megatron phase", 600, measures=("megatron",)))
    assert launcher2_failure is None
    assert not launcher.per_node([NodeCommand("n2", ("torchrun",), 5)])["n2"].ok
    launcher.close()
    assert launcher.ended_measures() == {"n1": frozenset({"fabric", "nccl_runtime"}),
                                         "n2": frozenset({"fabric", "nccl_runtime", "megatron"})}
    assert "# the allocation ended: job 42 CANCELLED" in (tmp_path / "slurm-commands.log").read_text()


def test_a_hold_whose_steps_all_answered_or_whose_job_still_runs_ended_nothing(tmp_path: Path) -> None:
    fake = _CancelledSlurm(STATES)
    fake.cancelled = False  # every step answers: Slurm is not asked
    launcher, _ = _held(fake, tmp_path, ("n1", "n2"), Hold("fabric", "the fabric phase", 600))
    assert launcher.per_node([NodeCommand("n1", ("true",), 5)])["n1"].ok
    launcher.close()
    assert launcher.ended_under() == {} and not [c for c in fake.calls if c[0] == "scontrol" and "job" in c]
    failing = _CancelledSlurm(STATES)  # a step failed on its own; the job still runs when asked
    launcher, _ = _held(failing, tmp_path, ("n1", "n2"), Hold("fabric", "the fabric phase", 600))
    assert not launcher.per_node([NodeCommand("n1", ("false",), 5)])["n1"].ok
    failing.cancelled = False
    launcher.close()
    assert launcher.ended_under() == {} and [c for c in failing.calls if c[0] == "scontrol" and "job" in c]


def test_the_allocation_burnin_runs_in_that_ended_under_its_steps_is_said_too(tmp_path: Path) -> None:
    """Inside salloc/sbatch (job 42 is the one burnin runs in): cancelled under the steps, it is asked about as
    one burnin took itself."""
    fake = _CancelledSlurm(STATES)
    launcher = SlurmLauncher(SlurmJobs(fake, job_id="42"), log=CommandLog(tmp_path / "slurm-commands.log"))
    assert launcher.hold(["n1", "n2"], Hold("fabric", "the fabric phase", 600)) is None
    assert "salloc" not in fake.tools()
    assert not launcher.per_node([NodeCommand("n2", ("ib_write_bw",), 5)])["n2"].ok
    launcher.close()
    assert launcher.ended_under() == dict.fromkeys(("n1", "n2"), "job 42 CANCELLED during the fabric phase")


def test_an_end_the_caller_already_asked_about_is_not_asked_again_on_release(tmp_path: Path) -> None:
    """The soak asks (`ended()`) once a round reached nobody, then closes its launcher: one `scontrol show job`,
    one note in the log."""
    fake = _CancelledSlurm(STATES)
    launcher, _ = _held(fake, tmp_path, ("n1", "n2"), Hold("soak", "the soak", 600))
    assert not launcher.per_node([NodeCommand("n1", ("gpu_burn",), 5)])["n1"].ok
    assert launcher.ended() == "job 42 CANCELLED"
    launcher.close()
    assert len([call for call in fake.calls if call[0] == "scontrol" and "job" in call]) == 1, fake.calls
    assert (tmp_path / "slurm-commands.log").read_text().count("# the allocation ended:") == 1
    assert launcher.ended_under() == dict.fromkeys(("n1", "n2"), "job 42 CANCELLED during the soak")
