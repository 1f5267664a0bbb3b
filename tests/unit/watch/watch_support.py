"""A scripted Slurm for the watch's tests: answers scontrol/squeue from a small model of one node."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from burnin.transport.base import CommandResult


@dataclass
class FakeSlurm:
    """One node (its state and reason) and the jobs running on it; records every argv."""

    node: str = "sim01"
    state: str = "MIXED"
    reason: str = ""
    jobs: list[str] = field(default_factory=list)
    not_requeueable: set[str] = field(default_factory=set)
    job_states: dict[str, list[str]] = field(default_factory=dict)  # job -> squeue answers, in turn
    fail: set[str] = field(default_factory=set)  # argv[0:2] joined, e.g. "scontrol show"
    calls: list[list[str]] = field(default_factory=list)

    def _result(self, argv: Sequence[str], status: int, stdout: str = "", stderr: str = "") -> CommandResult:
        return CommandResult("slurm-controller", tuple(argv), status, stdout, stderr, 0.01)

    def run(self, argv: Sequence[str], *, timeout: float = 10.0) -> CommandResult:
        argv = list(argv)
        self.calls.append(argv)
        if " ".join(argv[:2]) in self.fail:
            return self._result(argv, 1, stderr="slurm_load_node error: Unable to contact slurm controller")
        if argv[:3] == ["scontrol", "--oneliner", "show"]:
            reason = f" Reason={self.reason} [root@2026-12-01T00:00:00]" if self.reason else ""
            return self._result(argv, 0, f"NodeName={self.node} Arch=x86_64 State={self.state}{reason}\n")
        if argv[:2] == ["scontrol", "update"] and argv[1:3] == ["update", f"NodeName={self.node}"]:
            self.state = "MIXED+DRAIN" if self.jobs else "IDLE+DRAIN"
            self.reason = argv[-1].removeprefix("Reason=")
            return self._result(argv, 0)
        if argv[:2] == ["scontrol", "requeue"]:
            job = argv[2]
            if job in self.not_requeueable:
                return self._result(argv, 1, stderr=f"Requeue of JobId={job} returned an error: "
                                                    "Requested operation is presently disabled")
            self.jobs.remove(job)
            self.job_states.setdefault(job, ["COMPLETING|None", "PENDING|BeginTime", "RUNNING|None"])
            return self._result(argv, 0)
        if argv[:2] == ["scontrol", "update"]:
            return self._result(argv, 0)
        if argv[0] == "squeue" and any(a.startswith("--nodelist=") for a in argv):
            return self._result(argv, 0, "".join(f"{job}\n" for job in self.jobs))
        if argv[0] == "squeue":
            job = next(a for a in argv if a.startswith("--jobs=")).removeprefix("--jobs=")
            answers = self.job_states.get(job, ["RUNNING|None"])
            answer = answers.pop(0) if len(answers) > 1 else answers[0]
            return self._result(argv, 0, answer + "\n")
        return self._result(argv, 1, stderr=f"unexpected {argv}")

    def commands(self) -> list[str]:
        return [" ".join(call[:2]) for call in self.calls]
