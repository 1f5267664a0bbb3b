"""Rendering nodes: layout, environment, idempotence, fault injection on a live node, speed,
and a healthy node that matches its topology."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from burnin.errors import UsageError
from burnin.sim import SimNode, apply_fault, build_rack, clear_faults, parse_fault_spec
from burnin.sim.faults import validate_fault
from burnin.topology import Topology

Tool = Callable[..., subprocess.CompletedProcess[str]]
Dirs = Callable[[str], Path]
Probe = Callable[[list[SimNode]], dict[str, Any]]
SHIMS = {"nvidia-smi", "ibstat", "ibv_devinfo", "dmesg", "lspci", "systemctl", "setpci", "lsmod", "nvbandwidth",
         "ib_write_bw", "p2pBandwidthLatencyTest",
         *(f"{c}_perf" for c in ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv",
                                 "broadcast", "reduce")),
         "ip", "ibdev2netdev", "mlxconfig", "mlnx_qos", "ethtool"}  # storage fabric (burnin.sim.storage)

SHIMS |= {"gpu_burn", "dcgmi", "stress-ng", "stream", "numactl", "nvme"}  # soak tools (burnin.sim.soak_shims)
SHIMS |= {"torchrun", "pretrain_gpt.py", "burnin-placement-probe"}  # Megatron stand-ins (burnin.sim.megatron)
SHIMS |= {"dd", "fio"}  # STO-03's write tools (burnin.sim.formats.write_tool)
SHIMS |= {"ping"}  # STO-04's path-MTU probe (burnin.sim.formats.ping)
SHIMS |= {"ofed_info"}  # INV-10's software stack (burnin.sim.software)
SHIMS |= {"docker", "podman", "apptainer", "singularity", "enroot"}  # container stand-ins (burnin.sim.megatron)

def test_node_directory_layout(healthy_node: SimNode) -> None:
    d = healthy_node.dir
    assert d.name == "sim01" and d.parent.name == "nodes"
    assert {p.name for p in d.iterdir()} == {"node.json", "nvml.state", "lib", "root", "bin", "out"}
    assert {p.name for p in (d / "bin").iterdir()} == SHIMS
    for shim in (d / "bin").iterdir():
        assert os.access(shim, os.X_OK)
        assert shim.read_text().startswith("#!/bin/sh\n")
    assert healthy_node.root == d / "root"
    state = json.loads((d / "node.json").read_text())
    assert state["name"] == "sim01" and state["topology_name"] == "hgx-h100-8gpu" and state["faults"] == []
    assert "driver_version=535.183.01" in (d / "nvml.state").read_text()


def test_environment_is_all_a_process_needs(healthy_node: SimNode) -> None:
    env = healthy_node.environment()
    base = {"PATH", "LD_LIBRARY_PATH", "BURNIN_ROOT", "BURNIN_SIM_NVML", "BURNIN_SIM_NODE"}
    # where this python's torch is, for GPU-14's workload on the node (burnin.sim.sdc): only when torch is there
    sdc = {"BURNIN_SIM_SDC_PYTHON", "BURNIN_SIM_TORCH_PATH"} if importlib.util.find_spec("torch") else set()
    assert base <= set(env) <= base | {"BURNIN_SIM_SDC_PYTHON", "BURNIN_SIM_TORCH_PATH"} and sdc <= set(env)
    assert env["PATH"].split(os.pathsep)[0] == str(healthy_node.dir / "bin")
    assert env["PATH"].endswith(os.environ["PATH"])
    assert env["BURNIN_ROOT"] == str(healthy_node.root)
    assert env["BURNIN_SIM_NVML"] == str(healthy_node.dir / "nvml.state")
    assert env["BURNIN_SIM_NODE"] == "sim01"


def test_symlinks_are_relative_and_stay_inside_root(healthy_node: SimNode) -> None:
    root = healthy_node.root.resolve()
    links = [p for p in root.rglob("*") if p.is_symlink()]
    assert len(links) > 100
    for link in links:
        assert not os.readlink(link).startswith("/"), link
        assert Path(os.path.realpath(link)).is_relative_to(root), link
        assert link.exists(), f"dangling {link}"


def test_gpu_and_paired_hca_share_a_switch(healthy_node: SimNode, sim_topology: Topology) -> None:
    bus = healthy_node.root / "sys/bus/pci/devices"

    def chain(bdf: str) -> list[str]:
        return Path(os.path.realpath(bus / bdf)).relative_to(healthy_node.root.resolve()).parts[2:-1]

    hcas = {h.name: h for h in sim_topology.hcas}
    for device in sim_topology.gpus.devices:
        gpu, hca = chain(device.bus_id), chain(hcas[str(device.hca)].bus_id)
        common = [a for a, b in zip(gpu, hca, strict=False) if a == b]
        assert len(common) == 3 and len(gpu) == len(hca) == 4  # host bridge, root port, upstream port
        switch_up = bus / common[-1]
        assert (switch_up / "vendor").read_text().strip() in ("0x1000", "0x10b5")
        assert (switch_up / "class").read_text().strip() == "0x060400"
        assert gpu[-1] != hca[-1]  # two downstream ports of that switch
    for storage in sim_topology.storage_hcas:
        assert len(chain(storage.bus_id)) == 2  # host bridge and its own root port


def test_healthy_node_matches_the_topology(healthy_node: SimNode, sim_topology: Topology,
                                           healthy_nvml: dict[str, Any]) -> None:
    root = healthy_node.root

    def read(path: str) -> str:
        return (root / path).read_text().strip()

    refs = sim_topology.references
    for device, gpu in zip(sim_topology.gpus.devices, healthy_nvml["gpus"], strict=True):
        pci = f"sys/bus/pci/devices/{device.bus_id}"
        assert read(f"{pci}/vendor") == "0x10de" and read(f"{pci}/class") == "0x030200"
        assert read(f"{pci}/numa_node") == str(device.numa_node)
        assert read(f"{pci}/local_cpulist") == sim_topology.numa.cpulists[device.numa_node]
        assert read(f"{pci}/current_link_speed") == read(f"{pci}/max_link_speed") == "32.0 GT/s PCIe"
        assert read(f"{pci}/current_link_width") == "16"
        assert refs["gpu_memory_mib"].admits(gpu["memory"] // (1024 * 1024))
        assert refs["power_limit_w"].admits(gpu["power_enforced"] / 1000)
        assert refs["gpu_pcie_gen"].admits(gpu["pcie_gen_curr"])
        assert refs["gpu_pcie_width"].admits(gpu["pcie_width_curr"])
        assert refs["nvlink_links_active"].admits(sum(1 for link in gpu["nvlink"] if link["state"] == 1))
        assert refs["gpu_temp_margin_c"].admits(gpu["threshold_gpu_max"] - gpu["temperature"])
        assert refs["ecc_uncorrected_volatile"].admits(gpu["ecc_total_unc_vol"])
        assert refs["sram_uncorrected_aggregate"].admits(gpu["ecc_unc_agg_sram"])
    for hca in sim_topology.hcas:
        base = f"sys/class/infiniband/{hca.name}"
        assert Path(os.path.realpath(root / base / "device")).name == hca.bus_id
        assert read(f"{base}/ports/1/link_layer") == hca.link_layer
        assert read(f"{base}/ports/1/state") == "4: ACTIVE" and read(f"{base}/ports/1/phys_state") == "5: LinkUp"
        assert refs["ib_rate_gbps"].admits(float(read(f"{base}/ports/1/rate").split()[0]))
        counters = root / base / "ports/1/counters"
        traffic = ("_data", "_packets")  # _data: STO-03's byte counters; both: the watch's stall detector
        errors = [c for c in counters.iterdir() if not c.name.endswith(traffic)]
        assert len(errors) == 12 and {c.name for c in counters.iterdir()} - {c.name for c in errors} == {
            "port_xmit_data", "port_rcv_data", "port_xmit_packets", "port_rcv_packets"}
        assert all(c.read_text().strip() == "0" for c in errors)
        assert read(f"sys/bus/pci/devices/{hca.bus_id}/numa_node") == str(hca.numa_node)
    assert read("sys/devices/system/node/online") == "0-1"
    assert read("sys/devices/system/node/node1/cpulist") == sim_topology.numa.cpulists[1]
    assert read("sys/module/nvidia/version") == sim_topology.host.driver_version
    assert read("proc/driver/nvidia/version").startswith(
        f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {sim_topology.host.driver_version}  ")
    assert (root / "sys/module/nvidia_peermem").is_dir()
    assert refs["numa_balancing"].admits(int(read("proc/sys/kernel/numa_balancing")))
    assert "iommu=pt" in read("proc/cmdline").split()
    types = {(g / "type").read_text().strip() for g in (root / "sys/kernel/iommu_groups").iterdir()}
    assert types == {"identity"}


@pytest.mark.rack
def test_rebuild_is_idempotent_and_leaves_no_temporaries(sim_dir: Dirs, sim_topology: Topology,
                                                         tool: Tool) -> None:
    state_dir = sim_dir("idem")
    first = build_rack(state_dir, sim_topology, ["a1", "a2"])
    before = (first[0].dir / "out/ibstat/all.txt").read_text()
    vendor = first[0].root / "sys/bus/pci/devices/0000:1b:00.0/vendor"
    inode = vendor.stat().st_ino
    again = build_rack(state_dir, sim_topology, ["a1", "a2"])
    assert [n.dir for n in again] == [n.dir for n in first]
    assert (again[0].dir / "out/ibstat/all.txt").read_text() == before
    assert vendor.stat().st_ino == inode  # unchanged files are not rewritten
    assert not [p for p in again[0].dir.iterdir() if p.name.startswith(".")]
    assert SimNode.load(again[1].dir) == again[1]
    assert tool(again[1], "ibstat").returncode == 0


@pytest.mark.rack
def test_apply_and_clear_faults_on_an_existing_node(sim_dir: Dirs, sim_topology: Topology, tool: Tool,
                                                    nvml_probe: Probe) -> None:
    node, = build_rack(sim_dir("apply"), sim_topology, ["b1"])
    apply_fault(node.dir, parse_fault_spec("ib-rate-200@mlx5_6"))
    apply_fault(node.dir, "xid:48@gpu0")
    apply_fault(node.dir, "xid:48@gpu0")  # again: no duplicate
    assert node.state().faults == ["ib-rate-200@mlx5_6", "xid:48@gpu0"]
    assert [f.label for f in node.faults] == ["ib-rate-200", "xid:48"]
    assert (node.root / "sys/class/infiniband/mlx5_6/ports/1/rate").read_text().strip() == "200 Gb/sec (4X HDR)"
    assert tool(node, "dmesg").stdout.count("NVRM: Xid") == 1
    apply_fault(node.dir, "thermal@gpu5")
    assert nvml_probe([node])["b1"]["gpus"][5]["temperature"] == 86
    hca = node.root / "sys/bus/pci/devices/0000:5e:00.0"
    old_path = os.path.realpath(hca)
    apply_fault(node.dir, "nic-affinity@gpu3")  # moves mlx5_3 to its own root port, in place
    assert os.path.realpath(hca) != old_path and not os.path.exists(old_path)
    assert os.path.realpath(node.root / "sys/class/infiniband/mlx5_3/device") == os.path.realpath(hca)
    assert "PIX" not in tool(node, "nvidia-smi", "topo", "-m").stdout.splitlines()[4].split("\t")[9:19]
    assert not [p for p in node.dir.iterdir() if p.name.startswith(".")]
    clear_faults(node.dir)
    assert node.state().faults == []
    assert (node.root / "sys/class/infiniband/mlx5_6/ports/1/rate").read_text().strip() == "400 Gb/sec (4X NDR)"
    assert "NVRM: Xid" not in tool(node, "dmesg").stdout
    assert nvml_probe([node])["b1"]["gpus"][5]["temperature"] < 80
    with pytest.raises(UsageError, match="not a simulated node directory"):
        apply_fault(node.dir / "root", "thermal")


@pytest.mark.rack
def test_faults_compose_on_one_node(sim_dir: Dirs, sim_topology: Topology, nvml_probe: Probe) -> None:
    node, = build_rack(sim_dir("compose"), sim_topology, ["c1"],
                       {"c1": ["gpu-missing@gpu1", "acs-enabled@gpu1", "nic-affinity@gpu1", "thermal@gpu6",
                               "fabric-manager-down"]})
    nv = nvml_probe([node])["c1"]
    assert nv["count"] == 7
    assert [g["temperature"] for g in nv["gpus"]].count(86) == 1
    assert {tuple(g["fabric"]) for g in nv["gpus"]} == {(1, 0)}
    assert not (node.root / "sys/bus/pci/devices/0000:43:00.0").exists()


def test_bad_rack_requests(sim_dir: Dirs, sim_topology: Topology) -> None:
    with pytest.raises(UsageError, match="unknown node"):
        build_rack(sim_dir("bad"), sim_topology, ["d1"], {"d9": ["thermal"]})
    with pytest.raises(UsageError, match="gpu8"):
        build_rack(sim_dir("bad"), sim_topology, ["d1"], {"d1": ["thermal@gpu8"]})


@pytest.mark.rack
def test_node_directory_can_be_moved(sim_dir: Dirs, sim_topology: Topology, tool: Tool) -> None:
    node, = build_rack(sim_dir("move"), sim_topology, ["e1"], {"e1": ["pcie-x8@gpu2"]})
    target = sim_dir("moved") / "elsewhere"
    shutil.move(str(node.dir), str(target))
    moved = SimNode.load(target)
    assert moved.name == "e1" and moved.dir == target
    assert tool(moved, "nvidia-smi", "topo", "-m").returncode == 0
    width = Path(os.path.realpath(moved.root / "sys/bus/pci/devices/0000:52:00.0")) / "current_link_width"
    assert width.read_text().strip() == "8"


@pytest.mark.rack
def test_collector_style_pynvml_session_is_fast(healthy_node: SimNode,
                                                env_of: Callable[[SimNode], dict[str, str]]) -> None:
    code = (
        "import time, pynvml as n\n"
        "t = time.perf_counter()\n"
        "n.nvmlInit()\n"
        "for i in range(n.nvmlDeviceGetCount()):\n"
        "    h = n.nvmlDeviceGetHandleByIndex(i)\n"
        "    n.nvmlDeviceGetName(h); n.nvmlDeviceGetPciInfo(h); n.nvmlDeviceGetMemoryInfo(h)\n"
        "    n.nvmlDeviceGetTotalEccErrors(h, 1, 0); n.nvmlDeviceGetRemappedRows(h)\n"
        "    for link in range(18):\n"
        "        n.nvmlDeviceGetNvLinkState(h, link); n.nvmlDeviceGetNvLinkErrorCounter(h, link, 1)\n"
        "n.nvmlShutdown()\n"
        "print(time.perf_counter() - t)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=env_of(healthy_node), capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert float(proc.stdout) >= 0  # the whole session ran; its speed is bench/probe's to measure


@pytest.mark.rack
def test_a_rack_rendered_by_several_threads_gets_one_tree_per_node(sim_dir: Dirs, sim_topology: Topology) -> None:
    # 16 nodes keep the renderer's four threads busy; a rack's speed at 64 nodes is bench/fanout's to measure
    state_dir = sim_dir("threads")
    nodes = build_rack(state_dir, sim_topology, [f"n{i:02d}" for i in range(1, 17)])
    assert [node.name for node in nodes] == [f"n{i:02d}" for i in range(1, 17)]
    assert len({node.root for node in nodes}) == 16
    assert len({(node.root / "sys/class/infiniband/mlx5_0/node_guid").read_text() for node in nodes}) == 16


@pytest.mark.rack
def test_one_gpu_topology_without_nvlink(sim_dir: Dirs, sim_topology: Topology, nvml_probe: Probe, tool: Tool) -> None:
    gpu = dataclasses.replace(sim_topology.gpus.devices[0], hca=None)
    small = dataclasses.replace(
        sim_topology, name="one-gpu", hcas=(),
        gpus=dataclasses.replace(sim_topology.gpus, count=1, devices=(gpu,), nvlink=None),
        host=dataclasses.replace(sim_topology.host, fabric_manager=False),
    )
    assert parse_fault_spec("thermal", small).target == "gpu0"
    assert validate_fault(parse_fault_spec("thermal"), small).target == "gpu0"  # parsed before the topology
    with pytest.raises(UsageError, match="gpu3"):
        validate_fault(parse_fault_spec("thermal@gpu3"), small)
    node, = build_rack(sim_dir("one"), small, ["g1"], {"g1": ["thermal"]})
    nv = nvml_probe([node])["g1"]
    assert nv["count"] == 1 and nv["gpus"][0]["temperature"] == 86
    assert nv["gpus"][0]["nvlink"][0]["state"]["class"] == "NVMLError_NotSupported"
    assert nv["gpus"][0]["fabric"]["class"] == "NVMLError_NotSupported"
    assert tool(node, "nvidia-smi", "topo", "-m").stdout.splitlines()[1].startswith("GPU0\t X \t")
    with pytest.raises(UsageError, match="needs NVLink"):
        build_rack(sim_dir("one"), small, ["g2"], {"g2": ["nvlink-down"]})
    with pytest.raises(UsageError, match="paired HCA"):
        parse_fault_spec("nic-affinity", small)
