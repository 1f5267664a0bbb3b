"""Fixtures for the simulator tests: a topology, built racks, and probes that read a node
the way the production collector does (real pynvml in a subprocess, sysfs, shims on PATH)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from burnin.sim import SimNode, build_rack
from burnin.topology import Topology, find_topology

# Runs inside a subprocess whose environment is one node's: real pynvml, our libnvidia-ml.so.1.
# It probes every node given on argv by switching BURNIN_SIM_NVML between nvmlInit calls,
# which also proves the library re-reads its state at each init.
NVML_PROBE = r'''
import json, os, sys
from ctypes import byref
import pynvml as n

def call(record, key, fn, *args):
    try:
        value = fn(*args)
    except n.NVMLError as exc:
        record[key] = {"error": exc.value, "class": type(exc).__name__}
        return None
    record[key] = value
    return value

def probe():
    node = {}
    call(node, "driver", n.nvmlSystemGetDriverVersion)
    call(node, "cuda", n.nvmlSystemGetCudaDriverVersion)
    call(node, "nvml_version", n.nvmlSystemGetNVMLVersion)
    count = call(node, "count", n.nvmlDeviceGetCount) or 0
    gpus = []
    for index in range(count):
        g = {"index": index}
        h = call(g, "handle", n.nvmlDeviceGetHandleByIndex, index)
        if isinstance(g["handle"], dict):
            gpus.append(g)
            continue
        g["handle"] = "ok"
        call(g, "name", n.nvmlDeviceGetName, h)
        call(g, "uuid", n.nvmlDeviceGetUUID, h)
        call(g, "serial", n.nvmlDeviceGetSerial, h)
        pci = call(g, "pci", n.nvmlDeviceGetPciInfo, h)
        g["pci"] = pci.busId if not isinstance(g["pci"], dict) else g["pci"]
        g["bus_id"] = pci.busId if pci is not None else None
        mem = call(g, "memory", n.nvmlDeviceGetMemoryInfo, h)
        g["memory"] = mem.total if mem is not None else g["memory"]
        mem2 = call(g, "memory_v2", n.nvmlDeviceGetMemoryInfo, h, n.nvmlMemory_v2)
        g["memory_v2"] = [mem2.total, mem2.reserved, mem2.used] if mem2 is not None else g["memory_v2"]
        call(g, "vbios", n.nvmlDeviceGetVbiosVersion, h)
        call(g, "persistence", n.nvmlDeviceGetPersistenceMode, h)
        call(g, "mig", n.nvmlDeviceGetMigMode, h)
        call(g, "ecc_mode", n.nvmlDeviceGetEccMode, h)
        U, C = n.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, n.NVML_MEMORY_ERROR_TYPE_CORRECTED
        V, A = n.NVML_VOLATILE_ECC, n.NVML_AGGREGATE_ECC
        for tname, t in (("unc", U), ("cor", C)):
            for cname, c in (("vol", V), ("agg", A)):
                call(g, f"ecc_total_{tname}_{cname}", n.nvmlDeviceGetTotalEccErrors, h, t, c)
                for lname, loc in (("sram", n.NVML_MEMORY_LOCATION_SRAM), ("dram", n.NVML_MEMORY_LOCATION_DRAM)):
                    call(g, f"ecc_{tname}_{cname}_{lname}", n.nvmlDeviceGetMemoryErrorCounter, h, t, c, loc)
        call(g, "remapped_rows", n.nvmlDeviceGetRemappedRows, h)
        call(g, "clock_event_reasons", n.nvmlDeviceGetCurrentClocksEventReasons, h)
        call(g, "temperature", n.nvmlDeviceGetTemperature, h, n.NVML_TEMPERATURE_GPU)
        call(g, "temperature_v", n.nvmlDeviceGetTemperatureV, h, n.NVML_TEMPERATURE_GPU)
        for tname in ("SLOWDOWN", "SHUTDOWN", "GPU_MAX"):
            call(g, f"threshold_{tname.lower()}", n.nvmlDeviceGetTemperatureThreshold, h,
                 getattr(n, f"NVML_TEMPERATURE_THRESHOLD_{tname}"))
        call(g, "power_enforced", n.nvmlDeviceGetEnforcedPowerLimit, h)
        call(g, "power_default", n.nvmlDeviceGetPowerManagementDefaultLimit, h)
        call(g, "pcie_gen_curr", n.nvmlDeviceGetCurrPcieLinkGeneration, h)
        call(g, "pcie_gen_max", n.nvmlDeviceGetMaxPcieLinkGeneration, h)
        call(g, "pcie_gen_gpu_max", n.nvmlDeviceGetGpuMaxPcieLinkGeneration, h)
        call(g, "pcie_width_curr", n.nvmlDeviceGetCurrPcieLinkWidth, h)
        call(g, "pcie_width_max", n.nvmlDeviceGetMaxPcieLinkWidth, h)
        links = []
        for link in range(19):
            entry = {}
            state = call(entry, "state", n.nvmlDeviceGetNvLinkState, h, link)
            if isinstance(entry["state"], dict):
                links.append(entry)
                break
            for cname in ("REPLAY", "RECOVERY", "CRC_FLIT", "CRC_DATA"):
                call(entry, cname.lower(), n.nvmlDeviceGetNvLinkErrorCounter, h, link,
                     getattr(n, f"NVML_NVLINK_ERROR_DL_{cname}"))
            links.append(entry)
        g["nvlink"] = links
        info = n.c_nvmlGpuFabricInfo_t()
        if call(g, "fabric", n.nvmlDeviceGetGpuFabricInfo, h, byref(info)) is not None:
            g["fabric"] = [info.state, info.status]
        info_v = n.c_nvmlGpuFabricInfoV_t()
        if call(g, "fabric_v", n.nvmlDeviceGetGpuFabricInfoV, h, byref(info_v)) is not None:
            g["fabric_v"] = [info_v.state, info_v.status, info_v.healthMask]
        words = call(g, "cpu_affinity", n.nvmlDeviceGetCpuAffinity, h, 4)
        if words is not None:
            g["cpu_affinity"] = [int(w) for w in words]
        call(g, "numa", n.nvmlDeviceGetNumaNodeId, h)
        gpus.append(g)
    node["gpus"] = gpus
    return node

result = {}
for name, state_file in json.loads(sys.argv[1]).items():
    os.environ["BURNIN_SIM_NVML"] = state_file
    n.nvmlInit()
    try:
        result[name] = probe()
    finally:
        n.nvmlShutdown()
print(json.dumps(result))
'''


@pytest.fixture(scope="session")
def sim_topology() -> Topology:
    return find_topology("hgx-h100-8gpu")


def node_env(node: SimNode) -> dict[str, str]:
    return {**os.environ, **node.environment(), "LC_ALL": "C"}


def run_tool(node: SimNode, *argv: str) -> subprocess.CompletedProcess[str]:
    """Run a command found on the node's PATH (its shims), as the collector does."""
    return subprocess.run(list(argv), env=node_env(node), capture_output=True, text=True, timeout=30,
                          check=False)


def probe_nvml(nodes: list[SimNode]) -> dict[str, Any]:
    """NVML as real pynvml sees it, for every node, from one subprocess."""
    if not nodes:
        return {}
    env = node_env(nodes[0])
    arg = json.dumps({n.name: str(n.nvml_state) for n in nodes})
    proc = subprocess.run([sys.executable, "-c", NVML_PROBE, arg], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    data: dict[str, Any] = json.loads(proc.stdout)
    return data


@pytest.fixture(scope="session")
def sim_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], Path]]:
    """Make fresh directories for simulated racks, on tmpfs when the host has one.

    A rack is thousands of small files; on a busy shared disk their writeback can take
    tens of seconds, on /dev/shm well under one.
    """
    shm = Path("/dev/shm")
    base: Path | None = None
    if shm.is_dir() and os.access(shm, os.W_OK):
        base = Path(tempfile.mkdtemp(prefix="burnin-sim-tests-", dir=shm))
    counter = iter(range(1_000_000))

    def make(name: str) -> Path:
        if base is None:
            return tmp_path_factory.mktemp(name)
        path = base / f"{name}{next(counter)}"
        path.mkdir()
        return path

    yield make
    if base is not None:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def healthy_node(sim_dir: Callable[[str], Path], sim_topology: Topology) -> SimNode:
    node, = build_rack(sim_dir("healthy"), sim_topology, ["sim01"])
    return node


@pytest.fixture(scope="session")
def healthy_nvml(healthy_node: SimNode) -> dict[str, Any]:
    result: dict[str, Any] = probe_nvml([healthy_node])[healthy_node.name]
    return result


@pytest.fixture(scope="session")
def tool() -> Callable[..., subprocess.CompletedProcess[str]]:
    return run_tool


@pytest.fixture(scope="session")
def nvml_probe() -> Callable[[list[SimNode]], dict[str, Any]]:
    return probe_nvml


@pytest.fixture(scope="session")
def env_of() -> Callable[[SimNode], dict[str, str]]:
    return node_env
