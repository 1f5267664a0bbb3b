"""IB-08's launch: the ib_write_bw argv, the loopback task that runs server and client on one node, settings,
and the simulator's ib_write_bw shim (the real format, bandwidth from the node's state)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from burnin.errors import ConfigError
from burnin.fabric import commands
from burnin.fabric.measure import gdr_measurement
from burnin.fabric.settings import PRODUCTION, SIMULATED, load_settings
from burnin.parsers.perftest import parse_perftest
from burnin.sim import SimNode, build_rack
from burnin.topology import Topology
from burnin.transport.base import CommandResult


def test_the_command_follows_the_catalog_with_a_loopback_pair() -> None:
    argv = commands.ib_write_bw_command(PRODUCTION, "mlx5_3", 3, port=18521)
    assert argv[:2] == ["env", "CUDA_DEVICE_ORDER=PCI_BUS_ID"]
    assert argv[2:6] == ["timeout", "-k", "5", "600"]
    assert argv[6:10] == ["sh", "-c", commands.LOOPBACK_TASK, "sh"]
    assert argv[10:] == ["ib_write_bw", "-d", "mlx5_3", "-F", "--report_gbits", "-s", "1048576", "-n", "5000",
                         "-q", "4", "-p", "18521", "--use_cuda=3"]
    host = commands.ib_write_bw_command(PRODUCTION.replace(ib_write_bw="/opt/perftest/ib_write_bw"), "mlx5_3",
                                        None, port=18522)
    assert "/opt/perftest/ib_write_bw" in host and not any(a.startswith("--use_cuda") for a in host)


def test_every_run_has_its_own_port(h100_topology: Topology) -> None:
    ports = {commands.ib_write_bw_port(PRODUCTION, i, kind) for i in range(8) for kind in commands.MEMORY_KINDS}
    assert len(ports) == 16 and min(ports) == 18515


@pytest.mark.parametrize(("text", "message"), [
    ("ib_write_bw_qps: 0\n", "ib_write_bw_qps must be at least 1"),
    ("ib_write_bw_port: 80\n", "ib_write_bw_port must be within"),
    ("timeout_s: .nan\n", "timeout_s a finite number"),
    ("ib_write_bw_size: big\n", "ib_write_bw_size"),
])
def test_bad_ib_write_bw_settings(tmp_path: Path, text: str, message: str) -> None:
    file = tmp_path / "fabric.yaml"
    file.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_settings(file)


def test_ib_write_bw_settings_overlay(tmp_path: Path) -> None:
    file = tmp_path / "fabric.yaml"
    file.write_text("ib_write_bw: /opt/perftest/bin/ib_write_bw\nib_write_bw_qps: 8\n")
    settings = load_settings(file)
    assert settings.ib_write_bw == "/opt/perftest/bin/ib_write_bw" and settings.ib_write_bw_qps == 8


# ---------------------------------------------------------------- the loopback task, with a stand-in tool

FAKE = """#!/bin/sh
# a stand-in ib_write_bw: the server (no host argument) logs and waits to be killed or exits; the client
# fails to connect the first $FAIL_CONNECTS times, then prints a line naming its arguments
state=$STATE_DIR
last=""; for a in "$@"; do last=$a; done
case "$last" in
  localhost)
    n=$(cat "$state/tries" 2>/dev/null || echo 0); n=$((n + 1)); echo $n > "$state/tries"
    if [ "$n" -le "${FAIL_CONNECTS:-0}" ]; then echo "Couldn't connect to localhost:18515" >&2; exit 1; fi
    if [ -n "$CLIENT_FAILS" ]; then sleep 0.5; echo " Port number 1 state is Down" >&2; exit 1; fi
    if [ -n "$CLIENT_HANGS" ]; then exec sleep 60; fi
    echo "client $*"; exit 0 ;;
  *) echo "server started $*"; [ -n "$SERVER_HANGS" ] && exec sleep 60; exit 0 ;;
esac
"""


@pytest.fixture
def fake_tool(tmp_path: Path) -> Path:
    tool = tmp_path / "ib_write_bw"
    tool.write_text(FAKE)
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return tool


def loopback(tool: Path, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    argv = ["sh", "-c", commands.LOOPBACK_TASK, "sh", str(tool), "-d", "mlx5_0", "-p", "18515"]
    full = {**os.environ, "STATE_DIR": str(tmp_path), **env}
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=full, check=False)


@pytest.mark.rack
def test_loopback_runs_the_client_against_the_server(fake_tool: Path, tmp_path: Path) -> None:
    proc = loopback(fake_tool, tmp_path)
    assert proc.returncode == 0 and proc.stdout == "client -d mlx5_0 -p 18515 localhost\n"
    assert proc.stderr == ""


@pytest.mark.rack
def test_loopback_retries_while_the_server_is_not_listening(fake_tool: Path, tmp_path: Path) -> None:
    proc = loopback(fake_tool, tmp_path, FAIL_CONNECTS="3")
    assert proc.returncode == 0 and proc.stdout.startswith("client ")
    assert (tmp_path / "tries").read_text().strip() == "4"


@pytest.mark.rack
def test_a_failing_client_is_not_retried_and_shows_the_server(fake_tool: Path, tmp_path: Path) -> None:
    proc = loopback(fake_tool, tmp_path, CLIENT_FAILS="1", SERVER_HANGS="1")
    assert proc.returncode == 1 and "Port number 1 state is Down" in proc.stdout
    assert (tmp_path / "tries").read_text().strip() == "1"
    assert proc.stderr == "server: server started -d mlx5_0 -p 18515\n"  # the hung server was killed


@pytest.mark.rack
def test_a_loopback_stopped_by_its_timeout_leaves_no_file_on_the_node(fake_tool: Path, tmp_path: Path) -> None:
    """The task's limit (``timeout``'s TERM) lands while both ends hang: the server is stopped and its log goes."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    argv = ["timeout", "-k", "5", "1", "sh", "-c", commands.LOOPBACK_TASK, "sh", str(fake_tool), "-d", "mlx5_0"]
    env = {**os.environ, "STATE_DIR": str(tmp_path), "TMPDIR": str(scratch), "CLIENT_HANGS": "1",
           "SERVER_HANGS": "1"}
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, check=False)
    assert proc.returncode == 124 and (tmp_path / "tries").read_text().strip() == "1", proc
    assert list(scratch.iterdir()) == []


@pytest.mark.rack
def test_a_server_that_never_listens_gives_up(fake_tool: Path, tmp_path: Path) -> None:
    proc = loopback(fake_tool, tmp_path, FAIL_CONNECTS="1000")
    assert proc.returncode == 1 and "Couldn't connect" in proc.stdout
    assert (tmp_path / "tries").read_text().strip() == "50"


# ---------------------------------------------------------------- the simulator's ib_write_bw

FAULTS = {"sim02": ["slow-hca"], "sim03": ["pcie-x8"], "sim04": ["ib-port-down@mlx5_5"], "sim05": ["gpu-missing"],
          "sim06": ["gpu-lost@gpu1"], "sim07": ["ib-rate-200"]}


@pytest.fixture(scope="module")
def rack(h100_topology: Topology) -> Iterator[dict[str, SimNode]]:
    shm = Path("/dev/shm")
    base = Path(tempfile.mkdtemp(prefix="burnin-perftest-", dir=shm if os.access(shm, os.W_OK) else None))
    try:
        names = [f"sim{i:02d}" for i in range(1, 8)]
        yield {node.name: node for node in build_rack(base, h100_topology, names, FAULTS)}
    finally:
        shutil.rmtree(base, ignore_errors=True)


def run(node: SimNode, hca: str, gpu: int | None) -> CommandResult:
    argv = commands.ib_write_bw_command(SIMULATED, hca, gpu, port=18515)
    env = {**os.environ, **node.environment()}
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, check=False)
    return CommandResult(node.name, tuple(argv), proc.returncode, proc.stdout, proc.stderr, 0.1)


def gbps(node: SimNode, hca: str, gpu: int | None) -> float:
    m = gdr_measurement(run(node, hca, gpu), hca, gpu, timeout_s=60)
    assert m.ok, m.reason
    assert m.bw_average_gbps is not None
    return m.bw_average_gbps


@pytest.mark.rack
def test_the_shim_prints_what_the_real_tool_prints(rack: dict[str, SimNode]) -> None:
    result = run(rack["sim01"], "mlx5_4", 4)
    assert result.exit_status == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "initializing CUDA" and "Picking device No. 4" in lines
    assert " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]" in lines
    (report,) = parse_perftest(result.stdout).reports
    assert report.test == "RDMA_Write BW" and report.device == "mlx5_4" and report.cuda_device == 4
    assert report.setting("Number of qps") == "4" and report.rows[0].size_bytes == 1 << 20


@pytest.mark.rack
def test_a_healthy_node_writes_near_line_rate(rack: dict[str, SimNode]) -> None:
    for i in range(8):
        assert 380 < gbps(rack["sim01"], f"mlx5_{i}", i) < 395
        assert 385 < gbps(rack["sim01"], f"mlx5_{i}", None) < 400


@pytest.mark.rack
def test_slow_hca_halves_only_its_hca_from_both_memories(rack: dict[str, SimNode]) -> None:
    assert 185 < gbps(rack["sim02"], "mlx5_2", 2) < 200 and 185 < gbps(rack["sim02"], "mlx5_2", None) < 200
    assert gbps(rack["sim02"], "mlx5_1", 1) > 380 and gbps(rack["sim02"], "mlx5_3", None) > 380


@pytest.mark.rack
def test_a_gpu_on_x8_slows_only_its_gpudirect_path(rack: dict[str, SimNode]) -> None:
    assert gbps(rack["sim03"], "mlx5_3", 3) < 200 and gbps(rack["sim03"], "mlx5_3", None) > 380
    assert gbps(rack["sim03"], "mlx5_2", 2) > 380


@pytest.mark.rack
def test_loopback_does_not_see_the_link_rate(rack: dict[str, SimNode]) -> None:
    assert gbps(rack["sim07"], "mlx5_2", 2) > 380  # ib-rate-200: the link, not the HCA


@pytest.mark.rack
@pytest.mark.parametrize(("node", "hca", "gpu", "words"), [
    ("sim04", "mlx5_5", None, "Port number 1 state is Down"),
    ("sim05", "mlx5_7", 7, "No such device ID (7) exists in system"),
    ("sim06", "mlx5_1", 1, "Couldn't init GPU context"),
    ("sim01", "mlx5_77", None, "IB device mlx5_77 not found"),
])
def test_failures_read_as_perftest_prints_them(rack: dict[str, SimNode], node: str, hca: str, gpu: int | None,
                                               words: str) -> None:
    result = run(rack[node], hca, gpu)
    assert result.exit_status == 1 and words in result.stdout
    m = gdr_measurement(result, hca, gpu, timeout_s=60)
    assert m.status == "unmeasured" and words in m.reason
