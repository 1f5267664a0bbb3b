"""The simulator's p2pBandwidthLatencyTest and its NVLink counters that grow under traffic (NVL-03, NVL-04)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_fabric_sim_tools import PERF, tool

from burnin.fabric.p2p import p2p_measurement
from burnin.parsers.p2p_bandwidth import parse_p2p_bandwidth
from burnin.sim import SimNode, build_rack, traffic
from burnin.sim.faults import FAULTS as REGISTRY
from burnin.sim.formats import p2p as p2p_format
from burnin.topology import Topology
from burnin.transport.base import CommandResult

FAULTS = {"sim02": ["p2p-disabled"], "sim03": ["nvlink-down"], "sim04": ["nvlink-flaky-under-load@gpu5"],
          "sim05": ["gpu-lost"], "sim06": ["slow-nvlink"], "sim07": ["gpu-missing"]}


@pytest.fixture(scope="module")
def rack(h100_topology: Topology) -> Iterator[dict[str, SimNode]]:
    shm = Path("/dev/shm")
    base = Path(tempfile.mkdtemp(prefix="burnin-p2p-tests-", dir=shm if os.access(shm, os.W_OK) else None))
    try:
        names = [f"sim{i:02d}" for i in range(1, 8)]
        yield {node.name: node for node in build_rack(base, h100_topology, names, FAULTS)}
    finally:
        shutil.rmtree(base, ignore_errors=True)


def p2p(node: SimNode) -> str:
    proc = tool(node, "p2pBandwidthLatencyTest")
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def off_diagonal(rows: tuple[tuple[float | None, ...], ...], gpu: int | None = None) -> list[float]:
    return [v for r, row in enumerate(rows) for c, v in enumerate(row)
            if r != c and v is not None and (gpu is None or gpu in (r, c))]


@pytest.mark.rack
def test_the_output_has_the_real_layout(rack: dict[str, SimNode], reference_dir: Path) -> None:
    ours = p2p(rack["sim01"]).splitlines()
    ref = (reference_dir / "p2pBandwidthLatencyTest" / "p2p-unidir-writes-matrix-h100-8gpu.txt").read_text()
    theirs = ref.splitlines()
    title = theirs.index("Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)")
    mine = ours.index(theirs[title])
    # the column header and a row ("%6d " then "%6.02f " cells); the published copy lost its trailing blanks
    assert ours[mine + 1].rstrip() == theirs[title + 1] and ours[mine + 1].endswith(" ")
    assert len(ours[mine + 2].rstrip()) == len(theirs[title + 2])
    assert ours[0] == p2p_format.BANNER and ours[1].startswith("Device: 0, NVIDIA H100 80GB HBM3, pciBusID: 1b")
    assert ours[-1].startswith("NOTE: The CUDA Samples are not meant for performance measurements.")
    report = parse_p2p_bandwidth("\n".join(ours))
    assert len(report.devices) == 8 and len(report.peer_access) == 56 and len(report.matrices) == 9
    uni = report.find("bandwidth", p2p_enabled=True, bidirectional=False)
    assert uni is not None and min(off_diagonal(uni.matrix)) > 370 and max(off_diagonal(uni.matrix)) < 382
    assert report.find("bandwidth", p2p_enabled=False, bidirectional=False) is not None
    latency = report.find("latency", p2p_enabled=True, axis="GPU")
    assert latency is not None and max(off_diagonal(latency.matrix)) < 3.0


@pytest.mark.rack
def test_the_burnin_reader_takes_the_whole_shim_output(rack: dict[str, SimNode]) -> None:
    result = CommandResult("sim01", ("p2pBandwidthLatencyTest",), 0, p2p(rack["sim01"]), "", 0.1)
    run = p2p_measurement(result, timeout_s=60)
    assert run.ok and run.devices == 8 and run.refused == ()


@pytest.mark.rack
def test_p2p_disabled_refuses_every_pair_with_the_gpu(rack: dict[str, SimNode]) -> None:
    report = parse_p2p_bandwidth(p2p(rack["sim02"]))
    refused = {(p.device, p.peer) for p in report.peer_access if not p.can_access}
    assert refused == {(3, g) for g in range(8) if g != 3} | {(g, 3) for g in range(8) if g != 3}
    connectivity = report.find("connectivity")
    assert connectivity is not None and connectivity.matrix[3] == (0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0)
    uni = report.find("bandwidth", p2p_enabled=True, bidirectional=False)
    assert uni is not None and max(off_diagonal(uni.matrix, 3)) < 40 and min(off_diagonal(uni.matrix)) < 40
    others = [v for r, row in enumerate(uni.matrix) for c, v in enumerate(row) if 3 not in (r, c) and r != c]
    assert min(v for v in others if v is not None) > 370
    latency = report.find("latency", p2p_enabled=True, axis="GPU")
    assert latency is not None and min(off_diagonal(latency.matrix, 3)) > 14


@pytest.mark.rack
def test_p2p_disabled_shows_in_nvbandwidth_and_nccl_too(rack: dict[str, SimNode]) -> None:
    from burnin.parsers.nccl_tests import parse_nccl_tests
    from burnin.parsers.nvbandwidth import parse_nvbandwidth

    proc = tool(rack["sim02"], "nvbandwidth", "-t", "device_to_device_memcpy_read_ce")
    (case,) = parse_nvbandwidth(proc.stdout).testcases
    assert case.matrix[3] == (None,) * 8 and case.matrix[0][3] is None and case.matrix[0][1] is not None
    perf = parse_nccl_tests(tool(rack["sim02"], "all_reduce_perf", *PERF).stdout, "all_reduce")
    busbw = perf.rows[-1].out_of_place.busbw_gbps
    assert busbw is not None and busbw < 30


@pytest.mark.rack
def test_nvlink_health_scales_the_p2p_bandwidth(rack: dict[str, SimNode]) -> None:
    down = parse_p2p_bandwidth(p2p(rack["sim03"])).find("bandwidth", p2p_enabled=True, bidirectional=False)
    slow = parse_p2p_bandwidth(p2p(rack["sim06"])).find("bandwidth", p2p_enabled=True, bidirectional=False)
    assert down is not None and slow is not None
    assert 350 < min(off_diagonal(down.matrix, 3)) < 360  # 376 x 17/18
    assert 220 < max(off_diagonal(slow.matrix, 3)) < 232  # 376 x 0.6
    assert min(off_diagonal(slow.matrix)) == min(off_diagonal(slow.matrix, 3))


@pytest.mark.rack
def test_a_lost_gpu_stops_the_test_as_cuda_does(rack: dict[str, SimNode]) -> None:
    proc = tool(rack["sim05"], "p2pBandwidthLatencyTest")
    assert proc.returncode == 1 and proc.stderr == ""
    assert proc.stdout.splitlines() == [p2p_format.BANNER,
                                        "Cuda failure p2pBandwidthLatencyTest.cu:632: 'unknown error'"]
    run = p2p_measurement(CommandResult("sim05", ("p2p",), 1, proc.stdout, "", 0.1), timeout_s=60)
    assert not run.ok and "stopped on a CUDA error" in run.reason


@pytest.mark.rack
def test_a_missing_gpu_leaves_seven(rack: dict[str, SimNode]) -> None:
    report = parse_p2p_bandwidth(p2p(rack["sim07"]))
    assert len(report.devices) == 7 and report.find("connectivity").matrix[0] == (1.0,) * 7  # type: ignore[union-attr]


@pytest.mark.rack
def test_help_and_unknown_tool(rack: dict[str, SimNode]) -> None:
    proc = tool(rack["sim01"], "p2pBandwidthLatencyTest", "--help")
    assert proc.returncode == 0 and proc.stdout.startswith("Usage:  p2pBandwidthLatencyTest [OPTION]...")
    model = rack["sim01"].dir / "out" / "fabric" / "model.py"
    proc = tool(rack["sim01"], "python3", str(model), "nothing")
    assert proc.returncode == 1 and "p2pBandwidthLatencyTest ARGS..." in proc.stderr


# ---------------------------------------------------------------- counters that grow under traffic


def counters(node: SimNode, gpu: int, link: int) -> tuple[int, int, bool]:
    """(recovery, replay, active) of one link, as the collector reads them through the simulated NVML."""
    import json
    import sys

    proc = tool(node, sys.executable, "-m", "burnin.collector", "--sources", "nvml")
    entry = json.loads(proc.stdout)["nvml"]["gpus"][gpu]["nvlink"][link]
    return entry["recovery"], entry["replay"], entry["active"]


@pytest.mark.rack
def test_a_flaky_link_is_clean_at_rest_and_grows_with_each_tool(rack: dict[str, SimNode]) -> None:
    node = rack["sim04"]
    assert counters(node, 5, 7) == (0, 0, True)
    p2p(node)
    assert counters(node, 5, 7) == (1, 150, True)
    assert tool(node, "nvbandwidth", "-t", "device_to_device_memcpy_read_ce").returncode == 0
    assert tool(node, "all_reduce_perf", *PERF).returncode == 0
    assert counters(node, 5, 7) == (3, 450, True)
    assert counters(node, 3, 7) == (0, 0, True)  # only the faulted GPU
    assert tool(node, "ib_write_bw", "-d", "mlx5_0", "-s", "65536", "-n", "10", "localhost").returncode == 0
    assert counters(node, 5, 7) == (3, 450, True)  # ib_write_bw does not use NVLink


@pytest.mark.rack
def test_a_simulated_job_grows_every_flaky_member(rack: dict[str, SimNode]) -> None:
    before = counters(rack["sim04"], 5, 7)
    proc = tool(rack["sim01"], "all_reduce_perf", *PERF, env={"BURNIN_SIM_JOB_NODES": "sim01,sim04"})
    assert proc.returncode == 0, proc.stderr
    assert counters(rack["sim04"], 5, 7) == (before[0] + 1, before[1] + 150, True)
    assert counters(rack["sim01"], 5, 7) == (0, 0, True)


@pytest.mark.rack
def test_healthy_nodes_keep_their_state_file(rack: dict[str, SimNode]) -> None:
    state = rack["sim01"].nvml_state
    text, mode = state.read_text(), state.stat().st_mode
    p2p(rack["sim01"])
    assert state.read_text() == text and state.stat().st_mode == mode


def test_the_fault_registry_names_the_catching_checks() -> None:
    assert REGISTRY["p2p-disabled"].check_id == "NVL-03" and REGISTRY["p2p-disabled"].suite == "fabric"
    flaky = REGISTRY["nvlink-flaky-under-load"]
    assert flaky.check_id == "NVL-04" and flaky.suite == "fabric" and flaky.default_target == "gpu3"


# ---------------------------------------------------------------- traffic.py on its own


STATE = ["# header", "gpu.0.nvlink_replay=0,0,0", "gpu.0.nvlink_recovery=0,0,0",
         "gpu.1.nvlink_replay=5,0,0", "gpu.1.nvlink_recovery=0,1,0"]


def test_grown_lines_take_the_last_value_of_each_counter() -> None:
    lines = [*STATE, "gpu.1.nvlink_replay=7,0,2"]
    gpus = [{"index": 0, "flaky_link": None}, {"index": 1, "flaky_link": 2}]
    assert traffic.grown(lines, gpus) == ["gpu.1.nvlink_recovery=0,1,1", "gpu.1.nvlink_replay=7,0,152"]
    assert traffic.grown(lines, [{"index": 1, "flaky_link": 3}]) == []  # no such link: nothing to grow
    assert traffic.grown(lines, [{"index": 2, "flaky_link": 0}]) == []  # no such GPU
    assert traffic.grown(lines, [{"index": 0}]) == []


def test_record_appends_and_replaces_the_file(tmp_path: Path) -> None:
    state = tmp_path / "nvml.state"
    state.write_text("\n".join(STATE))  # no final newline
    state.chmod(0o640)
    traffic.record(str(tmp_path), [{"index": 0, "flaky_link": 1}])
    traffic.record(str(tmp_path), [{"index": 0, "flaky_link": 1}])
    lines = state.read_text().splitlines()
    assert lines[:5] == STATE and lines[-2:] == ["gpu.0.nvlink_recovery=0,2,0", "gpu.0.nvlink_replay=0,300,0"]
    assert state.read_text().endswith("\n") and state.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nvml.state"]


def test_record_grows_a_node_where_one_gpu_of_several_is_flaky(tmp_path: Path) -> None:
    state = tmp_path / "nvml.state"
    state.write_text("\n".join(STATE) + "\n")
    traffic.record(str(tmp_path), [{"index": 0, "flaky_link": None}, {"index": 1, "flaky_link": 0}])
    assert state.read_text().splitlines()[-2:] == ["gpu.1.nvlink_recovery=1,1,0", "gpu.1.nvlink_replay=155,0,0"]


def test_record_leaves_healthy_and_stateless_nodes_alone(tmp_path: Path) -> None:
    traffic.record(str(tmp_path), [{"index": 0, "flaky_link": 1}])  # no state file: nothing to grow
    assert list(tmp_path.iterdir()) == []
    state = tmp_path / "nvml.state"
    state.write_text("gpu.0.nvlink_replay=0\n")
    traffic.record(str(tmp_path), [{"index": 0, "flaky_link": None}])
    traffic.record(str(tmp_path), [{"index": 0, "flaky_link": 4}])  # a link the file does not list
    assert state.read_text() == "gpu.0.nvlink_replay=0\n"
