"""The simulator's nccl-tests and nvbandwidth shims: the real formats, bandwidth from the members' health."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from burnin.parsers.nccl_tests import parse_nccl_tests
from burnin.parsers.nvbandwidth import parse_nvbandwidth
from burnin.sim import SimNode, build_rack
from burnin.sim.fabric_model import expand, selected
from burnin.topology import Topology

FAULTS = {"sim02": ["slow-hca"], "sim03": ["nvlink-down"], "sim04": ["nccl-wrong"], "sim05": ["nccl-hang"],
          "sim06": ["slow-nvlink"], "sim07": ["gpu-missing"]}
ALL_RAILS = "=" + ",".join(f"mlx5_{i}:1" for i in range(8))
PERF = ["-b", "1G", "-e", "8G", "-f", "2", "-g", "8", "-n", "20", "-w", "5", "-c", "1"]
CLEAN = ("PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST",
         "BURNIN_SIM_JOB_NODES", "NCCL_IB_HCA", "NCCL_NVLS_ENABLE", "BURNIN_SIM_NOISE")


@pytest.fixture(scope="module")
def rack(h100_topology: Topology) -> Iterator[dict[str, SimNode]]:
    shm = Path("/dev/shm")
    base = Path(tempfile.mkdtemp(prefix="burnin-fabric-tests-", dir=shm if os.access(shm, os.W_OK) else None))
    try:
        names = [f"sim{i:02d}" for i in range(1, 8)]
        yield {node.name: node for node in build_rack(base, h100_topology, names, FAULTS)}
    finally:
        shutil.rmtree(base, ignore_errors=True)


def tool(node: SimNode, *argv: str, env: dict[str, str] | None = None,
         timeout: float = 30) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k not in CLEAN}
    full.update(node.environment())
    full.update(env or {})
    return subprocess.run(list(argv), env=full, capture_output=True, text=True, timeout=timeout, check=False)


def busbw(node: SimNode, env: dict[str, str] | None = None, collective: str = "all_reduce") -> float:
    proc = tool(node, f"{collective}_perf", *PERF, env=env)
    assert proc.returncode == 0, proc.stderr
    run = parse_nccl_tests(proc.stdout, collective)
    assert not run.truncated and run.rows[-1].size_bytes == 8 << 30
    value = run.rows[-1].out_of_place.busbw_gbps
    assert value is not None
    return value


@pytest.mark.rack
def test_perf_output_has_the_real_layout(rack: dict[str, SimNode], reference_dir: Path) -> None:
    ref = (reference_dir / "nccl-tests" / "all_reduce_perf-h100-dell-xe9680-2node-16gpu-ndr400.txt").read_text()
    proc = tool(rack["sim01"], "all_reduce_perf", "-b", "8", "-e", "16G", "-f", "2", "-g", "8", "-w", "5")
    assert proc.returncode == 0, proc.stderr
    ours, theirs = proc.stdout.splitlines(), ref.splitlines()
    assert ours[0] == theirs[0].replace("nGpus 1", "nGpus 8")
    assert ours[1:3] == ["#", "# Using devices"]
    header = next(i for i, line in enumerate(theirs) if "out-of-place" in line)
    mine = next(i for i, line in enumerate(ours) if "out-of-place" in line)
    assert [line.rstrip() for line in ours[mine:mine + 3]] == [line.rstrip() for line in theirs[header:header + 3]]
    row = next(line for line in ours if line.lstrip().startswith("8589934592 "))
    ref_row = next(line for line in theirs if line.lstrip().startswith("8589934592 "))
    assert len(row) == len(ref_row)
    assert [c for c, ch in enumerate(row) if ch == " " and c + 1 < len(row) and row[c + 1] != " "][:5] == \
        [c for c, ch in enumerate(ref_row) if ch == " " and c + 1 < len(ref_row) and ref_row[c + 1] != " "][:5]
    assert ours[-3] == "# Out of bounds values : 0 OK" and ours[-2].startswith("# Avg bus bandwidth    : ")
    run = parse_nccl_tests(proc.stdout, "all_reduce")
    assert run.nranks == 8 and {r.host for r in run.ranks} == {"sim01"} and run.ranks[3].bus_id == "0000:61:00"
    assert run.rows[0].size_bytes == 8 and len(run.rows) == 32 and run.out_of_bounds == 0
    assert run.nccl_version and not run.truncated


@pytest.mark.rack
def test_single_node_busbw_follows_nvlink_health(rack: dict[str, SimNode]) -> None:
    healthy = busbw(rack["sim01"])
    assert 470 <= healthy <= 490  # NVLS
    assert 330 <= busbw(rack["sim03"]) <= 355  # one link down: no NVLS, ring x 17/18
    assert 280 <= busbw(rack["sim06"]) <= 295  # slow NVLink: 60%
    assert 355 <= busbw(rack["sim01"], {"NCCL_NVLS_ENABLE": "0"}) <= 375  # ring
    assert busbw(rack["sim02"]) == pytest.approx(healthy, rel=0.03)  # a slow HCA is invisible inside a node


@pytest.mark.rack
def test_a_job_goes_as_fast_as_its_slowest_rail(rack: dict[str, SimNode]) -> None:
    def pair(a: str, b: str, hca: str = ALL_RAILS) -> float:
        return busbw(rack[a], {"BURNIN_SIM_JOB_NODES": f"{a},{b}", "NCCL_IB_HCA": hca})

    capped = pair("sim01", "sim03")
    assert 330 <= capped <= 355  # sim03's intra-node ring (one NVLink down) caps the pair
    slow = pair("sim01", "sim02")
    assert 170 <= slow <= 190  # 8 rails x the slow rail (50%)
    assert 40 <= pair("sim01", "sim02", "=mlx5_1:1") <= 48
    assert 20 <= pair("sim01", "sim02", "=mlx5_2:1") <= 25
    assert 300 <= pair("sim01", "sim02", "^=mlx5_2,mlx5_8,mlx5_9") <= 330  # 7 healthy compute rails


@pytest.mark.rack
def test_wrong_values_and_failed_bounds(rack: dict[str, SimNode]) -> None:
    proc = tool(rack["sim04"], "all_reduce_perf", *PERF)
    run = parse_nccl_tests(proc.stdout, "all_reduce")
    assert all(r.out_of_place.wrong for r in run.rows) and run.out_of_bounds
    assert "FAILED" in proc.stdout.splitlines()[-3]
    joined = tool(rack["sim01"], "all_reduce_perf", *PERF, env={"BURNIN_SIM_JOB_NODES": "sim01,sim04"})
    assert parse_nccl_tests(joined.stdout, "all_reduce").out_of_bounds


@pytest.mark.rack
def test_a_hang_prints_the_first_rows_and_stops(rack: dict[str, SimNode]) -> None:
    proc = tool(rack["sim05"], "timeout", "-k", "1", "1", "all_reduce_perf", "-b", "8", "-e", "8G", "-g", "8")
    assert proc.returncode == 124
    run = parse_nccl_tests(proc.stdout, "all_reduce")
    assert run.truncated and 0 < len(run.rows) <= 12 and run.avg_busbw_gbps is None


@pytest.mark.rack
def test_mpi_membership_and_rank_zero_only(rack: dict[str, SimNode]) -> None:
    quiet = tool(rack["sim01"], "all_reduce_perf", *PERF, env={"PMI_RANK": "3", "SLURM_STEP_NODELIST": "sim[01-02]"})
    assert quiet.returncode == 0 and quiet.stdout == ""
    rank0 = tool(rack["sim01"], "all_reduce_perf", *PERF,
                 env={"PMI_RANK": "0", "SLURM_STEP_NODELIST": "sim[01,03]", "SLURM_JOB_NODELIST": "sim[01-07]"})
    run = parse_nccl_tests(rank0.stdout, "all_reduce")
    assert run.nranks == 16 and {r.host for r in run.ranks} == {"sim01", "sim03"}
    alone = tool(rack["sim01"], "all_reduce_perf", *PERF, env={"SLURM_STEP_NODELIST": "sim[01-02]"})
    assert parse_nccl_tests(alone.stdout, "all_reduce").nranks == 8  # no MPI: a process of its own


@pytest.mark.rack
def test_missing_gpu_fails_like_cuda(rack: dict[str, SimNode]) -> None:
    proc = tool(rack["sim07"], "all_reduce_perf", *PERF)
    assert proc.returncode == 1 and "invalid device ordinal" in proc.stderr


@pytest.mark.rack
def test_other_collectives(rack: dict[str, SimNode]) -> None:
    assert 350 <= busbw(rack["sim01"], collective="all_gather") <= 370
    assert 330 <= busbw(rack["sim01"], collective="alltoall") <= 345


@pytest.mark.rack
def test_nvbandwidth_has_the_real_layout(rack: dict[str, SimNode], reference_dir: Path) -> None:
    ref = (reference_dir / "nvbandwidth" / "d2d-memcpy-read-ce-a6000-6gpu-pcie-issue50.txt").read_text().splitlines()
    proc = tool(rack["sim01"], "nvbandwidth", "-i", "10", "-t", "device_to_device_memcpy_read_ce",
                "-t", "host_to_device_memcpy_ce")
    assert proc.returncode == 0, proc.stderr
    ours = proc.stdout.splitlines()
    assert ours[:2] == ref[:2] and ours[3].startswith("CUDA Runtime Version: ")
    assert "Device 3: NVIDIA H100 80GB HBM3 (00000000:61:00)" in ours
    title = ours.index("memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)")
    assert ours[title - 1] == "Running device_to_device_memcpy_read_ce."
    assert ours[title + 1] == "  " + "".join(f"{c:10d}" for c in range(8))
    assert ours[title + 2].startswith(" 0       N/A    ")  # as in the A6000 reference: " 0       N/A     26.34"
    assert ref[ref.index("memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)") + 2].startswith(" 0       N/A     ")
    assert any(line.startswith("SUM device_to_device_memcpy_read_ce ") for line in ours)
    report = parse_nvbandwidth(proc.stdout)
    cases = {c.name: c for c in report.testcases}
    assert cases["host_to_device_memcpy_ce"].matrix[0][0] == pytest.approx(55.3, rel=0.02)
    assert report.version == "v0.8" and report.driver_version == "535.183.01"


@pytest.mark.rack
def test_nvbandwidth_follows_gpu_health(rack: dict[str, SimNode]) -> None:
    def d2d(node: str) -> list[list[float | None]]:
        proc = tool(rack[node], "nvbandwidth", "-t", "device_to_device_memcpy_read_ce")
        return [list(r) for r in parse_nvbandwidth(proc.stdout).testcases[0].matrix]

    slow = d2d("sim06")
    assert slow[0][3] == pytest.approx(392 * 0.6, rel=0.02) and slow[0][1] == pytest.approx(392, rel=0.02)
    down = d2d("sim03")
    assert down[3][0] == pytest.approx(392 * 17 / 18, rel=0.02)
    bad = tool(rack["sim01"], "nvbandwidth", "-t", "no_such_test")
    assert bad.returncode == 1 and "not found" in bad.stderr


@pytest.mark.parametrize(("text", "names"), [
    ("sim[01-03]", ["sim01", "sim02", "sim03"]),
    ("sim[01,07],gpu5", ["sim01", "sim07", "gpu5"]),
    ("a[1-2]b,c", ["a1b", "a2b", "c"]),
    ("node7", ["node7"]),
])
def test_nodeset_expansion(text: str, names: list[str]) -> None:
    assert expand(text) == names


@pytest.mark.parametrize(("name", "selector", "hit"), [
    ("mlx5_1", "=mlx5_1:1,mlx5_2:1", True),
    ("mlx5_10", "=mlx5_1:1", False),
    ("mlx5_10", "mlx5_1", True),  # a prefix without '=': the reason burnin always writes '='
    ("mlx5_2", "^=mlx5_2", False),
    ("mlx5_3", "^=mlx5_2", True),
    ("mlx5_8", None, True),
])
def test_nccl_ib_hca_semantics(name: str, selector: str | None, hit: bool) -> None:
    assert selected(name, selector) is hit
