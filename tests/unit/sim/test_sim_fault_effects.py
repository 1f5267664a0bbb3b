"""Every fault changes what its check reads, on its target only.

A snapshot flattens everything the collector can see on a node (NVML through real
pynvml, sysfs/procfs, and the shims parsed by burnin.parsers) into ``key -> value``,
keys naming the device by bus id or HCA name. A faulted node is diffed against a
healthy one: the fault's expected values must be there, and every changed key must
belong to the fault's target (or to the node-level facts that fault is about).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from burnin.parsers.dmesg import parse_xid_events
from burnin.parsers.ibstat import parse_ibstat
from burnin.parsers.ibv_devinfo import parse_ibv_devinfo
from burnin.parsers.lspci import parse_lspci
from burnin.parsers.nvidia_smi import parse_nvlink, parse_smi_query, parse_topo_matrix
from burnin.sim import SimNode, build_rack
from burnin.topology import Topology

pytestmark = pytest.mark.rack

MISSING = "<missing>"
Snapshot = dict[str, Any]
Tool = Callable[..., Any]

GPU3 = "0000:61:00.0"
GPU3_PORT = "0000:5d:01.0"  # the switch downstream port above GPU3
GPU3_HCA = "0000:5e:00.0"  # mlx5_3, paired with GPU3 on the same switch
GPU3_HCA_PORT = "0000:5d:00.0"
GPU1 = "0000:43:00.0"
MLX5_2 = "0000:4f:00.0"
MLX5_2_PORT = "0000:4e:00.0"  # the switch downstream port above mlx5_2 (shared with GPU2)


def _bdf(nvml_bus_id: str) -> str:
    """NVML/nvidia-smi ``00000000:1B:00.0`` -> sysfs ``0000:1b:00.0``."""
    domain, _, rest = nvml_bus_id.partition(":")
    return f"{int(domain, 16):04x}:{rest.lower()}"


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError:
        return MISSING


def _sysfs(node: SimNode, snap: Snapshot) -> None:
    root = node.root
    for link in sorted((root / "sys/bus/pci/devices").iterdir()):
        real = Path(os.path.realpath(link))
        assert real.is_relative_to(root.resolve()), f"{link} escapes the root"
        snap[f"pci.{link.name}.path"] = str(real.relative_to(root.resolve()))
        for name in ("vendor", "device", "class", "numa_node", "local_cpulist", "local_cpus",
                     "current_link_speed", "current_link_width", "max_link_speed", "max_link_width"):
            snap[f"pci.{link.name}.{name}"] = _read(real / name)
    for hca_dir in sorted((root / "sys/class/infiniband").iterdir()):
        hca = hca_dir.name
        snap[f"ib.{hca}.pci"] = Path(os.path.realpath(hca_dir / "device")).name
        for name in ("fw_ver", "board_id", "hca_type", "node_guid"):
            snap[f"ib.{hca}.{name}"] = _read(hca_dir / name)
        port = hca_dir / "ports" / "1"
        for name in ("state", "phys_state", "rate", "link_layer", "lid", "sm_lid"):
            snap[f"ib.{hca}.{name}"] = _read(port / name)
        for counter in sorted((port / "counters").iterdir()):
            snap[f"ib.{hca}.counter.{counter.name}"] = _read(counter)
        snap[f"ib.{hca}.pkeys"] = tuple(sorted((p.name, _read(p)) for p in (port / "pkeys").iterdir()
                                               if _read(p) != "0x0000"))
    groups = root / "sys/kernel/iommu_groups"
    types = sorted(_read(g / "type") for g in groups.iterdir()) if groups.is_dir() else []
    snap["kernel.iommu_types"] = tuple(sorted(set(types)))
    snap["kernel.numa_balancing"] = _read(root / "proc/sys/kernel/numa_balancing")
    snap["kernel.cmdline"] = _read(root / "proc/cmdline")
    snap["kernel.module_version"] = _read(root / "sys/module/nvidia/version")
    snap["kernel.proc_driver_version"] = _read(root / "proc/driver/nvidia/version").splitlines()[0]
    snap["kernel.peermem"] = (root / "sys/module/nvidia_peermem").is_dir()
    modules = [line.split()[0] for line in _read(root / "proc/modules").splitlines()]
    snap["kernel.proc_modules_peermem"] = "nvidia_peermem" in modules
    snap["kernel.numa_online"] = _read(root / "sys/devices/system/node/online")


def _nvml(nvml: dict[str, Any], node: SimNode, snap: Snapshot) -> None:
    snap["nvml.count"] = nvml["count"]
    snap["nvml.driver"] = nvml["driver"]
    snap["nvml.cuda"] = nvml["cuda"]
    visible = node.state().visible_gpus
    for gpu in nvml["gpus"]:
        bdf = _bdf(gpu["bus_id"]) if gpu.get("bus_id") else visible[gpu["index"]].bus_id
        for key, value in gpu.items():
            if key in ("index", "bus_id"):
                continue
            if key == "nvlink":
                for link, entry in enumerate(value):
                    for counter, number in entry.items():
                        snap[f"nvml.{bdf}.nvlink.{link}.{counter}"] = _freeze(number)
                continue
            snap[f"nvml.{bdf}.{key}"] = _freeze(value)


def _freeze(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    return value


def _tools(node: SimNode, snap: Snapshot, tool: Tool) -> None:
    query = tool(node, "nvidia-smi", "-q")
    snap["smi.rc"] = query.returncode
    gpu_bdfs: list[str] = []
    if query.returncode == 0:
        parsed = parse_smi_query(query.stdout)
        snap["smi.attached_gpus"] = parsed.attached_gpus
        snap["smi.driver"] = parsed.driver_version
        for gpu in parsed.gpus:
            assert gpu.pci_bus_id is not None
            bdf = _bdf(gpu.pci_bus_id)
            gpu_bdfs.append(bdf)
            for name in ("persistence_mode", "mig_mode_current", "ecc_mode_current", "pcie_gen_current",
                         "pcie_gen_max", "link_width_current", "link_width_max", "power_limit_w",
                         "default_power_limit_w", "fabric_state", "fabric_status", "vbios_version"):
                snap[f"smi.{bdf}.{name}"] = getattr(gpu, name)
            snap[f"smi.{bdf}.ecc_volatile_uncorrectable"] = (
                gpu.ecc_volatile.uncorrectable_total if gpu.ecc_volatile else None)
            snap[f"smi.{bdf}.remapped"] = (gpu.remapped_rows.pending, gpu.remapped_rows.failure) \
                if gpu.remapped_rows else None
            snap[f"smi.{bdf}.hw_slowdown"] = (gpu.clock_event_reasons or {}).get("HW Slowdown")
            snap[f"smi.{bdf}.temp"] = gpu.temperature.gpu_c if gpu.temperature else None
    topo = tool(node, "nvidia-smi", "topo", "-m")
    snap["topo.rc"] = topo.returncode
    if topo.returncode == 0:
        matrix = parse_topo_matrix(topo.stdout)
        names = dict(zip(matrix.gpus, gpu_bdfs, strict=True))
        names.update(matrix.nic_names)
        for row, cols in matrix.links.items():
            for col, value in cols.items():
                snap[f"topo.{names[row]}.{names[col]}"] = value
        for gpu in matrix.gpus:
            snap[f"topo.{names[gpu]}.cpu_affinity"] = matrix.cpu_affinity[gpu]
            snap[f"topo.{names[gpu]}.numa_affinity"] = matrix.numa_affinity[gpu]
    status = tool(node, "nvidia-smi", "nvlink", "--status")
    if status.returncode == 0:
        for gpu in parse_nvlink(status.stdout).gpus:
            for link in gpu.links:
                snap[f"nvlink.{gpu_bdfs[gpu.index]}.{link.link}.active"] = link.active
    errors = tool(node, "nvidia-smi", "nvlink", "-e")
    if errors.returncode == 0:
        for gpu in parse_nvlink(errors.stdout).gpus:
            for link in gpu.links:
                snap[f"nvlink.{gpu_bdfs[gpu.index]}.{link.link}.errors"] = _freeze(link.errors)
    for ca in parse_ibstat(tool(node, "ibstat").stdout).cas:
        port = ca.ports[0]
        snap[f"ibstat.{ca.name}.port"] = (port.state, port.physical_state, port.rate_gbps, port.link_layer,
                                          port.base_lid)
    for dev in parse_ibv_devinfo(tool(node, "ibv_devinfo").stdout).devices:
        snap[f"ibv.{dev.name}"] = (dev.fw_ver, dev.ports[0].state, dev.ports[0].active_mtu)
    xids = parse_xid_events(tool(node, "dmesg").stdout)
    for event in xids.events:
        snap[f"dmesg.xid.{event.pci}.{event.xid}"] = (event.text, event.pid)
    for pci, uuid in xids.gpu_uuids.items():
        snap[f"dmesg.uuid.{pci}"] = uuid
    for limit in xids.pcie_limits:
        snap[f"dmesg.limit.{limit.device}"] = (limit.limited_speed_gts, limit.limited_width, limit.limited_at)
    for device in parse_lspci(tool(node, "lspci", "-vvv").stdout).devices:
        snap[f"lspci.{device.address}"] = (device.device_class, device.lnksta_speed_gts, device.lnksta_width,
                                          device.lnksta_downgraded, _freeze(device.acs_ctl))
    fm = tool(node, "systemctl", "is-active", "nvidia-fabricmanager")
    snap["systemctl.fabricmanager"] = (fm.stdout.strip(), fm.returncode)


def take(node: SimNode, nvml: dict[str, Any], tool: Tool) -> Snapshot:
    snap: Snapshot = {}
    _nvml(nvml, node, snap)
    _sysfs(node, snap)
    _tools(node, snap, tool)
    return snap


def diff(healthy: Snapshot, faulted: Snapshot) -> dict[str, tuple[Any, Any]]:
    keys = set(healthy) | set(faulted)
    return {k: (healthy.get(k, MISSING), faulted.get(k, MISSING)) for k in keys
            if healthy.get(k, MISSING) != faulted.get(k, MISSING)}


def mentions(*tokens: str) -> Callable[[str], bool]:
    return lambda key: any(token in key for token in tokens)


def prefixed(*prefixes: str) -> Callable[[str], bool]:
    return lambda key: key.startswith(prefixes)


def either(*preds: Callable[[str], bool]) -> Callable[[str], bool]:
    return lambda key: any(p(key) for p in preds)


LOST = (15, "NVMLError_GpuIsLost")
ACS_REDIRECT = (("CmpltRedir", True), ("DirectTrans", False), ("EgressCtrl", False), ("ReqRedir", True),
                ("SrcValid", True), ("TransBlk", False), ("UpstreamFwd", True))


@dataclass
class Case:
    spec: str
    expect: dict[str, Any]
    allowed: Callable[[str], bool]
    present: tuple[str, ...] = field(default=())  # keys that must change (value not pinned down)


def _nv(bdf: str, key: str) -> str:
    return f"nvml.{bdf}.{key}"


CASES = [
    Case("gpu-missing@gpu3", {"nvml.count": 7, _nv(GPU3, "name"): MISSING, f"pci.{GPU3}.vendor": MISSING,
                              "smi.attached_gpus": 7, f"topo.{GPU3}.{GPU3_HCA}": MISSING},
         either(mentions(GPU3), prefixed("nvml.count", "smi.attached_gpus"))),
    Case("gpu-lost@gpu3", {_nv(GPU3, "handle"): (("class", LOST[1]), ("error", LOST[0])), "smi.rc": 15,
                           "topo.rc": 15},
         either(mentions(GPU3), prefixed("smi.", "topo.", "nvlink."))),
    Case("ecc-uncorrectable@gpu3", {_nv(GPU3, "ecc_total_unc_vol"): 2, _nv(GPU3, "ecc_unc_vol_dram"): 2,
                                    _nv(GPU3, "ecc_unc_agg_dram"): 2, f"smi.{GPU3}.ecc_volatile_uncorrectable": 2},
         mentions(GPU3)),
    Case("row-remap-pending@gpu3", {_nv(GPU3, "remapped_rows"): (0, 1, 1, 0), f"smi.{GPU3}.remapped": (True, False)},
         mentions(GPU3)),
    Case("row-remap-failure@gpu3", {_nv(GPU3, "remapped_rows"): (0, 8, 0, 1), f"smi.{GPU3}.remapped": (False, True)},
         mentions(GPU3)),
    Case("xid:79@gpu3", {"dmesg.xid.0000:61:00.79": ("GPU has fallen off the bus.", None)},
         mentions("0000:61:00")),
    Case("xid:13@gpu1", {}, mentions("0000:43:00"), present=("dmesg.xid.0000:43:00.13",)),
    Case("hw-slowdown@gpu3", {_nv(GPU3, "clock_event_reasons"): 0x8, f"smi.{GPU3}.hw_slowdown": True},
         mentions(GPU3)),
    Case("thermal@gpu3", {_nv(GPU3, "temperature"): 86, _nv(GPU3, "temperature_v"): 86, f"smi.{GPU3}.temp": 86},
         mentions(GPU3)),
    Case("power-capped@gpu3", {_nv(GPU3, "power_enforced"): 500000, _nv(GPU3, "power_default"): 700000,
                               f"smi.{GPU3}.power_limit_w": 500.0},
         mentions(GPU3)),
    Case("pcie-gen4@gpu3", {_nv(GPU3, "pcie_gen_curr"): 4, _nv(GPU3, "pcie_gen_max"): 4,
                            _nv(GPU3, "pcie_gen_gpu_max"): 5, f"pci.{GPU3}.current_link_speed": "16.0 GT/s PCIe",
                            f"pci.{GPU3_PORT}.max_link_speed": "16.0 GT/s PCIe",
                            f"pci.{GPU3_PORT}.current_link_speed": "16.0 GT/s PCIe",
                            f"smi.{GPU3}.pcie_gen_current": 4,
                            f"dmesg.limit.{GPU3}": (16.0, 16, GPU3_PORT)},
         mentions(GPU3, GPU3_PORT)),
    Case("pcie-x8@gpu3", {_nv(GPU3, "pcie_width_curr"): 8, _nv(GPU3, "pcie_width_max"): 16,
                          f"pci.{GPU3}.current_link_width": "8", f"pci.{GPU3}.max_link_width": "16",
                          f"pci.{GPU3_PORT}.current_link_width": "8", f"smi.{GPU3}.link_width_current": 8,
                          f"dmesg.limit.{GPU3}": (32.0, 8, GPU3_PORT)},
         mentions(GPU3, GPU3_PORT)),
    Case("nvlink-down@gpu3", {_nv(GPU3, "nvlink.7.state"): 0, _nv(GPU3, "nvlink.6.state"): 1,
                              f"topo.{GPU3}.0000:1b:00.0": "NV17", f"topo.0000:df:00.0.{GPU3}": "NV17",
                              f"nvlink.{GPU3}.7.active": False},
         mentions(GPU3)),
    Case("nvlink-errors@gpu3", {_nv(GPU3, "nvlink.7.recovery"): 3, _nv(GPU3, "nvlink.7.replay"): 250,
                                f"nvlink.{GPU3}.7.errors": (("CRC Errors", 0), ("Recovery Errors", 3),
                                                             ("Replay Errors", 250))},
         mentions(GPU3)),
    Case("mig-enabled@gpu3", {_nv(GPU3, "mig"): (1, 1), f"smi.{GPU3}.mig_mode_current": "Enabled"}, mentions(GPU3)),
    Case("persistence-off@gpu3", {_nv(GPU3, "persistence"): 0, f"smi.{GPU3}.persistence_mode": "Disabled"},
         mentions(GPU3)),
    Case("ecc-disabled@gpu3", {_nv(GPU3, "ecc_mode"): (0, 0), f"smi.{GPU3}.ecc_mode_current": "Disabled"},
         mentions(GPU3)),
    Case("vbios-mismatch@gpu3", {_nv(GPU3, "vbios"): "96.00.74.00.0D", _nv(GPU1, "vbios"): "96.00.74.00.01",
                                 f"smi.{GPU3}.vbios_version": "96.00.74.00.0D"},
         mentions(GPU3)),
    Case("numa-mismatch@gpu3", {f"pci.{GPU3}.numa_node": "-1", f"topo.{GPU3}.numa_affinity": None,
                                _nv(GPU3, "numa"): (("class", "NVMLError_NotSupported"), ("error", 3))},
         mentions(GPU3)),
    Case("cpu-affinity@gpu3", {f"pci.{GPU3}.local_cpulist": "56-111,168-223",
                               f"topo.{GPU3}.cpu_affinity": "56-111,168-223", f"pci.{GPU3}.numa_node": "0"},
         mentions(GPU3), present=(_nv(GPU3, "cpu_affinity"),)),
    Case("nic-affinity@gpu3", {f"topo.{GPU3}.mlx5_3": "NODE", f"topo.mlx5_3.{GPU3}": "NODE",
                               f"lspci.{GPU3_HCA_PORT}": MISSING},
         mentions(GPU3, "mlx5_3", GPU3_HCA, GPU3_HCA_PORT, "0000:5a:01.0")),
    Case("acs-enabled@gpu3", {f"lspci.{GPU3_PORT}": ("PCI bridge", 32.0, 16, False, ACS_REDIRECT)},
         mentions(GPU3_PORT, GPU3_HCA_PORT), present=(f"lspci.{GPU3_HCA_PORT}",)),
    Case("fabric-manager-down", {_nv(GPU3, "fabric"): (1, 0), _nv("0000:1b:00.0", "fabric"): (1, 0),
                                 "systemctl.fabricmanager": ("inactive", 3),
                                 f"smi.{GPU3}.fabric_state": "Not Started"},
         either(prefixed("systemctl."), lambda k: k.endswith((".fabric", ".fabric_v", ".fabric_state",
                                                              ".fabric_status")))),
    Case("peermem-missing", {"kernel.peermem": False, "kernel.proc_modules_peermem": False},
         prefixed("kernel.peermem", "kernel.proc_modules_peermem")),
    Case("driver-mismatch", {"kernel.module_version": "535.161.08", "nvml.driver": "535.183.01"},
         prefixed("kernel.module_version", "kernel.proc_driver_version")),
    Case("numa-balancing-on", {"kernel.numa_balancing": "1"}, prefixed("kernel.numa_balancing")),
    Case("iommu-dma", {"kernel.iommu_types": ("DMA",)}, prefixed("kernel.iommu_types", "kernel.cmdline")),
    Case("ib-port-down@mlx5_2", {"ib.mlx5_2.state": "1: DOWN", "ib.mlx5_2.phys_state": "2: Polling",
                                 "ibstat.mlx5_2.port": ("Down", "Polling", 40.0, "InfiniBand", 0)},
         mentions("mlx5_2")),
    Case("ib-rate-200@mlx5_2", {"ib.mlx5_2.rate": "200 Gb/sec (4X HDR)", "ib.mlx5_2.state": "4: ACTIVE"},
         mentions("mlx5_2"), present=("ibstat.mlx5_2.port",)),
    Case("ib-link-layer@mlx5_2", {"ib.mlx5_2.link_layer": "Ethernet", f"pci.{MLX5_2}.class": "0x020000"},
         mentions("mlx5_2", MLX5_2)),
    Case("ib-errors@mlx5_2", {"ib.mlx5_2.counter.link_downed": "2", "ib.mlx5_2.counter.symbol_error": "250"},
         mentions("mlx5_2")),
    Case("hca-fw-mismatch@mlx5_3", {"ib.mlx5_3.fw_ver": "28.39.4082", "ib.mlx5_3.board_id": "MT_0000000838",
                                    "ibv.mlx5_3": ("28.39.4082", "PORT_ACTIVE", 4096)},
         mentions("mlx5_3")),
    Case("hca-pcie-x8@mlx5_2", {f"pci.{MLX5_2}.current_link_width": "8", f"pci.{MLX5_2}.max_link_width": "16",
                                f"pci.{MLX5_2_PORT}.current_link_width": "8",
                                f"dmesg.limit.{MLX5_2}": (32.0, 8, MLX5_2_PORT)},
         mentions(MLX5_2, MLX5_2_PORT), present=(f"lspci.{MLX5_2}", f"lspci.{MLX5_2_PORT}")),
    Case("ib-mtu-2048@mlx5_1", {"ibv.mlx5_1": ("28.41.1000", "PORT_ACTIVE", 2048)}, mentions("mlx5_1")),
    Case("ib-pkey-limited@mlx5_1", {"ib.mlx5_1.pkeys": (("0", "0x7fff"),)}, mentions("mlx5_1")),
]


Rack = dict[str, tuple[SimNode, Snapshot, Snapshot]]


@pytest.fixture(scope="module")
def fault_rack(sim_dir: Callable[[str], Path], sim_topology: Topology, tool: Tool,
               nvml_probe: Callable[[list[SimNode]], dict[str, Any]]) -> Rack:
    """Per case: the faulted node, its snapshot, and the snapshot of a healthy twin (same name,
    so the same UUIDs, GUIDs and LIDs)."""
    names = [f"f{i:02d}" for i in range(len(CASES))]
    faults = {f"f{i:02d}": [case.spec] for i, case in enumerate(CASES)}
    faulted = build_rack(sim_dir("faulted"), sim_topology, names, faults)
    twins = build_rack(sim_dir("twins"), sim_topology, names)
    nvml = nvml_probe(faulted)
    twin_nvml = nvml_probe(twins)
    return {f.name: (f, take(f, nvml[f.name], tool), take(t, twin_nvml[t.name], tool))
            for f, t in zip(faulted, twins, strict=True)}


@pytest.mark.parametrize("index", range(len(CASES)), ids=[c.spec for c in CASES])
def test_fault_changes_its_source_on_its_target_only(index: int, fault_rack: Rack) -> None:
    case = CASES[index]
    node, faulted, healthy = fault_rack[f"f{index:02d}"]
    changes = diff(healthy, faulted)
    assert changes, f"{case.spec} changed nothing"
    for key, value in case.expect.items():
        assert faulted.get(key, MISSING) == value, f"{case.spec}: {key} is {faulted.get(key, MISSING)!r}"
    for key in case.present:
        assert key in changes, f"{case.spec}: {key} should change"
    stray = {k: v for k, v in changes.items() if not case.allowed(k)}
    assert not stray, f"{case.spec} changed more than its target: {sorted(stray.items())[:8]}"
    assert node.state().faults == [case.spec]


def test_healthy_snapshot_is_complete(fault_rack: Rack) -> None:
    _, _, healthy = fault_rack["f00"]
    assert healthy["nvml.count"] == 8
    assert healthy["smi.rc"] == healthy["topo.rc"] == 0
    assert sum(1 for k in healthy if k.startswith("ibstat.")) == 10
    assert sum(1 for k in healthy if k.startswith("lspci.")) == len([k for k in healthy if k.endswith(".path")])
    assert not any(k.startswith("dmesg.xid") for k in healthy)
    assert healthy["systemctl.fabricmanager"] == ("active", 0)


def test_switch_ports_used_by_the_cases(fault_rack: Rack) -> None:
    """The bus numbers above are the simulator's layout for hgx-h100-8gpu; keep them honest."""
    _, _, healthy = fault_rack["f00"]
    assert healthy[f"pci.{GPU3}.path"].endswith(f"/{GPU3_PORT}/{GPU3}")
    assert healthy[f"pci.{GPU3_HCA}.path"].endswith(f"/{GPU3_HCA_PORT}/{GPU3_HCA}")
    _, moved, _ = fault_rack[f"f{[c.spec for c in CASES].index('nic-affinity@gpu3'):02d}"]
    assert moved[f"pci.{GPU3_HCA}.path"] == f"sys/devices/pci0000:5a/0000:5a:01.0/{GPU3_HCA}"
