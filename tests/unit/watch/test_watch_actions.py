"""Evict and drain in Slurm: the order of the commands, other people's drains, failures, dry run."""

from __future__ import annotations

import io

from watch_support import FakeSlurm

from burnin.watch.actions import SlurmActor

REASON = "burnin: GPU-04 gpu3 Xid 79 (GPU has fallen off the bus)"


def test_evict_drains_first_then_requeues_every_job() -> None:
    slurm = FakeSlurm(jobs=["41", "42"])
    outcome = SlurmActor("sim01", client=slurm).evict(REASON)
    assert outcome.out_of_pool and outcome.ok
    assert outcome.requeued == ("41", "42")
    # the node's state, the fleet's drains for the breaker's budget, the drain, the jobs, their requeues
    assert slurm.commands() == ["scontrol --oneliner", "scontrol --oneliner", "scontrol update",
                                "squeue --noheader", "scontrol requeue", "scontrol requeue"]
    assert slurm.calls[2] == ["scontrol", "update", "NodeName=sim01", "State=DRAIN", f"Reason={REASON}"]
    assert slurm.jobs == [] and slurm.state.endswith("+DRAIN") and slurm.reason == REASON


def test_a_job_that_refuses_requeue_is_reported_and_the_others_go() -> None:
    slurm = FakeSlurm(jobs=["41", "42"], not_requeueable={"41"})
    outcome = SlurmActor("sim01", client=slurm).evict(REASON)
    assert outcome.requeued == ("42",)
    assert outcome.out_of_pool and not outcome.ok
    failed = [step for step in outcome.steps if not step.ok]
    assert [step.command for step in failed] == ["scontrol requeue 41"]
    assert "presently disabled" in failed[0].detail


def test_someone_elses_drain_is_kept_but_the_jobs_still_leave_the_broken_node() -> None:
    slurm = FakeSlurm(state="MIXED+DRAIN", reason="maintenance by alice", jobs=["7"])
    outcome = SlurmActor("sim01", client=slurm).evict(REASON)
    assert slurm.reason == "maintenance by alice"
    assert not any(call[:3] == ["scontrol", "update", "NodeName=sim01"] for call in slurm.calls)
    assert outcome.requeued == ("7",)


def test_unreadable_node_is_neither_drained_nor_its_jobs_requeued() -> None:
    slurm = FakeSlurm(jobs=["7"], fail={"scontrol --oneliner"})
    outcome = SlurmActor("sim01", client=slurm).evict(REASON)
    assert not outcome.out_of_pool and outcome.requeued == ()
    assert slurm.commands() == ["scontrol --oneliner"]
    assert "Unable to contact" in outcome.steps[0].detail


def test_failed_drain_never_requeues() -> None:
    slurm = FakeSlurm(jobs=["7"], fail={"scontrol update"})
    outcome = SlurmActor("sim01", client=slurm).evict(REASON)
    assert not outcome.out_of_pool
    assert "scontrol requeue" not in slurm.commands()


def test_drain_only_drains() -> None:
    slurm = FakeSlurm(jobs=["7"])
    outcome = SlurmActor("sim01", client=slurm).drain("burnin: GPU-03 gpu1 row remapping failure")
    assert outcome.ok and slurm.commands() == ["scontrol --oneliner", "scontrol --oneliner", "scontrol update"]
    assert slurm.jobs == ["7"]


def test_release_waits_for_the_job_to_complete_then_starts_it_seconds_later() -> None:
    slurm = FakeSlurm(job_states={"41": ["COMPLETING|None", "COMPLETING|None", "PENDING|BeginTime",
                                         "PENDING|None", "RUNNING|None"]})
    naps: list[float] = []
    step = SlurmActor("sim01", client=slurm).release("41", sleep=naps.append)
    assert step.ok, step.detail
    updates = [call for call in slurm.calls if call[:2] == ["scontrol", "update"]]
    # not StartTime=now: a launch credential stamped in the second the old one was revoked is refused by slurmd,
    # and slurmctld kills the batch job (seen in the Slurm lab); Slurm's own delay (cred_expire + 1 s) is for it
    assert updates == [["scontrol", "update", "JobId=41", "StartTime=now+3"]]
    assert len(naps) == 4  # polled until it was pending, then until it ran


def test_release_updates_again_when_completion_set_the_begin_time_after_the_first_update() -> None:
    # the begin time the watch gave (3 s on) has long passed and the job still waits for one: Slurm set its own
    slurm = FakeSlurm(job_states={"41": ["PENDING|None", *["PENDING|BeginTime"] * 6, "RUNNING|None"]})
    step = SlurmActor("sim01", client=slurm).release("41", poll_s=1.0, sleep=lambda _: None)
    assert step.ok
    assert sum(call[:2] == ["scontrol", "update"] for call in slurm.calls) == 2


def test_release_waits_out_the_begin_time_it_gave_without_moving_it() -> None:
    slurm = FakeSlurm(job_states={"41": ["PENDING|None", *["PENDING|BeginTime"] * 15, "RUNNING|None"]})
    step = SlurmActor("sim01", client=slurm).release("41", poll_s=0.2, sleep=lambda _: None)
    assert step.ok and step.detail == "1 update(s); job now RUNNING"  # each update would push the start 3 s on


def test_a_release_after_which_the_job_failed_is_not_done() -> None:
    # what slurmctld does with a batch job whose launch slurmd refused ("Job credential revoked")
    slurm = FakeSlurm(job_states={"41": ["PENDING|None", "FAILED|None"]})
    step = SlurmActor("sim01", client=slurm).release("41", sleep=lambda _: None)
    assert not step.ok and step.detail == "1 update(s); job now FAILED"


def test_release_gives_up_at_its_deadline() -> None:
    slurm = FakeSlurm(job_states={"41": ["COMPLETING|None"]})
    step = SlurmActor("sim01", client=slurm).release("41", deadline_s=1.0, poll_s=0.5, sleep=lambda _: None)
    assert not step.ok and "COMPLETING" in step.detail


def test_dry_run_prints_the_commands_and_runs_nothing() -> None:
    slurm = FakeSlurm(jobs=["7"])
    out = io.StringIO()
    outcome = SlurmActor("sim01", client=slurm, dry_run=True, out=out).evict(REASON)
    assert slurm.calls == []
    lines = out.getvalue().splitlines()
    assert lines[0] == ("scontrol update NodeName=sim01 State=DRAIN "
                        "'Reason=burnin: GPU-04 gpu3 Xid 79 (GPU has fallen off the bus)'")
    assert lines[1] == ('for job in $(squeue --noheader --nodelist=sim01 --states=RUNNING,CONFIGURING '
                        '--format=%i); do scontrol requeue "$job"; done')
    assert "StartTime=now+3" in lines[2] and lines[2].startswith("#")
    assert outcome.out_of_pool and outcome.requeued == ()


def test_release_polls_until_its_deadline_inclusive() -> None:
    slurm = FakeSlurm(job_states={"41": ["COMPLETING|None"]})
    SlurmActor("sim01", client=slurm).release("41", deadline_s=1.0, poll_s=0.5, sleep=lambda _: None)
    assert sum(call[0] == "squeue" for call in slurm.calls) == 3  # at 0, 0.5 and 1.0 s


def test_release_updates_at_most_five_times() -> None:
    slurm = FakeSlurm(job_states={"41": ["PENDING|BeginTime"]})  # Slurm keeps setting the begin time
    step = SlurmActor("sim01", client=slurm).release("41", deadline_s=60.0, poll_s=0.5, sleep=lambda _: None)
    assert sum(call[:2] == ["scontrol", "update"] for call in slurm.calls) == 5
    assert step.ok and step.detail.startswith("5 update(s) in 60 s")


def test_release_that_updated_once_is_done_though_the_job_still_waits() -> None:
    slurm = FakeSlurm(job_states={"41": ["PENDING|BeginTime", "PENDING|Priority"]})
    step = SlurmActor("sim01", client=slurm).release("41", deadline_s=1.0, poll_s=0.5, sleep=lambda _: None)
    assert step.ok and step.detail.startswith("1 update(s)")


def test_release_of_a_job_gone_before_any_update_is_not_done() -> None:
    slurm = FakeSlurm(job_states={"41": ["CANCELLED|None"]})
    step = SlurmActor("sim01", client=slurm).release("41", sleep=lambda _: None)
    assert not step.ok and step.detail == "job CANCELLED"
    assert not any(call[:2] == ["scontrol", "update"] for call in slurm.calls)
