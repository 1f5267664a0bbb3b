"""The launch layer's argv builders: the one srun builder, the one mpirun builder, time limits, and naming a
launcher that is not there."""

from __future__ import annotations

import pytest

from burnin.launch.base import (
    Container,
    SrunOptions,
    launch_chain,
    missing_launcher,
    missing_program,
    slack,
    with_env,
    with_timeout,
)
from burnin.launch.slurm import srun_argv
from burnin.launch.ssh import mpirun_argv
from burnin.transport.base import CommandResult


def test_srun_folds_the_nodes_and_counts_tasks_per_node() -> None:
    argv = srun_argv("42", ["gpu01", "gpu02", "gpu03"], ["hostname"], time_limit_s=61, job_name="burnin-x",
                     tasks_per_node=8, kill_on_bad_exit=True)
    assert argv == ["srun", "--jobid=42", "--job-name=burnin-x", "--nodes=3", "--nodelist=gpu[01-03]",
                    "--ntasks=24", "--ntasks-per-node=8", "--kill-on-bad-exit=1", "--time=2", "--overlap",
                    "--label", "hostname"]


def test_srun_without_a_job_id_runs_in_the_allocation_it_is_in_and_takes_every_option_in_order() -> None:
    options = SrunOptions(mpi="pmix", gpus_per_node=8, gpus_per_task=1, gpu_bind="closest",
                          cpu_bind="verbose,ldoms", distribution="block:block",
                          container=Container("nvcr.io/x:1", mounts=("/a", "/b:/c"), workdir="/w", args=("--c1",)),
                          extra=("--exclusive",))
    argv = srun_argv(None, ["n1"], ["a", "b"], time_limit_s=10, job_name="j", label=False, overlap=False,
                     options=options)
    assert not any(a.startswith("--jobid") for a in argv) and "--overlap" not in argv and "--label" not in argv
    assert argv[argv.index("--time=1") + 1:] == [
        "--mpi=pmix", "--gpus-per-node=8", "--gpus-per-task=1", "--gpu-bind=closest", "--cpu-bind=verbose,ldoms",
        "--distribution=block:block", "--container-image=nvcr.io/x:1", "--container-mounts=/a,/b:/c",
        "--container-workdir=/w", "--c1", "--exclusive", "a", "b"]


def test_mpirun_places_ranks_per_node_and_passes_every_variable() -> None:
    argv = mpirun_argv(["n1", "n2"], 8, ["all_reduce_perf", "-g", "1"], env={"NCCL_DEBUG": "WARN", "A": "b=c"},
                       mpirun="/opt/ompi/bin/mpirun", args=["--bind-to", "numa"])
    assert argv == ["/opt/ompi/bin/mpirun", "-np", "16", "-N", "8", "--host", "n1:8,n2:8", "--bind-to", "numa",
                    "-x", "NCCL_DEBUG=WARN", "-x", "A=b=c", "all_reduce_perf", "-g", "1"]


def test_time_limits_and_environment_travel_inside_the_command() -> None:
    assert with_timeout(["tool"], 59.2) == ["timeout", "-k", "5", "60", "tool"]
    assert with_timeout(["tool"], 0.1, kill_after_s=10) == ["timeout", "-k", "10", "1", "tool"]
    assert with_env(["tool"], {}) == ["tool"] and with_env(["tool"], {"A": "1"}) == ["env", "A=1", "tool"]
    assert [slack(t) for t in (1, 100, 600)] == [5.0, 10.0, 30.0]


@pytest.mark.parametrize(("argv", "chain"), [
    (["timeout", "-k", "5", "60", "mpirun", "-np", "2", "x"], ["timeout", "mpirun"]),
    (["env", "A=1", "timeout", "-k", "5", "60", "/opt/bin/torchrun", "--nproc_per_node=8"],
     ["env", "timeout", "/opt/bin/torchrun"]),
    (["srun", "--jobid=1", "x"], ["srun"]),
])
def test_the_launch_chain_is_the_programs_before_the_launched_ones_options(argv: list[str], chain: list[str]) -> None:
    assert launch_chain(argv) == chain


@pytest.mark.parametrize(("status", "stderr", "expected"), [
    (127, "bash: line 1: mpirun: command not found", "mpirun not found: mpirun on n1's PATH"),
    (127, "timeout: failed to run command '/opt/x/mpirun': No such file or directory",
     "mpirun not found: /opt/x/mpirun"),
    (126, "timeout: failed to run command 'mpirun': Permission denied", "mpirun not executable: mpirun on n1's PATH"),
    (127, "all_reduce_perf: error while loading shared libraries: libnccl.so.2: not found", None),
    (1, "bash: mpirun: command not found", None),
])
def test_a_missing_launcher_is_named_and_the_program_it_was_to_start_is_not_blamed(
        status: int, stderr: str, expected: str | None) -> None:
    mpirun = "mpirun" if "/opt" not in stderr else "/opt/x/mpirun"
    result = CommandResult("n1", ("timeout", "mpirun"), status, "", stderr, 0.1)
    assert missing_launcher(result, ["timeout", "-k", "5", "60", mpirun, "-np", "2", "x"]) == expected
    assert missing_program(status, [stderr], ["timeout", mpirun], "n1") == expected
