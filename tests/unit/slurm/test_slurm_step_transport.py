"""SlurmStepTransport: one srun step per command on one node of an allocation (argv only; the real thing runs
in tests/sim_slurm/test_slurm_storage.py)."""

from __future__ import annotations

from collections.abc import Sequence

from burnin.transport.base import CommandResult
from burnin.transport.slurm import STEP_SLACK_S, SlurmStepTransport


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[list[str], float]] = []

    def run(self, argv: Sequence[str], *, timeout: float = 10.0) -> CommandResult:
        self.calls.append((list(argv), timeout))
        return CommandResult("controller", tuple(argv), 3, "out", "err", 1.5, timed_out=False)


def test_a_command_is_one_step_on_that_node_with_its_timeout_and_env() -> None:
    client = Recorder()
    result = SlurmStepTransport(client, "42", job_name="burnin-storage").run(
        "gpu07", ["dd", "of=/mnt/x"], timeout=100, env={"A": "1"})
    ((argv, timeout),) = client.calls
    assert argv[0] == "srun" and "--jobid=42" in argv and "--nodelist=gpu07" in argv and "--nodes=1" in argv
    assert "--overlap" in argv and "--job-name=burnin-storage" in argv and "--label" not in argv
    assert argv[-4:] == ["env", "A=1", "dd", "of=/mnt/x"]
    assert timeout == 100 + STEP_SLACK_S
    # the result is the node's, for the command asked (not the srun wrapper)
    assert (result.node, result.argv, result.exit_status, result.stdout, result.stderr) == \
        ("gpu07", ("dd", "of=/mnt/x"), 3, "out", "err")


def test_input_is_refused_as_that_commands_error() -> None:
    client = Recorder()
    result = SlurmStepTransport(client, "42", job_name="j").run("gpu07", ["python3"], timeout=5, stdin=b"x")
    assert client.calls == [] and not result.ok and "takes no input" in (result.error or "")
