"""Apply faults to a NodeState: one mutator per registry name.

Each mutator changes exactly what the fault's check reads, on the fault's
target only, in the single state model, so NVML, sysfs and the shims agree.
"""

from __future__ import annotations

from burnin.errors import UsageError
from burnin.sim.dcgm import MUTATORS as DCGM_MUTATORS
from burnin.sim.faults import MUTATORS, Fault, gpu_fault, simulates
from burnin.sim.hca_faults import ALT_FIRMWARE
from burnin.sim.hca_faults import MUTATORS as HCA_MUTATORS
from burnin.sim.host import HOST_MUTATORS
from burnin.sim.megatron import MUTATORS as WORKLOAD_MUTATORS
from burnin.sim.pcie import ACS_REDIRECT, PciDevice, move_to_own_root_port, switch_downstream_ports
from burnin.sim.software import SOFTWARE_MUTATORS
from burnin.sim.state import (
    CLASS_ETH,
    CLASS_IB,
    GpuState,
    HcaState,
    KernelMessage,
    NodeState,
    XidEvent,
    other_numa,
    roce_port_guid,
)
from burnin.sim.storage import STORAGE_FAULTS
from burnin.sim.storage import check_applicable as check_storage_fault

NVLINK_FAULT_LINK = 7
ALT_DRIVER = ("535.161.08", "535.183.01")
ALT_STORAGE_FIRMWARE = ALT_FIRMWARE["storage"]
ALT_VBIOS = ("96.00.74.00.0D", "96.00.89.00.01")  # real H100 VBIOS versions (shared/reference/nvidia-smi)
CAPPED_POWER_MW = 500000

# Kernel text NVIDIA's driver logs after each Xid (abridged from real logs).
XID_TEXT: dict[int, str] = {
    13: "Graphics SM Warp Exception on (GPC 8, TPC 5, SM 0): Out Of Range Address",
    31: "Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_3 faulted @ "
        "0x7f3a_5c000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
    32: "Channel ID 00000010 intr0 00040000",
    43: "Ch 00000008",
    45: "Ch 00000010",
    46: "GPU stopped processing",
    48: "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer "
        "at partition 6, subpartition 0.",
    54: "Auxiliary power is not connected to the GPU board",
    62: "Internal micro-controller halt",
    63: "Row Remapper: New row marked for remapping, reset gpu to activate.",
    64: "Row Remapper: Failed to remap row, no spare rows available.",
    74: f"NVLink: fatal error detected on link {NVLINK_FAULT_LINK}"
        "(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
    79: "GPU has fallen off the bus.",
    92: "High single-bit ECC error rate",
    94: "Contained: SM (0x1). RST: No, D-RST: No",
    95: "Uncontained: FBHUB. RST: Yes, D-RST: No",
    109: "Ctx switch timeout",
    110: "Security fault",
    119: "Timeout after 6s of waiting for RPC response from GPU{gpu} GSP! Expected function 76 "
         "(GSP_RM_CONTROL) (0x20800a4c 0x4).",
    120: "GSP task 1 raised error code 0x5 for reason 0x0 at 0x1b8c4bc (0 more errors skipped)",
    136: f"NVLink: link training failed on link {NVLINK_FAULT_LINK}",
    137: "NVLink: privilege error, illegal access from a peer",
    140: "An unrecoverable ECC error was escaped",
    143: "GPU initialization failure",
    154: "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)",
    156: "Resource retirement event",
    157: "Resource retirement failure: no possible repairs due to lack of resources",
    158: "GPU fatal timeout",
}
# Xids the driver raises from its own context (no user process behind them).
_XID_NO_PROCESS = frozenset({48, 54, 62, 63, 64, 74, 79, 92, 95, 119, 120, 136, 140, 143, 154, 156, 157, 158})


def _gpu(state: NodeState, fault: Fault) -> GpuState:
    assert fault.target is not None
    return state.gpu(fault.target)


def _hca(state: NodeState, fault: Fault) -> HcaState:
    assert fault.target is not None
    return state.hca(fault.target)


def _pci_pair(state: NodeState, gpu: GpuState) -> tuple[list[PciDevice], list[PciDevice]]:
    """The GPU's PCI function and the switch port above it (each list empty when absent)."""
    index = state.pci_index()
    endpoint = index.get(gpu.bus_id)
    port = index.get(endpoint.parent or "") if endpoint is not None else None
    return ([endpoint] if endpoint else []), ([port] if port else [])


def _uptime(state: NodeState) -> float:
    return 3600.0 + 97.531 * (len(state.host.xids) + len(state.host.messages))


def gpu_missing(state: NodeState, fault: Fault) -> None:
    gpu = _gpu(state, fault)
    gpu.present = False
    state.pci = [d for d in state.pci if d.bdf != gpu.bus_id]


def gpu_lost(state: NodeState, fault: Fault) -> None:
    _gpu(state, fault).lost = True


def ecc_uncorrectable(state: NodeState, fault: Fault) -> None:
    gpu = _gpu(state, fault)
    gpu.ecc["uncorrected_volatile_dram"] = 2
    gpu.ecc["uncorrected_aggregate_dram"] = 2


def row_remap_pending(state: NodeState, fault: Fault) -> None:
    gpu = _gpu(state, fault)
    gpu.remap_uncorrectable = max(gpu.remap_uncorrectable, 1)
    gpu.remap_pending = True
    gpu.remap_histogram = [2559, 1, 0, 0, 0]


def row_remap_failure(state: NodeState, fault: Fault) -> None:
    gpu = _gpu(state, fault)
    gpu.remap_uncorrectable = max(gpu.remap_uncorrectable, 8)
    gpu.remap_failure = True
    gpu.remap_histogram = [2552, 0, 0, 0, 8]


def xid(state: NodeState, fault: Fault) -> None:
    gpu = _gpu(state, fault)
    number = fault.arg if fault.arg is not None else 79
    text = XID_TEXT.get(number, f"Xid {number} reported by the GPU").replace("{gpu}", str(gpu.index))
    if number in _XID_NO_PROCESS:
        pid = "pid='<unknown>', name=<unknown>"
    else:
        pid = f"pid={2000000 + 7919 * (len(state.host.xids) + 1) % 900000}, name=pt_main_thread"
    state.host.xids.append(XidEvent(bus_id=gpu.bus_id, xid=number, text=text, uptime_s=_uptime(state),
                                    pid=pid))


@simulates(gpu_fault("hw-slowdown", "GPU-05", "hardware slowdown clock event active",
                     "nvmlDeviceGetCurrentClocksEventReasons = 0x8 (HwSlowdown); nvidia-smi -q 'HW Slowdown: Active'"))
def hw_slowdown(state: NodeState, fault: Fault) -> None:
    _gpu(state, fault).clock_event_reasons = 0x8


def thermal(state: NodeState, fault: Fault) -> None:
    gpu = _gpu(state, fault)
    gpu.temperature_c = gpu.gpu_max_c + 1


def power_capped(state: NodeState, fault: Fault) -> None:
    gpu = _gpu(state, fault)
    gpu.power_enforced_mw = min(CAPPED_POWER_MW, gpu.power_default_mw - 100000)
    gpu.power_limit_mw = gpu.power_enforced_mw


def pcie_gen4(state: NodeState, fault: Fault) -> None:
    gpu = _gpu(state, fault)
    gpu.pcie_gen_current = 4
    gpu.pcie_gen_max = 4
    endpoints, ports = _pci_pair(state, gpu)
    for device in endpoints:
        device.cur_gen = 4
    for device in ports:
        device.cur_gen = 4
        device.max_gen = 4
    at = ports[0].bdf if ports else gpu.bus_id
    state.host.messages.append(KernelMessage(
        uptime_s=3.141 + 0.01 * gpu.index,
        text=f"pci {gpu.bus_id}: 252.048 Gb/s available PCIe bandwidth, limited by 16.0 GT/s PCIe x16 "
             f"link at {at} (capable of 504.112 Gb/s with 32.0 GT/s PCIe x16 link)",
    ))


def pcie_x8(state: NodeState, fault: Fault) -> None:
    gpu = _gpu(state, fault)
    gpu.pcie_width_current = 8
    endpoints, ports = _pci_pair(state, gpu)
    for device in endpoints + ports:
        device.cur_width = 8
    at = ports[0].bdf if ports else gpu.bus_id
    state.host.messages.append(KernelMessage(
        uptime_s=3.151 + 0.01 * gpu.index,
        text=f"pci {gpu.bus_id}: 252.048 Gb/s available PCIe bandwidth, limited by 32.0 GT/s PCIe x8 "
             f"link at {at} (capable of 504.112 Gb/s with 32.0 GT/s PCIe x16 link)",
    ))


def _link(state: NodeState, gpu: GpuState, fault: Fault) -> int:
    if not gpu.nvlink_active:
        raise UsageError(f"fault {fault.label!r} needs NVLink, but topology {state.topology_name!r} "
                         f"gives {fault.target} no NVLink links")
    return min(NVLINK_FAULT_LINK, len(gpu.nvlink_active) - 1)


def nvlink_down(state: NodeState, fault: Fault) -> None:
    gpu = _gpu(state, fault)
    gpu.nvlink_active[_link(state, gpu, fault)] = False


def nvlink_errors(state: NodeState, fault: Fault) -> None:
    gpu = _gpu(state, fault)
    link = _link(state, gpu, fault)
    gpu.nvlink_errors["recovery"][link] = 3
    gpu.nvlink_errors["replay"][link] = 250


def mig_enabled(state: NodeState, fault: Fault) -> None:
    gpu = _gpu(state, fault)
    gpu.mig_current = gpu.mig_pending = True


def persistence_off(state: NodeState, fault: Fault) -> None:
    _gpu(state, fault).persistence = False


def ecc_disabled(state: NodeState, fault: Fault) -> None:
    gpu = _gpu(state, fault)
    gpu.ecc_current = gpu.ecc_pending = False


def vbios_mismatch(state: NodeState, fault: Fault) -> None:
    gpu = _gpu(state, fault)
    gpu.vbios = ALT_VBIOS[0] if gpu.vbios != ALT_VBIOS[0] else ALT_VBIOS[1]


def numa_mismatch(state: NodeState, fault: Fault) -> None:
    gpu = _gpu(state, fault)
    gpu.numa_node = -1
    for device in _pci_pair(state, gpu)[0]:
        device.numa_node = -1


def cpu_affinity(state: NodeState, fault: Fault) -> None:
    gpu = _gpu(state, fault)
    home = state.pci_index().get(gpu.bus_id)
    socket = home.numa_node if home is not None and home.numa_node >= 0 else max(gpu.numa_node, 0)
    gpu.cpulist = state.host.numa_cpulists.get(other_numa(state, socket), gpu.cpulist)
    for device in _pci_pair(state, gpu)[0]:
        device.local_cpulist = gpu.cpulist


def nic_affinity(state: NodeState, fault: Fault) -> None:
    gpu = _gpu(state, fault)
    if gpu.hca is None:
        raise UsageError(f"fault 'nic-affinity' needs a GPU with a paired HCA; {fault.target} has none")
    hca = state.hca(gpu.hca)
    cpulist = state.host.numa_cpulists.get(hca.numa_node, "")
    state.pci = move_to_own_root_port(state.pci, hca.bus_id, hca.numa_node, cpulist)


def acs_enabled(state: NodeState, fault: Fault) -> None:
    gpu = _gpu(state, fault)
    index = state.pci_index()
    anchor = gpu.bus_id if gpu.bus_id in index else (state.hca(gpu.hca).bus_id if gpu.hca else None)
    ports = switch_downstream_ports(index, anchor) if anchor else []
    if not ports:
        raise UsageError(f"fault 'acs-enabled': {fault.target} is not behind a PCIe switch")
    for port in ports:
        port.acs_ctl = ACS_REDIRECT


def fabric_manager_down(state: NodeState, fault: Fault) -> None:
    state.host.fabric_manager_active = False
    for gpu in state.gpus:
        if gpu.fabric_supported:
            gpu.fabric_state = 1
            gpu.fabric_status = 0


SXID_FATAL = (24007, "Link 40 sourcetrack TCEN0 crumbstore ECC DBE Error")
"""An uncorrectable ECC error in an NVSwitch's sourcetrack (Fabric Manager user guide's SXid list) [U]."""


def sxid_fatal(state: NodeState, fault: Fault) -> None:
    switches = sorted(d.bdf for d in state.pci if d.kind == "nvswitch")
    if not switches:
        raise UsageError(f"fault {fault.label!r} needs an NVSwitch; topology {state.topology_name} has none")
    index = min(2, len(switches) - 1)
    code, text = SXID_FATAL
    head = f"nvidia-nvswitch{index}: SXid (PCI:{switches[index]}): {code}"
    uptime = _uptime(state)
    state.host.messages.append(KernelMessage(uptime_s=uptime, text=f"{head}, Fatal, {text}", level="err"))
    state.host.messages.append(KernelMessage(uptime_s=uptime + 0.000008,
                                             text=f"{head}, Severity 0 Engine instance 40 Sub-engine instance 00",
                                             level="err"))


def peermem_missing(state: NodeState, fault: Fault) -> None:
    state.host.peermem_loaded = False


def driver_mismatch(state: NodeState, fault: Fault) -> None:
    driver = state.host.driver_version
    state.host.module_version = ALT_DRIVER[0] if driver != ALT_DRIVER[0] else ALT_DRIVER[1]


def storage_fw_drift(state: NodeState, fault: Fault) -> None:
    storage = [hca for hca in state.hcas if hca.role == "storage"]
    if not storage:
        raise UsageError(f"fault {fault.label!r} needs a storage HCA; topology {state.topology_name} has none")
    first, second = ALT_STORAGE_FIRMWARE
    for hca in storage:
        hca.fw_ver = first if hca.fw_ver != first else second


def numa_balancing_on(state: NodeState, fault: Fault) -> None:
    state.host.numa_balancing = 1


def iommu_dma(state: NodeState, fault: Fault) -> None:
    state.host.iommu_type = "DMA"
    state.host.cmdline_iommu = "intel_iommu=on"


def ib_port_down(state: NodeState, fault: Fault) -> None:
    hca = _hca(state, fault)
    hca.state = "1: DOWN"
    hca.phys_state = "2: Polling"
    hca.rate = "40 Gb/sec (4X QDR)"
    hca.lid = 0
    hca.sm_lid = 0
    state.host.messages.append(KernelMessage(
        uptime_s=_uptime(state) + 11.0,
        text=f"mlx5_core {hca.bus_id}: Port module event: module 0, Cable unplugged",
        level="warn",
    ))


def ib_rate_200(state: NodeState, fault: Fault) -> None:
    _hca(state, fault).rate = "200 Gb/sec (4X HDR)"


def ib_link_layer(state: NodeState, fault: Fault) -> None:
    hca = _hca(state, fault)
    device = state.pci_index().get(hca.bus_id)
    if hca.link_layer == "InfiniBand":
        hca.link_layer = "Ethernet"
        hca.lid = hca.sm_lid = 0
        hca.cap_mask = 0x00010000
        hca.port_guid = roce_port_guid(hca.node_guid)
        class_code = CLASS_ETH
    else:
        hca.link_layer = "InfiniBand"
        hca.lid = 100 + hca.node_guid % 3000
        hca.sm_lid = 1
        hca.cap_mask = 0xA751E848
        hca.port_guid = hca.node_guid
        class_code = CLASS_IB
    if device is not None:
        device.class_code = class_code


def ib_errors(state: NodeState, fault: Fault) -> None:
    counters = _hca(state, fault).counters
    counters["link_downed"] = 2
    counters["symbol_error"] = 250
    counters["link_error_recovery"] = 3


SLOW_HCA_FACTOR = 0.5
SLOW_NVLINK_FACTOR = 0.6


def slow_hca(state: NodeState, fault: Fault) -> None:
    _hca(state, fault).bandwidth_factor = SLOW_HCA_FACTOR


RAIL_DEGRADED_FACTOR = 0.5


def rail_degraded(state: NodeState, fault: Fault) -> None:
    _hca(state, fault).switch_factor = RAIL_DEGRADED_FACTOR


def slow_nvlink(state: NodeState, fault: Fault) -> None:
    gpu = _gpu(state, fault)
    _link(state, gpu, fault)  # the GPU must have NVLink
    gpu.nvlink_bandwidth_factor = SLOW_NVLINK_FACTOR


def p2p_disabled(state: NodeState, fault: Fault) -> None:
    _gpu(state, fault).p2p_access = False


def nvlink_flaky_under_load(state: NodeState, fault: Fault) -> None:
    gpu = _gpu(state, fault)
    gpu.nvlink_flaky_link = _link(state, gpu, fault)


def nccl_wrong(state: NodeState, fault: Fault) -> None:
    state.host.nccl_wrong = True


def nccl_hang(state: NodeState, fault: Fault) -> None:
    state.host.nccl_hang = True


MUTATORS.update({  # the mutators of the faults in burnin.sim.faults' tables (a new one: @simulates above it)
    "gpu-missing": gpu_missing,
    "gpu-lost": gpu_lost,
    "ecc-uncorrectable": ecc_uncorrectable,
    "row-remap-pending": row_remap_pending,
    "row-remap-failure": row_remap_failure,
    "xid": xid,
    "thermal": thermal,
    "power-capped": power_capped,
    "pcie-gen4": pcie_gen4,
    "pcie-x8": pcie_x8,
    "nvlink-down": nvlink_down,
    "nvlink-errors": nvlink_errors,
    "mig-enabled": mig_enabled,
    "persistence-off": persistence_off,
    "ecc-disabled": ecc_disabled,
    "vbios-mismatch": vbios_mismatch,
    "numa-mismatch": numa_mismatch,
    "cpu-affinity": cpu_affinity,
    "nic-affinity": nic_affinity,
    "acs-enabled": acs_enabled,
    "fabric-manager-down": fabric_manager_down,
    "sxid-fatal": sxid_fatal,
    "peermem-missing": peermem_missing,
    "driver-mismatch": driver_mismatch,
    "storage-fw-drift": storage_fw_drift,
    "numa-balancing-on": numa_balancing_on,
    "iommu-dma": iommu_dma,
    "ib-port-down": ib_port_down,
    "ib-rate-200": ib_rate_200,
    "ib-link-layer": ib_link_layer,
    "ib-errors": ib_errors,
    "slow-hca": slow_hca,
    "rail-degraded": rail_degraded,
    "slow-nvlink": slow_nvlink,
    "p2p-disabled": p2p_disabled,
    "nvlink-flaky-under-load": nvlink_flaky_under_load,
    "nccl-wrong": nccl_wrong,
    "nccl-hang": nccl_hang,
})
MUTATORS.update(HCA_MUTATORS)  # INV-09, IB-05, IB-06, IB-09 (burnin.sim.hca_faults)
MUTATORS.update(SOFTWARE_MUTATORS)  # INV-10: the host software stack (burnin.sim.software)
MUTATORS.update(WORKLOAD_MUTATORS)  # suite megatron: recorded for the stand-ins (burnin.sim.megatron)
MUTATORS.update(HOST_MUTATORS)  # TOP-06, 07, 09, 10: CPU governors, hugepages, memory, NVMe (burnin.sim.host)
MUTATORS.update(DCGM_MUTATORS)  # GPU-12, GPU-13: DCGM's health watches and deployment tests (burnin.sim.dcgm)



def needs_soak(state: NodeState, fault: Fault) -> None:
    """Faults that unfold over simulated hours exist only in a soak (burnin.sim.soak applies them)."""
    raise UsageError(f"fault {fault.label!r} unfolds over a soak's simulated hours: use it with `burnin soak`")


MUTATORS.update(dict.fromkeys(("xid-at", "ecc-growth", "thermal-creep", "throughput-drift", "nvlink-errors-growth",
                               "mce"), needs_soak))

# Structural faults first, removal last, so composed faults find what they change.
# Storage faults are checked here and rendered from the fault list (burnin.sim.storage.derive).
MUTATORS.update(dict.fromkeys(STORAGE_FAULTS, check_storage_fault))

_ORDER = {"nic-affinity": 0, "acs-enabled": 1, "gpu-missing": 9}


def apply_faults(state: NodeState, faults: list[Fault]) -> None:
    """Apply ``faults`` (validated, deduplicated) to ``state`` and record them."""
    unique = list(dict.fromkeys(faults))
    for fault in sorted(unique, key=lambda f: _ORDER.get(f.name, 5)):
        MUTATORS[fault.name](state, fault)
    state.faults = [str(f) for f in unique]
