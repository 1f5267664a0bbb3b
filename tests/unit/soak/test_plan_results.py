"""Soak settings and stage commands; what each stage's output says (failures vs could-not-measure)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from burnin.errors import ConfigError, UsageError
from burnin.soak import plan
from burnin.soak.results import read_chunk
from burnin.transport.base import CommandResult


@pytest.mark.parametrize(("text", "seconds"), [("24h", 86400.0), ("90m", 5400.0), ("30s", 30.0), ("2d", 172800.0),
                                               ("45", 45.0), ("1.5h", 5400.0), (" 10 min ", 600.0)])
def test_durations(text: str, seconds: float) -> None:
    assert plan.parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "h", "-1h", "0", "10 hours", "1e400h", "nan"])
def test_bad_durations_are_usage_errors(text: str) -> None:
    with pytest.raises(UsageError):
        plan.parse_duration(text)


def test_hms() -> None:
    assert (plan.hms(36000), plan.hms(90061.4), plan.hms(0)) == ("10:00:00", "25:01:01", "00:00:00")


def test_settings_file_mistakes_name_file_key_and_line(tmp_path: Path) -> None:
    path = tmp_path / "soak.yaml"
    path.write_text("gpu:\n  minutes: 30\ntolerances:\n  throughput_drift: 2\n")
    with pytest.raises(ConfigError, match=r"soak\.yaml:4: tolerances\.throughput_drift"):
        plan.load_settings(path)
    path.write_text("gpu:\n  minuets: 30\n")
    with pytest.raises(ConfigError, match="minuets"):
        plan.load_settings(path)
    path.write_text("nccl:\n  enabled: false\ngpu:\n  tool: builtin\n")
    settings = plan.load_settings(path)
    assert not settings.enabled("nccl") and settings.gpu.tool == "builtin"
    with pytest.raises(UsageError, match="no such file"):
        plan.load_settings(tmp_path / "missing.yaml")


def test_stage_commands() -> None:
    settings = plan.SoakSettings()
    gpu = plan.gpu_chunk(settings, 3600, 8)
    assert gpu.steps[0].argv[:2] == ("sh", "-c") and "gpu_burn -tc 3600" in gpu.steps[0].argv[2]
    assert gpu.steps[0].stdin is not None and b"gpu_burn's format" in gpu.steps[0].stdin  # the torch fallback
    only = plan.gpu_chunk(plan.SoakSettings.model_validate({"gpu": {"tool": "gpu_burn"}}), 600, 8)
    assert only.steps[0].argv == ("gpu_burn", "-tc", "600") and only.steps[0].stdin is None
    nccl = plan.nccl_chunk(settings, 1200, 8)
    assert nccl.steps[0].argv == ("all_reduce_perf", "-b", "8G", "-e", "8G", "-f", "2", "-g", "8", "-n", "36000")
    cpu = plan.cpu_chunk(settings, 1200, {0: 56, 1: 56})
    assert cpu.steps[0].argv[:5] == ("stress-ng", "--cpu", "0", "--vm", "4") and cpu.steps[0].argv[-1] == "1200s"
    assert cpu.steps[2].argv == ("env", "OMP_NUM_THREADS=56", "numactl", "--cpunodebind=1", "--membind=1", "stream")
    assert plan.dcgm_chunk(settings).steps[0].argv == ("dcgmi", "diag", "-r", "3", "-j")
    assert plan.default_interval(86400, True, settings) == 1440.0
    assert plan.default_interval(86400, False, settings) == 30.0


def ok(stdout: str, argv: tuple[str, ...] = ("tool",), status: int = 0) -> CommandResult:
    return CommandResult("n1", argv, status, stdout, "", 1.0)


BURN = ("GPU 0: H100 (UUID: GPU-1)\nGPU 1: H100 (UUID: GPU-2)\n"
        + "".join(f"{p}.0%  proc'd: {p} (4000{p // 10} Gflop/s) - {p} (3000 Gflop/s)   errors: 0 - {e}   "
                  "temps: 60 C - 61 C\n" for p, e in ((50, 0), (100, 3)))
        + "Tested 2 GPUs:\n\tGPU 0: OK\n\tGPU 1: FAULTY\n")


def test_gpu_stage_points_and_failures() -> None:
    record = read_chunk(plan.gpu_chunk(plan.SoakSettings(), 600, 2), "n1", [("gpu_burn", ok(BURN))], start=1000.0,
                        end=1600.0, attempt=0, gpu_names=("gpu4", "gpu5"))
    assert record.series == {"gpu4": [(1300.0, 40005.0), (1600.0, 400010.0)], "gpu5": [(1300.0, 3000.0),
                                                                                      (1600.0, 3000.0)]}
    assert record.failures == ("gpu5 3 compare errors", "gpu5 FAULTY") and record.errors == ()


def test_a_tool_that_did_not_run_is_incomplete_not_failed() -> None:
    missing = CommandResult("n1", ("gpu_burn",), 127, "", "sh: gpu_burn: command not found", 0.1)
    record = read_chunk(plan.gpu_chunk(plan.SoakSettings(), 600, 2), "n1", [("gpu_burn", missing)], start=0.0,
                        end=600.0, attempt=0, gpu_names=("gpu0", "gpu1"))
    assert record.failures == () and record.errors and "not found" in record.errors[0]
    cut = read_chunk(plan.gpu_chunk(plan.SoakSettings(), 600, 2), "n1", [("gpu_burn", ok(BURN.split("Tested")[0]))],
                     start=0.0, end=600.0, attempt=0, gpu_names=("gpu0", "gpu1"))
    assert cut.errors and "ended before its summary" in cut.errors[0]


def test_dcgm_fail_and_warn_are_failures() -> None:
    doc = {"DCGM GPU Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [
        {"name": "GPU Memory", "results": [{"gpu_id": "3", "status": "Fail", "warnings": [{"warning": "bad row"}]}]},
        {"name": "Diagnostic", "results": [{"gpu_id": "0", "status": "Warn"}]},
        {"name": "PCIe", "results": [{"gpu_id": "0", "status": "Pass"}]}]}]}}
    record = read_chunk(plan.dcgm_chunk(plan.SoakSettings()), "n1", [("dcgmi", ok(json.dumps(doc), status=1))],
                        start=0.0, end=900.0, attempt=0, gpu_names=())
    assert record.failures == ("dcgmi GPU Memory: Fail on GPU 3 (bad row)", "dcgmi Diagnostic: Warn on GPU 0")


def test_cpu_and_disk_stages() -> None:
    stress = "stress-ng: fail:  [9] vm: detected 1 bit errors while stressing memory\n"
    stream = ("Function    Best Rate MB/s  Avg time     Min time     Max time\n"
              "Triad:         322500.7     0.029900     0.029767     0.030050\nSolution Validates\n")
    record = read_chunk(plan.cpu_chunk(plan.SoakSettings(), 600, {0: 2}), "n1",
                        [("stress-ng", ok(stress)), ("stream0", ok(stream))], start=0.0, end=600.0, attempt=0,
                        gpu_names=())
    assert record.failures == ("stress-ng: vm: detected 1 bit errors while stressing memory",)
    assert record.series == {"stream0": [(600.0, pytest.approx(322.5007))]}
    smart = ok('{"critical_warning": 4, "media_errors": 2}')
    disk = read_chunk(plan.disk_chunk(("/dev/nvme0n1",)), "n1", [("smart-log /dev/nvme0n1", smart)], start=0.0,
                      end=0.0, attempt=0, gpu_names=())
    assert disk.failures == ("/dev/nvme0n1 critical_warning 0x4", "/dev/nvme0n1 2 media errors")
