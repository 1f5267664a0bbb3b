"""What the watch does in Slurm: drain the node, or evict it (drain + requeue its jobs, now).

Evict, in this order (docs/slurm.md, "Eviction"):

1. drain the node with ``burnin: <check id> <cause>`` (never over someone
   else's drain or down: then it is out of the pool already);
2. list the jobs running on it (``squeue``);
3. ``scontrol requeue J`` for each: Slurm kills it everywhere and puts it back
   in the queue (jobs that do not allow requeueing say so, and keep running);
4. once the job has finished completing (``PENDING``, no longer
   ``COMPLETING``), ``scontrol update JobId=J StartTime=now+3`` (:meth:`SlurmActor.release`):
   when a requeued batch job completes, Slurm sets its begin time one credential
   lifetime ahead (``cred_expire``, 120 s by default); an update sent before
   that moment is overwritten, so the watch polls the job and sends it after.
   Not ``now``: a job started in the second its old credential was revoked is
   refused by slurmd and killed (:data:`RESTART_MARGIN_S`).

Draining first matters: a job requeued off a node still in the pool could be
started again on that very node. DOWN instead of DRAIN does not hold under
``ReturnToService=2``: the node comes back as soon as its slurmd answers.

Every call has a timeout (``SlurmClient``). With ``dry_run`` nothing is run:
the commands are printed, the job loop as one shell line.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TextIO

from burnin.breaker.guard import HELD, RECORDED, guard
from burnin.gate.slurm import drain_action, drain_argv, read_nodes
from burnin.reasons import reason_checks
from burnin.text import printable
from burnin.transport.slurm import QUICK_TIMEOUT, SlurmClient, SlurmRunner


def node_jobs_argv(node: str) -> list[str]:
    """Job ids running (or starting) on ``node``, one per line."""
    return ["squeue", "--noheader", f"--nodelist={node}", "--states=RUNNING,CONFIGURING", "--format=%i"]


def requeue_argv(job: str) -> list[str]:
    return ["scontrol", "requeue", job]


def job_state_argv(job: str) -> list[str]:
    """``STATE|REASON`` of one job (``COMPLETING|...``, ``PENDING|BeginTime``)."""
    return ["squeue", "--noheader", f"--jobs={job}", "--states=all", "--format=%T|%r"]


RESTART_MARGIN_S = 3
"""Seconds between the moment the watch sees a requeued job pending and the begin time it gives the job. A job's
new launch credential must be stamped later than the revoke of its old one (slurmd refuses one stamped in the
same second, and slurmctld then kills the batch job as not startable: the job is lost, seen in the Slurm lab);
Slurm's own requeue delay (``cred_expire`` + 1 s) exists for this. A few seconds also cover the skew between
this node's clock, which ``now`` is read from, and the controller's."""


ENDED_UNSTARTED = frozenset({"FAILED", "BOOT_FAIL", "CANCELLED", "NODE_FAIL", "DEADLINE", "PREEMPTED",
                             "REVOKED", "SPECIAL_EXIT"})
"""Job states right after a release that mean the job did not run again (a launch slurmd refused ends FAILED)."""


def start_again_argv(job: str) -> list[str]:
    """Bring the begin time Slurm gives a requeued job down to a few seconds from now (:data:`RESTART_MARGIN_S`)."""
    return ["scontrol", "update", f"JobId={job}", f"StartTime=now+{RESTART_MARGIN_S}"]


@dataclass(frozen=True, slots=True)
class Step:
    command: str
    ok: bool
    detail: str = ""

    def to_json(self) -> dict[str, object]:
        return {"command": self.command, "ok": self.ok, "detail": self.detail}


@dataclass(frozen=True, slots=True)
class Outcome:
    """What an action did: its steps, whether the node is out of the pool, the jobs requeued."""

    steps: tuple[Step, ...]
    out_of_pool: bool
    requeued: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.out_of_pool and all(step.ok for step in self.steps)


class Actor(Protocol):
    """What the watch acts through: Slurm (:class:`SlurmActor`) or Kubernetes
    (:class:`burnin.watch.actions_kubernetes.KubernetesActor`), chosen by ``--gate``."""

    name: str  # what it acts through, for the watch's first line

    def out_of_pool(self) -> bool: ...

    def drain(self, reason: str) -> Outcome: ...

    def evict(self, reason: str) -> Outcome: ...

    def release(self, job: str) -> Step: ...


class SlurmActor:
    name = "Slurm"

    def __init__(self, node: str, *, client: SlurmRunner | None = None, dry_run: bool = False,
                 out: TextIO | None = None, timeout: float = QUICK_TIMEOUT, poll_s: float = 0.2) -> None:
        self.node = node
        self.poll_s = poll_s
        self.client: SlurmRunner = client or SlurmClient()
        self.dry_run = dry_run
        self.out = out
        self.timeout = timeout

    def _run(self, argv: Sequence[str]) -> tuple[Step, str]:
        result = self.client.run(list(argv), timeout=self.timeout)
        detail = "" if result.ok else printable(result.describe_failure(), limit=300)
        return Step(shlex.join(argv), result.ok, detail), result.stdout

    def _print(self, text: str) -> None:
        if self.out is not None:
            self.out.write(text + "\n")
            self.out.flush()

    def out_of_pool(self) -> bool:
        """True when the node is drained or held (down, failed); also when its state cannot be read."""
        found, _ = read_nodes([self.node], timeout=self.timeout, client=self.client)
        info = found.get(self.node)
        return info is None or info.drained or not info.schedulable

    def drain(self, reason: str) -> Outcome:
        """Drain with a burnin reason unless someone else holds the node (then it is out already)."""
        argv = drain_argv(self.node, reason)
        if self.dry_run:
            self._print(shlex.join(argv))
            return Outcome((Step(shlex.join(argv), True, "dry run"),), out_of_pool=True)
        found, error = read_nodes([self.node], timeout=self.timeout, client=self.client)
        info = found.get(self.node)
        if info is None:
            why = error or "not found in Slurm"
            return Outcome((Step(f"scontrol show node {self.node}", False, printable(why, limit=300)),),
                           out_of_pool=False)
        action = drain_action(self.node, reason, info)  # the gate's own rule: never over someone else's hold
        if action.action == "keep":
            return Outcome((Step("# keep", True, printable(action.note, limit=300)),), out_of_pool=True)
        with guard([self.node], by="watch", reasons={self.node: action.note},
                   checks={self.node: reason_checks(action.note)}, client=self.client,
                   timeout=self.timeout) as admission:  # the fleet's budget (docs/breaker.md)
            if admission.held:  # stays in service; the daemon retries, so it is asked again later
                why = f"{admission.held[self.node]}; not drained, the node stays in service (burnin breaker status)"
                return Outcome((Step(f"# {HELD}", False, printable(why, limit=300)),), out_of_pool=False)
            if admission.recorded:  # a check in record mode (shadow): what it would have done, nothing more
                why = f"{admission.recorded[self.node]}: {action.note}; only recorded"
                return Outcome((Step(f"# {RECORDED}", False, printable(why, limit=300)),), out_of_pool=False)
            step, _ = self._run(action.argv)
        return Outcome((step,), out_of_pool=step.ok)

    def evict(self, reason: str) -> Outcome:
        """Drain, then requeue every job on the node and let each start again within seconds."""
        drained = self.drain(reason)
        if self.dry_run:
            listing = shlex.join(node_jobs_argv(self.node))
            line = f'for job in $({listing}); do scontrol requeue "$job"; done'
            later = ('# then, for each job once it is PENDING again (no longer COMPLETING): '
                     f'scontrol update JobId=$job StartTime=now+{RESTART_MARGIN_S}')
            self._print(line)
            self._print(later)
            return Outcome((*drained.steps, Step(line, True, "dry run"), Step(later, True, "dry run")),
                           out_of_pool=True)
        if not drained.out_of_pool:
            return drained  # never requeue off a node the scheduler could pick again
        steps = list(drained.steps)
        listed, stdout = self._run(node_jobs_argv(self.node))
        steps.append(listed)
        requeued: list[str] = []
        for job in stdout.split() if listed.ok else []:
            requeue, _ = self._run(requeue_argv(job))
            steps.append(requeue)
            if requeue.ok:
                requeued.append(job)
        return Outcome(tuple(steps), out_of_pool=True, requeued=tuple(requeued))

    def release(self, job: str, *, deadline_s: float = 120.0, poll_s: float | None = None,
                sleep: Callable[[float], None] = time.sleep) -> Step:
        """``StartTime=now+3`` for a requeued ``job`` once it has completed and waits for its begin time.

        Polls the job every ``poll_s``; sends the update when it is PENDING, and again if it
        still waits for its begin time once the margin it was given has passed (the completion may set
        the begin time after the first update); within the margin, waiting for it is what was asked.
        """
        poll_s = self.poll_s if poll_s is None else poll_s
        waited = 0.0
        updates = 0
        updated_at = 0.0
        last = ""
        while waited <= deadline_s:
            seen, stdout = self._run(job_state_argv(job))
            state, _, reason = stdout.strip().partition("|")
            last = stdout.strip() or seen.detail
            overdue = reason == "BeginTime" and waited - updated_at > RESTART_MARGIN_S + 1  # Slurm stamps seconds
            if seen.ok and state == "PENDING" and (updates == 0 or overdue) and updates < 5:
                update, _ = self._run(start_again_argv(job))
                if not update.ok:
                    return update
                updates += 1
                updated_at = waited
            elif seen.ok and updates and state != "PENDING":  # it started, or it ended without running again
                return Step(shlex.join(start_again_argv(job)), state not in ENDED_UNSTARTED,
                            f"{updates} update(s); job now {state}")
            elif seen.ok and state not in ("PENDING", "COMPLETING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD"):
                return Step(shlex.join(start_again_argv(job)), False, f"job {state or 'gone'}")  # before any update
            sleep(poll_s)
            waited += poll_s
        done = updates > 0
        return Step(shlex.join(start_again_argv(job)), done,
                    f"{updates} update(s) in {deadline_s:g} s; last seen {printable(last, limit=120)}")
