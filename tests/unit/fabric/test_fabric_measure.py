"""A finished launch -> a measurement: real outputs, hangs, garbage, wrong values, missing tools."""

from __future__ import annotations

from pathlib import Path

import pytest
from fabric_support import perf_output, result

from burnin.fabric.measure import NcclMeasurement, last_lines, nccl_measurement, nvb_measurement

GIB = 1 << 30
TESTCASES = ("device_to_device_memcpy_read_ce",)


def measure(stdout: str, **kwargs: object) -> NcclMeasurement:
    return nccl_measurement(result("sim01", stdout, **kwargs), "all_reduce", ("sim01",), timeout_s=60,  # type: ignore[arg-type]
                            judge_min_bytes=GIB)


@pytest.mark.parametrize(("name", "busbw", "size"), [
    ("all_reduce_perf-h100-dell-xe9680-2node-16gpu-ndr400.txt", 469.10, 16 * GIB),
    ("all_reduce_perf-h100-gcp-a3mega-2node-16gpu.txt", 337.35, 8 * GIB),
    ("all_reduce_perf-h100-8node-64gpu-underperforming.txt", 320.57, 8 * GIB),
])
def test_real_outputs_give_the_busbw_at_the_largest_size(reference_dir: Path, name: str, busbw: float,
                                                         size: int) -> None:
    m = measure((reference_dir / "nccl-tests" / name).read_text())
    assert m.ok and m.busbw_gbps == busbw and m.size_bytes == size
    assert m.wrong == 0 and m.out_of_bounds == 0 and not m.corrupt


def test_a_hang_is_incomplete_with_the_last_output_lines() -> None:
    partial = perf_output(480.0, rows=2, complete=False)
    m = measure(partial, status=None, timed_out=True)
    assert m.status == "unmeasured" and "hung on sim01" in m.reason and "60 s" in m.reason
    assert "last output:" in m.reason and "2147483648" in m.reason  # the last row it printed
    assert m.tail and m.tail[-1].startswith("2147483648 536870912 float sum")


def test_timeout_exit_status_is_a_hang_too() -> None:
    m = measure(perf_output(480.0, rows=1, complete=False), status=124)
    assert m.status == "unmeasured" and "hung" in m.reason


def test_garbage_is_incomplete_with_an_excerpt() -> None:
    m = measure("Segmentation fault (core dumped)\n\x00\x01 garbage\n", status=139)
    assert m.status == "unmeasured"
    assert "not nccl-tests output" in m.reason and "Segmentation fault" in m.reason


def test_tool_not_found() -> None:
    m = measure("", status=127, stderr="env: 'all_reduce_perf': No such file or directory")
    assert m.status == "unmeasured" and "not found" in m.reason and "nccl_tests_dir" in m.reason


def test_cannot_start() -> None:
    m = measure("", status=None, error="cannot start ssh: connection refused")
    assert m.status == "unmeasured" and "connection refused" in m.reason


def test_wrong_values_are_counted_even_with_a_failing_exit() -> None:
    m = measure(perf_output(480.0, wrong=3), status=1)
    assert m.ok and m.corrupt and m.wrong == 24 and m.out_of_bounds == 24
    cut = measure(perf_output(480.0, wrong=3, complete=False), status=None, timed_out=True)
    assert cut.status == "unmeasured" and cut.wrong > 0 and cut.corrupt


def test_a_run_that_stops_early_is_incomplete() -> None:
    m = measure(perf_output(480.0, complete=False), status=0)
    assert m.status == "unmeasured" and "stopped after 4 rows" in m.reason


def test_a_failing_exit_without_wrong_values_is_incomplete() -> None:
    m = measure(perf_output(480.0), status=3)
    assert m.status == "unmeasured" and "exited 3" in m.reason


def test_small_sizes_only_are_not_judged_but_the_run_finished() -> None:
    small = perf_output(480.0).replace("1073741824", "1048576")
    text = "\n".join(line for line in small.splitlines() if not line.lstrip().startswith(("2147", "4294", "8589")))
    m = measure(text)
    assert m.status == "unmeasured" and "busbw is judged at >=" in m.reason
    assert m.finished  # a complete run: the node may still join multi-node runs


def test_only_a_run_that_ended_is_finished() -> None:
    assert measure(perf_output(480.0)).finished
    assert measure(perf_output(480.0, wrong=1), status=1).finished
    assert not measure(perf_output(480.0, rows=1, complete=False), status=124).finished
    assert not measure("", status=127).finished


def test_measurement_round_trips_through_json() -> None:
    m = measure(perf_output(455.5))
    assert NcclMeasurement.from_json(m.to_json()) == m
    assert m.label == "sim01"


def test_nvbandwidth_real_output(reference_dir: Path) -> None:
    text = (reference_dir / "nvbandwidth" / "d2d-memcpy-read-ce-a6000-6gpu-pcie-issue50.txt").read_text()
    m = nvb_measurement(result("n", text), TESTCASES, timeout_s=60)
    assert m.status == "ok"
    matrix = m.testcases["device_to_device_memcpy_read_ce"]
    assert len(matrix) == 6 and matrix[0][0] is None and matrix[0][1] == 26.34


def test_nvbandwidth_missing_testcase_or_hang() -> None:
    text = "Running host_to_device_memcpy_ce.\nmemcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)\n" \
           "           0\n 0     55.00\n\nSUM host_to_device_memcpy_ce 55.00\n"
    m = nvb_measurement(result("n", text), TESTCASES, timeout_s=60)
    assert m.status == "unmeasured" and "no matrix for device_to_device_memcpy_read_ce" in m.reason
    hung = nvb_measurement(result("n", "nvbandwidth Version: v0.8\n", status=None, timed_out=True), TESTCASES,
                           timeout_s=9)
    assert hung.status == "unmeasured" and "nvbandwidth hung" in hung.reason and "nvbandwidth Version" in hung.reason


def test_last_lines_squeeze_whitespace() -> None:
    lines = last_lines(result("n", "a\n\n   b    c  \n", stderr="err  x\n"), 2)
    assert lines == ("b c", "err x")
