"""The simulated libnvidia-ml.so.1, loaded by the real pynvml through LD_LIBRARY_PATH."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from burnin.sim import NvmlBuildError, SimNode, apply_fault, build_rack, library_path
from burnin.sim.nvml import LIBRARY_NAME
from burnin.topology import Topology

Probe = Callable[[list[SimNode]], dict[str, Any]]
Env = Callable[[SimNode], dict[str, str]]
Dirs = Callable[[str], Path]

GPU_IS_LOST = 15


def _pynvml(env: dict[str, str], code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60, check=False)


@pytest.mark.rack
def test_library_compiles_into_a_fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = library_path()
    assert path.parent == tmp_path / "burnin" / "nvml"
    assert path.is_file()
    assert library_path() == path  # cached: same file, no rebuild
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp files left behind
    symbols = subprocess.run(["nm", "-D", "--defined-only", str(path)], capture_output=True, text=True,
                             check=False).stdout
    if symbols:
        for name in ("nvmlInitWithFlags", "nvmlInit_v2", "nvmlDeviceGetHandleByIndex_v2",
                     "nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetGpuFabricInfoV", "nvmlErrorString"):
            assert f" T {name}\n" in symbols, name


def test_missing_compiler_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("CC", raising=False)
    with pytest.raises(NvmlBuildError, match="no C compiler found"):
        library_path()


def test_node_lib_dir_links_the_library(healthy_node: SimNode) -> None:
    link = healthy_node.lib_dir / LIBRARY_NAME
    assert link.is_symlink()
    assert link.resolve() == library_path().resolve()
    env = healthy_node.environment()
    assert env["LD_LIBRARY_PATH"].split(os.pathsep)[0] == str(healthy_node.lib_dir)


def test_healthy_values_through_real_pynvml(healthy_nvml: dict[str, Any], sim_topology: Topology) -> None:
    nv = healthy_nvml
    assert nv["driver"] == sim_topology.host.driver_version == "535.183.01"
    assert nv["cuda"] == 12020
    assert nv["nvml_version"] == "12.535.183.01"
    assert nv["count"] == 8
    for gpu, device in zip(nv["gpus"], sim_topology.gpus.devices, strict=True):
        assert gpu["name"] == "NVIDIA H100 80GB HBM3"
        assert gpu["bus_id"] == f"0000{device.bus_id.upper()}"
        assert gpu["uuid"].startswith("GPU-") and len(gpu["uuid"]) == 40
        assert len(gpu["serial"]) == 13
        assert gpu["memory"] == 81559 * 1024 * 1024
        assert gpu["memory_v2"][0] == 81559 * 1024 * 1024
        assert gpu["persistence"] == 1
        assert gpu["mig"] == [0, 0]
        assert gpu["ecc_mode"] == [1, 1]
        for key, value in gpu.items():
            if key.startswith("ecc_") and key != "ecc_mode":
                assert value == 0, key
        assert gpu["remapped_rows"] == [0, 0, 0, 0]
        assert gpu["clock_event_reasons"] & 0xE8 == 0  # no HW slowdown / thermal / power brake
        assert (gpu["threshold_slowdown"], gpu["threshold_shutdown"], gpu["threshold_gpu_max"]) == (87, 92, 85)
        assert 30 <= gpu["temperature"] == gpu["temperature_v"] <= gpu["threshold_gpu_max"] - 5
        assert gpu["power_enforced"] == gpu["power_default"] == 700000
        assert (gpu["pcie_gen_curr"], gpu["pcie_gen_max"], gpu["pcie_gen_gpu_max"]) == (5, 5, 5)
        assert (gpu["pcie_width_curr"], gpu["pcie_width_max"]) == (16, 16)
        links = gpu["nvlink"]
        assert len(links) == 19 and links[18]["state"]["class"] == "NVMLError_InvalidArgument"
        assert all(link["state"] == 1 for link in links[:18])
        assert all(link[c] == 0 for link in links[:18] for c in ("replay", "recovery", "crc_flit", "crc_data"))
        assert gpu["fabric"] == [3, 0]
        assert gpu["fabric_v"] == [3, 0, 0]
        assert gpu["numa"] == device.numa_node
    # CPU affinity bitmask = the NUMA node's cpulist
    first, last = nv["gpus"][0]["cpu_affinity"], nv["gpus"][7]["cpu_affinity"]
    assert first[0] == (1 << 56) - 1 and last[0] == ((1 << 64) - 1) ^ ((1 << 56) - 1)


@pytest.mark.rack
def test_lost_gpu_raises_gpu_is_lost(sim_dir: Dirs, sim_topology: Topology, env_of: Env) -> None:
    node, = build_rack(sim_dir("lost"), sim_topology, ["sim05"], {"sim05": ["gpu-lost@gpu2"]})
    code = (
        "import pynvml as n\n"
        "n.nvmlInit()\n"
        "print(n.nvmlDeviceGetCount())\n"
        "n.nvmlDeviceGetHandleByIndex(1)\n"
        "try:\n"
        "    n.nvmlDeviceGetHandleByIndex(2)\n"
        "except n.NVMLError_GpuIsLost as exc:\n"
        "    print('lost', exc.value, str(exc))\n"
        "try:\n"
        "    n.nvmlDeviceGetHandleByPciBusId('00000000:52:00.0')\n"
        "except n.NVMLError_GpuIsLost:\n"
        "    print('lost by bus id')\n"
    )
    proc = _pynvml(env_of(node), code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["8", f"lost {GPU_IS_LOST} GPU is lost", "lost by bus id"]


@pytest.mark.rack
def test_missing_gpu_leaves_seven(sim_dir: Dirs, sim_topology: Topology, nvml_probe: Probe) -> None:
    node, = build_rack(sim_dir("missing"), sim_topology, ["sim06"], {"sim06": ["gpu-missing@gpu3"]})
    nv = nvml_probe([node])["sim06"]
    assert nv["count"] == 7
    buses = [g["bus_id"] for g in nv["gpus"]]
    assert "00000000:61:00.0" not in buses
    assert buses[3] == "00000000:9D:00.0"  # later GPUs shift down an index


@pytest.mark.rack
def test_errors_and_uninitialized(healthy_node: SimNode, env_of: Env) -> None:
    code = (
        "import pynvml as n\n"
        "try:\n"
        "    n.nvmlDeviceGetCount()\n"
        "except n.NVMLError as exc:\n"
        "    print('before init', exc.value)\n"
        "n.nvmlInit()\n"
        "h = n.nvmlDeviceGetHandleByIndex(0)\n"
        "for call in (lambda: n.nvmlDeviceGetHandleByIndex(8),\n"
        "             lambda: n.nvmlDeviceGetTemperatureThreshold(h, 99),\n"
        "             lambda: n.nvmlDeviceGetNvLinkErrorCounter(h, 0, 9)):\n"
        "    try:\n"
        "        call()\n"
        "    except n.NVMLError_InvalidArgument:\n"
        "        print('invalid')\n"
        "print(n.nvmlErrorString(15))\n"
        "n.nvmlShutdown()\n"
        "try:\n"
        "    n.nvmlDeviceGetName(h)\n"
        "except n.NVMLError_Uninitialized:\n"
        "    print('after shutdown')\n"
    )
    proc = _pynvml(env_of(healthy_node), code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["before init 1", "invalid", "invalid", "invalid", "GPU is lost",
                                        "after shutdown"]


@pytest.mark.rack
def test_no_state_file_means_driver_not_loaded(healthy_node: SimNode, env_of: Env) -> None:
    env = {**env_of(healthy_node), "BURNIN_SIM_NVML": str(healthy_node.dir / "absent")}
    code = (
        "import pynvml as n\n"
        "try:\n"
        "    n.nvmlInit()\n"
        "except n.NVMLError_DriverNotLoaded:\n"
        "    print('not loaded')\n"
    )
    proc = _pynvml(env, code)
    assert proc.stdout.strip() == "not loaded", proc.stderr


@pytest.mark.rack
def test_state_is_reread_at_each_init(sim_dir: Dirs, sim_topology: Topology, env_of: Env) -> None:
    node, = build_rack(sim_dir("reread"), sim_topology, ["sim07"])
    code = (
        "import sys, pynvml as n\n"
        "def temp():\n"
        "    n.nvmlInit()\n"
        "    value = n.nvmlDeviceGetTemperature(n.nvmlDeviceGetHandleByIndex(3), 0)\n"
        "    n.nvmlShutdown()\n"
        "    return value\n"
        "print(temp(), flush=True)\n"
        "sys.stdin.readline()\n"
        "print(temp(), flush=True)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], env=env_of(node), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdin is not None
    before = int(proc.stdout.readline())
    apply_fault(node.dir, "thermal@gpu3")
    out, _ = proc.communicate("go\n", timeout=60)
    assert before < 85
    assert int(out) == 86
