"""IB-08 (GPUDirect RDMA per HCA, ib_write_bw loopback) as tables: bounds, every HCA, unreadable inputs;
and the measurement that reads one ib_write_bw launch."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
from fabric_support import gdr, gdr_section, ib_write_bw_output, result, section

from burnin.checks.base import evaluate
from burnin.evaluate.verdict import Status, Verdict
from burnin.fabric.measure import gdr_measurement
from burnin.facts import Facts
from burnin.topology import Topology
from burnin.topology.model import GpuDevice, GpuSpec

HCAS = [f"mlx5_{i}" for i in range(8)]


def ib08(topology: Topology, runs: dict[str, Any] | None) -> Verdict:
    doc = section()
    doc["ib_write_bw"] = runs
    return evaluate("IB-08", Facts("sim01", {"fabric": doc}), topology)


def with_value(kind: str, hca: str, value: object) -> dict[str, Any]:
    runs = gdr_section()
    runs[hca][kind]["bw_average_gbps"] = value
    return runs


def test_a_healthy_node_passes(h100_topology: Topology) -> None:
    verdict = ib08(h100_topology, gdr_section())
    assert verdict.status is Status.PASS, verdict.reason
    assert "GPUDirect min 388.0 Gb/s, host min 392.0 Gb/s over 8 HCAs" in verdict.reason
    assert len(verdict.findings) == 16


@pytest.mark.parametrize("hca", HCAS)
@pytest.mark.parametrize("kind", ["cuda", "host"])
def test_a_slow_hca_is_named_at_every_index(h100_topology: Topology, hca: str, kind: str) -> None:
    verdict = ib08(h100_topology, with_value(kind, hca, 196.0))
    assert verdict.status is Status.FAIL
    gpu = f"gpu{hca[-1]} memory" if kind == "cuda" else "host memory"
    assert verdict.measured == f"{hca} {gpu} 196.00 Gb/s" and verdict.reason.startswith(f"IB-08 {hca} {gpu}")
    assert [f.subject for f in verdict.findings if f.status is Status.FAIL] == [f"{hca} {gpu}"]


@pytest.mark.parametrize(("value", "status"), [
    (360.0, Status.PASS),      # at the floor (and within 5% of a 360-380 median below)
    (359.99, Status.FAIL),     # just below the floor
    (360.01, Status.PASS),
])
def test_the_absolute_floor_is_inclusive(h100_topology: Topology, value: float, status: Status) -> None:
    runs = gdr_section({(h, "host"): 370.0 for h in HCAS})
    runs["mlx5_4"]["host"]["bw_average_gbps"] = value
    verdict = ib08(h100_topology, runs)
    assert verdict.status is status, verdict.reason
    if status is Status.FAIL:
        assert verdict.measured == "mlx5_4 host memory 359.99 Gb/s" and ">= 360 Gb/s" in verdict.reason


@pytest.mark.parametrize(("value", "status"), [
    (0.95 * 392.0, Status.PASS),          # exactly 5% below the node's median: within
    (0.95 * 392.0 - 0.01, Status.FAIL),   # just beyond
    (391.9, Status.PASS),
])
def test_the_spread_against_the_node_median(h100_topology: Topology, value: float, status: Status) -> None:
    verdict = ib08(h100_topology, with_value("host", "mlx5_6", value))
    assert verdict.status is status, verdict.reason
    if status is Status.FAIL:
        assert "mlx5_6 host memory 372.39 Gb/s, 5.0% below the median 392.0 Gb/s of the node's HCAs" in verdict.reason
        assert "within 5% of the node's median" in verdict.reason


@pytest.mark.parametrize(("value", "quoted"), [
    (math.nan, "nan"), (math.inf, "inf"), (-5.0, "-5.0"), ("fast", "'fast'"), (True, "True"), (1e9, "1000000000.0"),
])
def test_values_that_cannot_be_true_are_incomplete_and_quoted(h100_topology: Topology, value: object,
                                                              quoted: str) -> None:
    verdict = ib08(h100_topology, with_value("cuda", "mlx5_3", value))
    assert verdict.status is Status.INCOMPLETE, verdict.reason
    assert f"mlx5_3 gpu3 memory: ib_write_bw BW average: {quoted} Gb/s is not a bandwidth" in verdict.reason


def test_missing_runs_and_values_are_incomplete(h100_topology: Topology) -> None:
    none = ib08(h100_topology, with_value("host", "mlx5_0", None))
    assert none.status is Status.INCOMPLETE and "no bandwidth reported" in none.reason
    runs = gdr_section()
    del runs["mlx5_7"]
    gone = ib08(h100_topology, runs)
    assert gone.status is Status.INCOMPLETE and "mlx5_7 gpu7 memory: not run" in gone.reason
    runs = gdr_section()
    runs["mlx5_1"]["cuda"] = "garbage"
    assert "mlx5_1 gpu1 memory: not run" in ib08(h100_topology, runs).reason
    runs = gdr_section()
    runs["mlx5_1"]["cuda"] = {"hca": "mlx5_1"}
    assert "unreadable measurement" in ib08(h100_topology, runs).reason
    for empty in (None, {}, [], "x"):
        verdict = ib08(h100_topology, empty)  # type: ignore[arg-type]
        assert verdict.status is Status.INCOMPLETE and "no ib_write_bw run" in verdict.reason


def test_a_failed_launch_is_incomplete_with_its_reason(h100_topology: Topology) -> None:
    runs = gdr_section()
    runs["mlx5_5"]["cuda"] = gdr("mlx5_5", 5, None, status="unmeasured",
                                 reason="ib_write_bw exited 1; last output: Couldn't init GPU context: 1").to_json()
    verdict = ib08(h100_topology, runs)
    assert verdict.status is Status.INCOMPLETE and "Couldn't init GPU context" in verdict.reason


def test_a_known_fault_wins_over_an_unmeasured_hca(h100_topology: Topology) -> None:
    runs = with_value("host", "mlx5_2", 150.0)
    runs["mlx5_6"]["cuda"] = gdr("mlx5_6", 6, None, status="unmeasured", reason="hung").to_json()
    verdict = ib08(h100_topology, runs)
    assert verdict.status is Status.FAIL and "mlx5_2 host memory 150.00 Gb/s" in verdict.reason
    assert "not measured: mlx5_6 gpu6 memory" in verdict.reason


def test_an_hca_without_a_paired_gpu_is_judged_on_host_memory(h100_topology: Topology) -> None:
    devices = tuple(dataclasses.replace(d, hca=None) if d.index == 0 else d for d in h100_topology.gpus.devices)
    topology = dataclasses.replace(h100_topology, gpus=GpuSpec(8, h100_topology.gpus.model, devices,
                                                                h100_topology.gpus.nvlink))
    runs = gdr_section()
    del runs["mlx5_0"]["cuda"]
    verdict = ib08(topology, runs)
    assert verdict.status is Status.PASS and len(verdict.findings) == 15
    assert isinstance(devices[0], GpuDevice)


def test_a_topology_without_references_is_incomplete(h100_topology: Topology) -> None:
    refs = {k: v for k, v in h100_topology.references.items() if k != "ib_write_bw_gdr_gbps"}
    verdict = ib08(dataclasses.replace(h100_topology, references=refs), gdr_section())
    assert verdict.status is Status.INCOMPLETE and "defines no ib_write_bw_gdr_gbps" in verdict.reason


# ---------------------------------------------------------------- one ib_write_bw launch -> a measurement

CUDA = ["ib_write_bw", "-d", "mlx5_2", "-F", "--report_gbits", "--use_cuda=2"]
HOST = ["ib_write_bw", "-d", "mlx5_2", "-F", "--report_gbits"]


def test_a_good_run_reads_the_client_report() -> None:
    m = gdr_measurement(result("sim01", ib_write_bw_output(CUDA, 388.5)), "mlx5_2", 2, timeout_s=60)
    assert m.ok and m.bw_average_gbps == 388.5 and m.cuda_device == 2 and m.qps == 4
    assert m.size_bytes == 1 << 20 and m.iterations == 5000 and m.memory == "gpu2 memory"
    host = gdr_measurement(result("sim01", ib_write_bw_output(HOST)), "mlx5_2", None, timeout_s=60)
    assert host.ok and host.cuda_device is None and host.memory == "host memory"


@pytest.mark.parametrize(("stdout", "hca", "gpu", "kwargs", "words"), [
    (ib_write_bw_output(HOST), "mlx5_2", 2, {}, "printed no 'Picking device No. N': GPU memory not confirmed"),
    (ib_write_bw_output(CUDA), "mlx5_2", 3, {}, "--use_cuda=3 picked GPU 2"),
    (ib_write_bw_output(CUDA), "mlx5_2", None, {}, "picked GPU 2 on a host-memory run"),
    (ib_write_bw_output(HOST), "mlx5_3", None, {}, "reported device 'mlx5_2', not mlx5_3"),
    (ib_write_bw_output(HOST), "mlx5_2", None, {"status": 1}, "ib_write_bw exited 1"),
    (ib_write_bw_output(HOST).rsplit("-" * 87, 1)[0], "mlx5_2", None, {}, "stopped inside its result table"),
    (ib_write_bw_output(HOST, math.nan), "mlx5_2", None, {}, "BW average nan Gb/s is not a bandwidth"),
    (ib_write_bw_output(HOST, -3.0), "mlx5_2", None, {}, "BW average -3.0 Gb/s is not a bandwidth"),
    ("", "mlx5_2", None, {"status": 127}, "ib_write_bw not found on sim01 (exit 127)"),
    ("", "mlx5_2", None, {"status": None, "timed_out": True}, "ib_write_bw hung on sim01"),
    ("Couldn't connect to localhost:18515\n", "mlx5_2", None, {"status": 1}, "exited 1; last output: Couldn't"),
    ("garbage\n", "mlx5_2", None, {}, "not perftest output"),
    ("", "mlx5_2", None, {"status": 1}, "printed nothing (exit 1)"),
])
def test_runs_that_are_not_measurements(stdout: str, hca: str, gpu: int | None, kwargs: dict[str, Any],
                                        words: str) -> None:
    m = gdr_measurement(result("sim01", stdout, **kwargs), hca, gpu, timeout_s=60)
    assert m.status == "unmeasured" and words in m.reason, m.reason
    assert m.bw_average_gbps is None or m.bw_average_gbps >= 0


def test_round_trip_through_json() -> None:
    m = gdr_measurement(result("sim01", ib_write_bw_output(CUDA, 391.0)), "mlx5_2", 2, timeout_s=60)
    assert type(m).from_json(m.to_json()) == m


def test_ib_08_is_one_of_the_single_node_checks_where_there_are_compute_hcas(h100_topology: Topology) -> None:
    from burnin.checks.fabric import single_node_verdicts

    facts = Facts("sim01", {"fabric": section()})
    assert [v.check_id for v in single_node_verdicts(facts, h100_topology)] == [
        "NCCL-01", "NCCL-05", "NVL-01", "NVL-02", "NVL-03", "NVL-04", "IB-08"]
    unpaired = tuple(dataclasses.replace(d, hca=None) for d in h100_topology.gpus.devices)
    no_storage_section = {"storage": None} if "storage" in {f.name for f in dataclasses.fields(h100_topology)} \
        else {}
    storage_only = dataclasses.replace(
        h100_topology, hcas=tuple(h for h in h100_topology.hcas if h.role == "storage"),
        gpus=GpuSpec(8, h100_topology.gpus.model, unpaired, h100_topology.gpus.nvlink), **no_storage_section)
    assert "IB-08" not in [v.check_id for v in single_node_verdicts(facts, storage_only)]
