"""From a launch's output to the facts sections: per-rank split, real Megatron lines, NCCL errors, probe lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from burnin.facts import loads_facts
from burnin.megatron import logs
from burnin.megatron.commands import probe_launch, training_launch
from burnin.megatron.config import MegatronSettings
from burnin.megatron.record import dumps, placement_record, rank_log_files, run_record
from burnin.topology.model import Topology
from burnin.transport.base import CommandResult

WATCHDOG_1207 = (
    # NVIDIA/Megatron-LM issue #1207 quotes this watchdog message; the prefix is the one torch's
    # ProcessGroupNCCL prints before it.
    "[rank3]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600013 "
    "milliseconds before timing out."
)
TORCH_INFO = ("[rank0]:[I1206 18:34:12.715 ProcessGroupNCCL.cpp:841] [PG 0 Rank 0] ProcessGroupNCCL initialization "
              "options: NCCL version: 2.21.5, TORCH_NCCL_ASYNC_ERROR_HANDLING: 1, TIMEOUT(ms): 600000")


def _real(reference_dir: Path, name: str) -> list[str]:
    return (reference_dir / "megatron" / name).read_text().splitlines()


def _result(node: str, stdout: str, stderr: str = "", status: int | None = 0, **kw: object) -> CommandResult:
    return CommandResult(node, ("torchrun",), status, stdout, stderr, 12.5, **kw)  # type: ignore[arg-type]


def test_torchrun_output_to_record(reference_dir: Path, h100_topology: Topology) -> None:
    settings = MegatronSettings(train_iters=100, warmup_iters=10)
    launch = training_launch(settings, h100_topology, ["gpu01", "gpu02"], form="torchrun")
    real = _real(reference_dir, "mixtral-8x7b-16xh100-iterations-43-45-issue756.txt")
    first = "\n".join(["[default0]:using world size: 16", "[default0]:training ..."]) + "\n"
    second = "\n".join(f"[default7]:{line}" for line in real) + "\n" + f"[default3]:{WATCHDOG_1207}\n"
    results = {"gpu01": _result("gpu01", first, f"[default1]:{TORCH_INFO}\n"),
               "gpu02": _result("gpu02", second, "torch...ChildFailedError\n", status=1)}
    record = run_record(launch, results, settings, log_dir="megatron/multi/gpu01+gpu02")
    assert [it["iteration"] for it in record["iterations"]] == [43, 44, 45]
    assert record["iterations"][0]["tflops_per_gpu"] == 239.8 and record["iterations"][0]["total"] == 100
    assert record["exit_status"] == 1 and record["node_exits"] == {"gpu01": 0, "gpu02": 1}
    assert record["nccl_errors"] == [{"rank": 11, "line": WATCHDOG_1207}]  # node_rank 1, local rank 3
    assert record["tails"]["15"][-1] == real[-1].rstrip()[:logs.LINE_LIMIT]  # tails keep 300 characters a line
    assert record["tails"]["-1"] == ["torch...ChildFailedError"]
    assert record["world_size"] == 16 and record["tensor"] == 8 and record["global_batch_size"] == 64
    assert record["flops_per_iteration"] > 0 and loads_facts(dumps(record)) == record
    files = rank_log_files(launch, results)
    assert set(files) == {"rank-0.log", "rank-1.log", "rank-11.log", "rank-15.log", "launcher.log"}


def test_old_format_without_throughput(reference_dir: Path, h100_topology: Topology) -> None:
    settings = MegatronSettings()
    launch = training_launch(settings, h100_topology, ["gpu01"], form="srun")
    real = _real(reference_dir, "megatron-llm-iterations-122-125-no-throughput-field-issue11.txt")
    out = "\n".join(f"  7: {line}" for line in real) + "\n"
    record = run_record(launch, {"gpu01": _result("gpu01", out)}, settings)
    assert [it["tflops_per_gpu"] for it in record["iterations"]] == [None] * 4
    assert record["iterations"][0]["elapsed_ms"] == 86545.2


def test_nan_loss_is_kept_as_text(h100_topology: Topology) -> None:
    settings = MegatronSettings()
    launch = training_launch(settings, h100_topology, ["gpu01"], form="torchrun")
    line = (" [2024-04-06 02:59:36] iteration       17/      50 | consumed samples:         1088 | elapsed time per "
            "iteration (ms): 3950.2 | throughput per GPU (TFLOP/s/GPU): 430.1 | learning rate: 3.000000E-04 | "
            "global batch size:    64 | lm loss: NAN | loss scale: 1.0 | grad norm: nan | number of skipped "
            "iterations:   0 | number of nan iterations:   1 |")
    record = run_record(launch, {"gpu01": _result("gpu01", f"[default7]:{line}\n")}, settings)
    it = record["iterations"][0]
    assert it["lm_loss"] == "NAN" and it["grad_norm"] == "NAN" and it["nan"] == 1
    json.loads(dumps(record))  # no NaN constant in facts


def test_garbage_output_is_a_parse_error_not_a_crash(h100_topology: Topology) -> None:
    settings = MegatronSettings()
    launch = training_launch(settings, h100_topology, ["gpu01"], form="torchrun")
    record = run_record(launch, {"gpu01": _result("gpu01", "\x1b[31mSegmentation fault\n", status=139)}, settings)
    assert record["iterations"] == [] and "no Megatron" in record["parse_error"]
    assert record["exit_status"] == 139


@pytest.mark.parametrize(("status", "duration", "hung"), [(124, 900.0, True), (137, 910.0, True), (124, 3.0, False),
                                                         (1, 900.0, False)])
def test_the_time_limit_inside_the_command_is_a_hang(h100_topology: Topology, status: int, duration: float,
                                                     hung: bool) -> None:
    settings = MegatronSettings()
    launch = training_launch(settings, h100_topology, ["gpu01"], form="torchrun")
    result = CommandResult("gpu01", ("timeout",), status, "[default0]:training ...\n", "", duration)
    record = run_record(launch, {"gpu01": result}, settings)
    assert record["timed_out"] is hung and record["exit_status"] == (None if hung else status)


def test_hung_and_unreached_nodes(h100_topology: Topology) -> None:
    settings = MegatronSettings()
    launch = training_launch(settings, h100_topology, ["gpu01", "gpu02"], form="torchrun")
    results = {"gpu01": _result("gpu01", "[default0]:training ...\n", status=None, timed_out=True)}
    record = run_record(launch, results, settings)
    assert record["timed_out"] and record["exit_status"] is None
    assert record["error"] == "no result from gpu02"


@pytest.mark.parametrize(("line", "error"), [
    (WATCHDOG_1207, True),
    ("[E ProcessGroupNCCL.cpp:458] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=96120, "
     "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 25624887 milliseconds before timing out.", True),
    ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, "
     "unhandled system error", True),
    ("gpu01:1234:5678 [3] NCCL WARN NET/IB : Got completion from peer 10.0.0.2<45678> with error 12", True),
    (TORCH_INFO, False),
    ("NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ibp24s0:10.0.0.1<0>", False),
    (" iteration       43/     100 | consumed samples:         5504 |", False),
])
def test_nccl_error_lines(line: str, error: bool) -> None:
    assert bool(logs.nccl_errors({0: [line]})) is error


def test_srun_labels_and_cpu_bind_lines(h100_topology: Topology) -> None:
    launch = probe_launch(MegatronSettings(), h100_topology, "gpu01", form="srun")
    probe = {"rank": 0, "local_rank": 0, "cpus": "0-55,112-167", "mems": "0", "gpu_bus_id": "0000:1b:00.0"}
    out = f"0: BURNIN-PLACEMENT {json.dumps(probe)}\n1: BURNIN-PLACEMENT {{not json\n"
    err = ("0: cpu-bind=MASK - gpu01, task  0  0 [3431378]: mask 0xff00000000000000ffffffffffffff set\n"
           "srun: error: gpu01: task 2: Exited with exit code 1\n")
    record = placement_record(launch, {"gpu01": _result("gpu01", out, err)})
    assert record["ranks"] == [probe] and record["binding"] == "slurm" and record["form"] == "srun"
    assert record["cpu_bind"] == [{"node": "gpu01", "task": 0, "local_task": 0, "pid": 3431378, "bind_type": "MASK",
                                   "cpus": "0-55,112-119"}]
    assert record["problems"] == ["rank 1: unreadable probe line 'BURNIN-PLACEMENT {not json'"]
    assert record["tails"]["-1"] == ["srun: error: gpu01: task 2: Exited with exit code 1"]


def test_probe_line_with_nan_is_refused(h100_topology: Topology) -> None:
    launch = probe_launch(MegatronSettings(), h100_topology, "gpu01", form="torchrun")
    out = '[default0]:BURNIN-PLACEMENT {"rank": 0, "memory": NaN}\n'
    record = placement_record(launch, {"gpu01": _result("gpu01", out)})
    assert record["ranks"] == [] and "unreadable probe line" in record["problems"][0]


def test_logging_rank_is_the_last_with_iterations() -> None:
    ranks = {-1: ["srun: x"], 0: ["using world size"], 7: [" iteration 1/ 2 |"], 3: ["[rank3]: error"]}
    assert logs.logging_rank_text(ranks) == " iteration 1/ 2 |\n"
    assert logs.logging_rank_text({-1: ["only the launcher"]}) == "only the launcher\n"
    assert logs.logging_rank_text({}) == ""


# ------------------------------------------------------------------ a launcher that is not there
# The messages are what GNU env/timeout, dash, bash and docker print (captured on Debian; docker's from its
# runc error), each with the exit status it comes with.

DOCKER_127 = ('docker: Error response from daemon: failed to create shim task: OCI runtime create failed: runc '
              'create failed: unable to start container process: exec: "torchrun": executable file not found in '
              '$PATH: unknown.')


@pytest.mark.parametrize(("torchrun", "status", "stderr", "container", "expected"), [
    ("/nonexistent/torchrun", 127, "env: \u2018/nonexistent/torchrun\u2019: No such file or directory", None,
     "torchrun not found: /nonexistent/torchrun"),
    ("/nonexistent/torchrun", 127,
     "timeout: failed to run command \u2018/nonexistent/torchrun\u2019: No such file or directory", None,
     "torchrun not found: /nonexistent/torchrun"),
    ("torchrun", 127, "env: \u2018torchrun\u2019: No such file or directory", None,
     "torchrun not found: torchrun on gpu01's PATH"),
    ("torchrun", 127, "sh: 1: timeout: not found", None, "timeout not found: timeout on gpu01's PATH"),
    ("torchrun", 127, "bash: line 1: docker: command not found", "docker", "docker not found: docker on gpu01's PATH"),
    ("torchrun", 127, DOCKER_127, "docker", "torchrun not found: torchrun on gpu01's PATH"),
    ("/etc/passwd", 126, "env: \u2018/etc/passwd\u2019: Permission denied", None, "passwd not executable: /etc/passwd"),
])
def test_a_missing_launcher_is_named(h100_topology: Topology, torchrun: str, status: int, stderr: str,
                                     container: str | None, expected: str) -> None:
    from burnin.megatron.config import ContainerSpec

    spec = ContainerSpec(image="nvcr.io/nvidia/pytorch:24.07-py3", runner=container) if container else None
    settings = MegatronSettings(torchrun=torchrun, container=spec)
    launch = training_launch(settings, h100_topology, ["gpu01"], form="torchrun")
    results = {"gpu01": _result("gpu01", "", stderr + "\n", status=status)}
    assert run_record(launch, results, settings)["unavailable"] == expected
    probe = probe_launch(settings, h100_topology, "gpu01", form="torchrun")
    assert placement_record(probe, results)["unavailable"] == expected


@pytest.mark.parametrize(("status", "stdout", "stderr"), [
    (1, "", "env: \u2018/nonexistent/torchrun\u2019: No such file or directory"),  # not the shell's 127
    (127, "[default0]:sh: 1: exec: /nonexistent/torchrun: not found", ""),  # a rank printed it: the rank ran
    (127, "", "python3: can't open file '/workspace/pretrain_gpt.py': [Errno 2] No such file or directory"),
    (127, "", "torchrun: something else went wrong"),  # no word of a missing program
    (127, "", "env: \u2018/nonexistent/torchrun-2\u2019: No such file or directory"),  # names no program of the launch
    (0, "", ""),
])
def test_a_launch_that_started_is_not_a_missing_launcher(h100_topology: Topology, status: int, stdout: str,
                                                         stderr: str) -> None:
    settings = MegatronSettings(torchrun="/nonexistent/torchrun")
    launch = training_launch(settings, h100_topology, ["gpu01"], form="torchrun")
    record = run_record(launch, {"gpu01": _result("gpu01", stdout, stderr, status=status)}, settings)
    assert record["unavailable"] is None


def test_the_second_node_of_a_run_can_be_the_one_without_a_launcher(h100_topology: Topology) -> None:
    settings = MegatronSettings()
    launch = training_launch(settings, h100_topology, ["gpu01", "gpu02"], form="torchrun")
    results = {"gpu01": _result("gpu01", "[default0]:training ...\n", status=1),
               "gpu02": _result("gpu02", "", "env: \u2018torchrun\u2019: No such file or directory\n", status=127)}
    assert run_record(launch, results, settings)["unavailable"] == "torchrun not found: torchrun on gpu02's PATH"


def test_srun_reports_its_tasks_missing_program_as_theirs(h100_topology: Topology) -> None:
    """Under srun the launcher runs where burnin runs (a missing srun cannot start: the transport says so);
    a task's missing program is a rank's line, not the launcher's."""
    settings = MegatronSettings()
    launch = training_launch(settings, h100_topology, ["gpu01"], form="srun")
    results = {"gpu01": _result("gpu01", "", "0: sh: 1: exec: numactl: not found\nsrun: error: gpu01: task 0: "
                                             "Exited with exit code 127\n", status=127)}
    assert run_record(launch, results, settings)["unavailable"] is None
    results = {"gpu01": _result("gpu01", "", "srun: fatal: srun: No such file or directory\n", status=127)}
    assert run_record(launch, results, settings)["unavailable"] == "srun not found: srun on gpu01's PATH"


@pytest.mark.parametrize("word", ["CUDA_DEVICE_MAX_CONNECTIONS=1", "-k", "10", "pretrain_gpt.py"])
def test_only_a_program_of_the_launch_chain_is_a_missing_launcher(h100_topology: Topology, word: str) -> None:
    """Options, variables, the time limit's numbers and what the ranks run are not the launcher."""
    settings = MegatronSettings()
    launch = training_launch(settings, h100_topology, ["gpu01"], form="torchrun")
    results = {"gpu01": _result("gpu01", "", f"env: \u2018{word}\u2019: No such file or directory\n", status=127)}
    assert run_record(launch, results, settings)["unavailable"] is None


def test_without_torchrun_options_only_the_first_program_is_the_launcher() -> None:
    from burnin.launch.base import NodeCommand
    from burnin.megatron.commands import Launch
    from burnin.megatron.record import missing_launcher

    command = NodeCommand("gpu01", ("site-launcher", "helper"), 60.0)
    launch = Launch("single", "torchrun", "none", ("gpu01",), (command,), None, 8, 60.0)
    for missing, expected in (("helper", None), ("site-launcher", "site-launcher not found: site-launcher on "
                                                                 "gpu01's PATH")):
        results = {"gpu01": _result("gpu01", "", f"sh: 1: {missing}: not found\n", status=127)}
        assert missing_launcher(launch, results) == expected
