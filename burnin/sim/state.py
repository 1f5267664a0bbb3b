"""One simulated node's state: the single model every renderer reads.

NVML (the C library's state file), the sysfs/procfs tree and the shim outputs
are all rendered from a NodeState, so every source agrees. ``healthy_state``
derives a node from a topology; faults then mutate it (burnin.sim.inject).
Identity values (UUIDs, serials, GUIDs, LIDs) are derived from the node name,
so re-rendering a node gives the same answers.
"""

from __future__ import annotations

import hashlib
from functools import cache
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from burnin.sim.host import census_endpoints, node_memory, thp_mode
from burnin.sim.pcie import PciDevice, attach_endpoints, build_tree
from burnin.sim.software import software_state
from burnin.topology.model import Hca, Topology

GPU_PCI_ID = ("0x10de", "0x2330", "0x10de", "0x16c1")
CX7_PCI_ID = ("0x15b3", "0x1021", "0x15b3", "0x0041")
BF3_PCI_ID = ("0x15b3", "0xa2dc", "0x15b3", "0x0051")
CLASS_GPU = "0x030200"
CLASS_IB = "0x020700"
CLASS_ETH = "0x020000"

IB_COUNTERS = (
    "symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors",
    "port_rcv_remote_physical_errors", "port_rcv_switch_relay_errors", "port_xmit_discards",
    "port_xmit_constraint_errors", "port_rcv_constraint_errors", "local_link_integrity_errors",
    "excessive_buffer_overrun_errors", "VL15_dropped",
)
ECC_KEYS = tuple(
    f"{kind}_{counter}_{where}"
    for kind in ("corrected", "uncorrected")
    for counter in ("volatile", "aggregate")
    for where in ("dram", "sram")
)
NVLINK_COUNTERS = ("replay", "recovery", "crc_flit", "crc_data", "ecc_data")
# The port's traffic counters (sysfs ports/1/counters): the data ones count 4-byte words, as the kernel's do.
IB_TRAFFIC_COUNTERS = ("port_xmit_data", "port_rcv_data", "port_xmit_packets", "port_rcv_packets")
# GPU firmware of the real 8x H100 HGX capture (nvidia-smi -q, driver 535.183.01): a topology may name its own.
H100_VBIOS = "96.00.74.00.01"
H100_INFOROM_IMAGE = "G520.0200.00.05"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=False)


class GpuState(_Model):
    index: int
    bus_id: str
    present: bool = True
    lost: bool = False
    name: str
    uuid: str
    serial: str
    vbios: str = H100_VBIOS
    board_part: str = "692-2G520-0200-000"
    inforom_image: str = H100_INFOROM_IMAGE
    # InfoROM object versions as 8x H100 report them (nvidia-smi -q, driver 535); "" = not reported (N/A)
    inforom_oem: str = "2.1"
    inforom_ecc: str = "7.16"
    inforom_power: str = ""
    memory_total_mib: int
    memory_reserved_mib: int = 551
    memory_used_mib: int = 1
    persistence: bool = True
    mig_current: bool = False
    mig_pending: bool = False
    ecc_current: bool = True
    ecc_pending: bool = True
    ecc: dict[str, int] = Field(default_factory=lambda: dict.fromkeys(ECC_KEYS, 0))
    remap_correctable: int = 0
    remap_uncorrectable: int = 0
    remap_pending: bool = False
    remap_failure: bool = False
    remap_histogram: list[int] = Field(default_factory=lambda: [2560, 0, 0, 0, 0])
    clock_event_reasons: int = 0x1
    temperature_c: int = 35
    memory_temperature_c: int = 44
    slowdown_c: int = 87
    shutdown_c: int = 92
    gpu_max_c: int = 85
    memory_max_c: int = 95
    power_enforced_mw: int = 700000
    power_limit_mw: int = 700000
    power_default_mw: int = 700000
    power_min_mw: int = 200000
    power_max_mw: int = 700000
    power_usage_mw: int = 71970
    utilization_pct: int = 0
    """nvmlDeviceGetUtilizationRates' gpu figure: the share of the last sample period a kernel ran (faults job-*)."""
    sm_clock_mhz: int = 345
    """nvmlDeviceGetClockInfo(SM): an idle H100 parks at 345 MHz, a busy one runs near 1980."""
    compute_pids: list[int] = Field(default_factory=list)
    """nvmlDeviceGetComputeRunningProcesses: the compute processes on the GPU (a job: faults job-*)."""
    pcie_gen_current: int = 5
    pcie_gen_max: int = 5
    pcie_gen_gpu_max: int = 5
    pcie_width_current: int = 16
    pcie_width_max: int = 16
    pcie_replay: int = 0
    nvlink_active: list[bool] = Field(default_factory=list)
    nvlink_errors: dict[str, list[int]] = Field(default_factory=dict)
    nvlink_speed_mbps: int = 26562
    nvlink_bandwidth_factor: float = 1.0
    """Share of its NVLink bandwidth the GPU delivers with every link up (fault slow-nvlink)."""
    p2p_access: bool = True
    """CUDA grants peer access between the GPU and the others (fault p2p-disabled; the fabric tools read it)."""
    nvlink_flaky_link: int | None = None
    """The link that retrains under traffic (fault nvlink-flaky-under-load): its counters grow with each
    fabric tool run (burnin.sim.traffic), never at rest."""
    sdc_wrong: list[str] = Field(default_factory=list)
    """The SDC workload's kernels this GPU computes wrong (faults sdc, sdc-when-hot: burnin.sim.sdc)."""
    fabric_supported: bool = True
    fabric_state: int = 3
    fabric_status: int = 0
    numa_node: int
    cpulist: str
    minor: int
    module_id: int
    hca: str | None = None
    inforom_valid: bool = True
    """DCGM's InfoROM validity (DCGM_FI_DEV_INFOROM_CONFIG_VALID): the ``Inforom`` deployment test (GPU-13)."""


class HcaState(_Model):
    name: str
    bus_id: str
    role: str
    link_layer: str
    netdev: str | None
    numa_node: int
    hca_type: str
    fw_ver: str
    board_id: str
    node_guid: int
    port_guid: int
    state: str = "4: ACTIVE"
    phys_state: str = "5: LinkUp"
    rate: str = "400 Gb/sec (4X NDR)"
    bandwidth_factor: float = 1.0
    """Share of its rate the HCA moves, while the port looks healthy (fault slow-hca)."""
    switch_factor: float = 1.0
    """Share of its rate the HCA's leaf switch port passes (fault rail-degraded): only traffic that leaves the node
    through the switch sees it, never the node's own sources or a loopback through the HCA."""
    lid: int = 0
    sm_lid: int = 0
    cap_mask: int = 0
    counters: dict[str, int] = Field(default_factory=lambda: dict.fromkeys(IB_COUNTERS, 0))
    traffic: dict[str, int] = Field(default_factory=lambda: dict.fromkeys(IB_TRAFFIC_COUNTERS, 0))
    """The port's traffic counters at render time; a running job's pump advances the files (burnin.sim.job)."""
    max_mtu: int = 4096
    active_mtu: int = 4096
    """ibv_devinfo's active_mtu, in bytes (IB-09)."""
    pkeys: list[str] = Field(default_factory=lambda: ["0xffff"])
    """The port's partition keys from index 0 (sysfs ports/1/pkeys/*; the rest of the table is 0x0000)."""


class XidEvent(_Model):
    bus_id: str
    xid: int
    text: str
    uptime_s: float
    pid: str


class KernelMessage(_Model):
    uptime_s: float
    text: str
    level: str = "info"


class DcgmIncident(_Model):
    """One finding of DCGM's passive health watches (burnin.sim.dcgm renders them)."""

    gpu: int  # the GPU's topology slot (DCGM's id is its NVML position, worked out when rendered)
    system: str  # "PCIe system", "Memory system", ... as dcgmi names it
    health: str  # "Warning" or "Failure"
    message: str  # DCGM's message; "{gpu}" stands for DCGM's id of the GPU


class DcgmState(_Model):
    """NVIDIA DCGM on the node (GPU-12, GPU-13; burnin.sim.dcgm)."""

    installed: bool = True
    """``bin/dcgmi`` exists (a topology with ``dcgm: {required: false}`` has none)."""
    hostengine: bool = True
    """nv-hostengine answers."""
    incidents: list[DcgmIncident] = Field(default_factory=list)


class HostState(_Model):
    driver_version: str
    module_version: str
    cuda_version: int = 12020
    kernel_release: str = "5.15.0-112-generic"
    ofed_release: str = "MLNX_OFED_LINUX-24.04-0.6.6.0"
    """What ``ofed_info -s`` prints, without the colon (INV-10, burnin.sim.software)."""
    nccl_version: str = "2.21.5"
    """The version in the name of the node's libnccl.so (INV-10)."""
    dcgm_version: str = "3.3.5"
    """What ``dcgmi --version`` prints for dcgmi and its host engine (INV-10)."""
    fabric_manager_active: bool = True
    fabric_manager_installed: bool = True
    peermem_loaded: bool = True
    numa_balancing: int = 0
    iommu_type: str = "identity"
    cmdline_iommu: str = "intel_iommu=on iommu=pt"
    numa_cpulists: dict[int, str]
    cpu_governor: str | None = "performance"
    """Every online CPU's cpufreq governor; None: no cpufreq driver (TOP-06, burnin.sim.host)."""
    thp_enabled: str = "madvise"
    hugepages: dict[int, int] = Field(default_factory=lambda: {2048: 0, 1048576: 0})
    """Static hugepage pools: page size in kB -> nr_hugepages (TOP-07)."""
    node_memory_kib: dict[int, int] = Field(default_factory=dict)
    """MemTotal of each NUMA node in kB (TOP-09); a node left out has burnin.sim.host.NODE_MEMORY_KIB."""
    nccl_wrong: bool = False
    nccl_hang: bool = False
    job: str | None = None
    """A job on the node as ``burnin watch`` sees it (burnin.sim.job): None, ``running`` or ``stalled``."""
    megatron_faults: list[str] = Field(default_factory=list)
    """Workload faults that only the Megatron and placement-probe stand-ins read (burnin.sim.megatron)."""
    xids: list[XidEvent] = Field(default_factory=list)
    messages: list[KernelMessage] = Field(default_factory=list)
    dcgm: DcgmState = Field(default_factory=DcgmState)


class NodeState(_Model):
    name: str
    topology_name: str
    topology: dict[str, Any]
    faults: list[str] = Field(default_factory=list)
    gpus: list[GpuState]
    hcas: list[HcaState]
    pci: list[PciDevice]
    host: HostState

    def gpu(self, target: str) -> GpuState:
        index = int(target.removeprefix("gpu"))
        return next(g for g in self.gpus if g.index == index)

    def hca(self, name: str) -> HcaState:
        return next(h for h in self.hcas if h.name == name)

    def pci_index(self) -> dict[str, PciDevice]:
        return {d.bdf: d for d in self.pci}

    @property
    def visible_gpus(self) -> list[GpuState]:
        """GPUs on the bus, in NVML index order."""
        return [g for g in self.gpus if g.present]


@cache
def _topology_adapter() -> TypeAdapter[Topology]:
    return TypeAdapter(Topology)


def topology_to_dict(topology: Topology) -> dict[str, Any]:
    """The topology as JSON-ready data, stored in node.json so a node re-renders on its own."""
    data: dict[str, Any] = _topology_adapter().dump_python(topology, mode="json")
    return data


def topology_from_dict(data: dict[str, Any]) -> Topology:
    return _topology_adapter().validate_python(data)


def _digest(*parts: object) -> bytes:
    return hashlib.blake2b("/".join(str(p) for p in parts).encode(), digest_size=16).digest()


def _uuid(node: str, what: str) -> str:
    h = _digest(node, what).hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def _serial(node: str, what: str) -> str:
    return "165" + str(int.from_bytes(_digest(node, what, "serial")[:8], "big") % 10**10).zfill(10)


def _guid(node: str, what: str, prefix: int) -> int:
    low = int.from_bytes(_digest(node, what, "guid")[:3], "big")
    return (prefix << 24) | low


def _lid(node: str, what: str) -> int:
    return 2 + int.from_bytes(_digest(node, what, "lid")[:2], "big") % 4000


def cpulist_of(topology: Topology, numa: int) -> str:
    return topology.numa.cpulists.get(numa, "")


def _gpu_state(node: str, topology: Topology, position: int) -> GpuState:
    device = topology.gpus.devices[position]
    links = topology.gpus.nvlink.links_per_gpu if topology.gpus.nvlink else 0
    memory = topology.ref("gpu_memory_mib")
    power = topology.ref("power_limit_w")
    power_mw = int((power.value if power else 700) * 1000)
    spin = _digest(node, "gpu", device.index)[0]
    firmware = topology.gpus.firmware  # a healthy node runs the topology's firmware where it names one
    return GpuState(
        vbios=firmware.vbios if firmware and firmware.vbios else H100_VBIOS,
        inforom_image=firmware.inforom_image if firmware and firmware.inforom_image else H100_INFOROM_IMAGE,
        index=device.index,
        bus_id=device.bus_id,
        name=topology.gpus.model,
        uuid=_uuid(node, f"gpu{device.index}"),
        serial=_serial(node, f"gpu{device.index}"),
        memory_total_mib=int(memory.value) if memory else 81559,
        temperature_c=32 + spin % 6,
        memory_temperature_c=40 + spin % 5,
        power_enforced_mw=power_mw,
        power_limit_mw=power_mw,
        power_default_mw=power_mw,
        power_max_mw=max(power_mw, 700000),
        power_usage_mw=69000 + (spin * 37) % 6000,
        nvlink_active=[True] * links,
        nvlink_errors={c: [0] * links for c in NVLINK_COUNTERS},
        fabric_supported=topology.host.fabric_manager,
        fabric_state=3 if topology.host.fabric_manager else 0,
        numa_node=device.numa_node,
        cpulist=cpulist_of(topology, device.numa_node),
        minor=position,
        module_id=position + 1,
        hca=device.hca,
        persistence=topology.host.persistence,
        mig_current=topology.host.mig,
        mig_pending=topology.host.mig,
        ecc_current=topology.host.ecc,
        ecc_pending=topology.host.ecc,
    )


def _hca_state(node: str, hca: Hca, topology: Topology) -> HcaState:
    bf3 = hca.role == "storage"
    ib = hca.link_layer == "InfiniBand"
    golden = topology.storage_hca_firmware if bf3 else topology.hca_firmware
    partitions = topology.ib_partitions
    guid = _guid(node, hca.name, 0xA088C20300 if not bf3 else 0x58A2E10300)
    return HcaState(
        name=hca.name,
        bus_id=hca.bus_id,
        role=hca.role,
        link_layer=hca.link_layer,
        netdev=hca.netdev,
        numa_node=hca.numa_node,
        hca_type="MT41692" if bf3 else "MT4129",
        fw_ver=golden.version if golden and golden.version else ("32.39.2048" if bf3 else "28.39.2048"),
        board_id=golden.psid if golden and golden.psid else ("MT_0000000884" if bf3 else "MT_0000000838"),
        node_guid=guid,
        port_guid=guid if ib else roce_port_guid(guid),
        lid=_lid(node, hca.name) if ib else 0,
        sm_lid=1 if ib else 0,
        cap_mask=0xA751E848 if ib else 0x00010000,
        pkeys=list(partitions.pkeys) if partitions and hca.role == "compute" else ["0xffff"],
    )


def roce_port_guid(node_guid: int) -> int:
    """The EUI-64 GUID a RoCE port derives from its MAC (``a288:c2ff:fe..``)."""
    mac_hi = (node_guid >> 40) & 0xFFFFFF
    mac_lo = node_guid & 0xFFFFFF
    return ((mac_hi ^ 0x020000) << 40) | (0xFFFE << 24) | mac_lo


def _endpoints(topology: Topology, gpus: list[GpuState], hcas: list[HcaState]) -> list[PciDevice]:
    devices: list[PciDevice] = []
    for gpu in gpus:
        vendor, device, sub_vendor, sub_device = GPU_PCI_ID
        devices.append(PciDevice(
            bdf=gpu.bus_id, kind="gpu", parent=None, host_bridge="", vendor=vendor, device=device,
            subsystem_vendor=sub_vendor, subsystem_device=sub_device, class_code=CLASS_GPU,
            revision="0xa1", numa_node=gpu.numa_node, local_cpulist=gpu.cpulist, label=f"gpu{gpu.index}",
        ))
    for hca in hcas:
        vendor, device, sub_vendor, sub_device = BF3_PCI_ID if hca.role == "storage" else CX7_PCI_ID
        devices.append(PciDevice(
            bdf=hca.bus_id, kind="hca", parent=None, host_bridge="", vendor=vendor, device=device,
            subsystem_vendor=sub_vendor, subsystem_device=sub_device,
            class_code=CLASS_IB if hca.link_layer == "InfiniBand" else CLASS_ETH,
            revision="0x00" if hca.role == "compute" else "0x01", numa_node=hca.numa_node,
            local_cpulist=cpulist_of(topology, hca.numa_node), label=hca.name,
        ))
    return devices


def _switch_groups(topology: Topology) -> list[list[str]]:
    """GPU plus its paired HCA per switch; unpaired compute HCAs get a switch of their own."""
    by_name = {h.name: h for h in topology.hcas}
    groups: list[list[str]] = []
    paired: set[str] = set()
    for device in topology.gpus.devices:
        group = [device.bus_id]
        if device.hca is not None:
            group.append(by_name[device.hca].bus_id)
            paired.add(device.hca)
        groups.append(group)
    groups += [[h.bus_id] for h in topology.compute_hcas if h.name not in paired]
    return groups


def healthy_state(topology: Topology, name: str) -> NodeState:
    """A node of this topology with every value inside its references."""
    gpus = [_gpu_state(name, topology, i) for i in range(len(topology.gpus.devices))]
    hcas = [_hca_state(name, h, topology) for h in topology.hcas]
    pci = build_tree(_endpoints(topology, gpus, hcas), _switch_groups(topology))
    pci = attach_endpoints(pci, census_endpoints(topology))  # NVSwitches and NVMe (TOP-10)
    host = HostState(
        driver_version=topology.host.driver_version,
        module_version=topology.host.driver_version,
        fabric_manager_active=topology.host.fabric_manager,
        fabric_manager_installed=topology.host.fabric_manager,
        peermem_loaded=topology.host.peermem,
        iommu_type="DMA" if topology.host.iommu == "any" else "identity",
        cmdline_iommu="" if topology.host.iommu == "off" else "intel_iommu=on iommu=pt",
        numa_cpulists=dict(topology.numa.cpulists),
        cpu_governor=topology.host.cpu_governor,
        thp_enabled=thp_mode(topology),
        node_memory_kib=node_memory(topology),
        dcgm=DcgmState(installed=topology.dcgm.required),
        **software_state(topology),  # kernel, OFED, NCCL, DCGM (INV-10, burnin.sim.software)
    )
    return NodeState(
        name=name,
        topology_name=topology.name,
        topology=topology_to_dict(topology),
        gpus=gpus,
        hcas=hcas,
        pci=pci,
        host=host,
    )


def other_numa(state: NodeState, numa: int) -> int:
    nodes = sorted(state.host.numa_cpulists)
    if len(nodes) < 2:
        return numa
    return nodes[(nodes.index(numa) + 1) % len(nodes)] if numa in nodes else nodes[0]
