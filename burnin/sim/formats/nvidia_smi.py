"""``nvidia-smi`` outputs: ``topo -m``, ``-q``, ``-L``, ``nvlink --status`` and ``nvlink -e``.

Layouts follow driver 535 output (reference/nvidia-smi/): ``topo -m`` is
tab-separated with the legend blocks; ``-q`` puts the colon at column 42.
"""

from __future__ import annotations

import time

from burnin.sim.pcie import relation
from burnin.sim.state import GpuState, NodeState

LOST_RC = 15  # nvidia-smi exit status for "GPU has fallen off the bus"

_LEGEND = """\
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""

_CLOCK_REASONS = (
    (1, "Idle", 0x1), (1, "Applications Clocks Setting", 0x2), (1, "SW Power Cap", 0x4),
    (1, "HW Slowdown", 0x8), (2, "HW Thermal Slowdown", 0x40), (2, "HW Power Brake Slowdown", 0x80),
    (1, "Sync Boost", 0x10), (1, "SW Thermal Slowdown", 0x20), (1, "Display Clock Setting", 0x100),
)
_FABRIC_STATE = {0: "N/A", 1: "Not Started", 2: "In Progress", 3: "Completed"}


def nvml_bus_id(bus_id: str) -> str:
    """``0000:1b:00.0`` -> NVML's ``00000000:1B:00.0``."""
    domain, rest = bus_id.split(":", 1)
    return f"{int(domain, 16):08X}:{rest.upper()}"


def lost_message(state: NodeState) -> str | None:
    """What every nvidia-smi command prints when a GPU fell off the bus (None when none did)."""
    lost = [g for g in state.visible_gpus if g.lost]
    if not lost:
        return None
    return "".join(
        f"Unable to determine the device handle for GPU {g.bus_id.upper()}: "
        "GPU is lost.  Reboot the system to recover this GPU\n"
        for g in lost
    )


def _nics(state: NodeState) -> list[str]:
    """HCA names in PCI order, as nvidia-smi numbers NIC0, NIC1, ..."""
    present = state.pci_index()
    return [h.name for h in sorted(state.hcas, key=lambda h: h.bus_id) if h.bus_id in present]


def _nvlink_pair(a: GpuState, b: GpuState) -> str | None:
    links = min(sum(a.nvlink_active), sum(b.nvlink_active))
    return f"NV{links}" if links > 0 else None


def topo_matrix(state: NodeState) -> str:
    """``nvidia-smi topo -m``."""
    pci = state.pci_index()
    gpus = state.visible_gpus
    nics = _nics(state)
    nic_bdf = {h.name: h.bus_id for h in state.hcas}
    gpu_names = [f"GPU{i}" for i in range(len(gpus))]
    nic_names = [f"NIC{i}" for i in range(len(nics))]
    header = ["", *gpu_names, *nic_names, "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]
    lines = ["\t".join(header)]
    for i, gpu in enumerate(gpus):
        cells = [gpu_names[i]]
        for j, peer in enumerate(gpus):
            if i == j:
                cells.append(" X ")
            else:
                cells.append(_nvlink_pair(gpu, peer) or relation(pci, gpu.bus_id, peer.bus_id))
        cells += [relation(pci, gpu.bus_id, nic_bdf[n]) for n in nics]
        numa = str(gpu.numa_node) if gpu.numa_node >= 0 else "N/A"
        cells += [gpu.cpulist, numa, "", "N/A"]
        lines.append("\t".join(cells))
    for k, nic in enumerate(nics):
        cells = [nic_names[k]]
        cells += [relation(pci, nic_bdf[nic], g.bus_id) for g in gpus]
        cells += [relation(pci, nic_bdf[nic], nic_bdf[other]) for other in nics]
        lines.append("\t".join(cells))
    text = "\n".join(lines) + "\n\n" + _LEGEND
    if nics:
        text += "\nNIC Legend:\n\n" + "".join(f"  {nic_names[k]}: {n}\n" for k, n in enumerate(nics))
    return text + "\n"


def list_gpus(state: NodeState) -> str:
    """``nvidia-smi -L``."""
    return "".join(f"GPU {i}: {g.name} (UUID: {g.uuid})\n" for i, g in enumerate(state.visible_gpus))


def nvlink_status(state: NodeState) -> str:
    """``nvidia-smi nvlink --status``."""
    out: list[str] = []
    for i, gpu in enumerate(state.visible_gpus):
        out.append(f"GPU {i}: {gpu.name} (UUID: {gpu.uuid})")
        if not any(gpu.nvlink_active):
            out.append("NVML: Unable to retrieve NVLink information as all links are inactive")
            continue
        speed = f"{gpu.nvlink_speed_mbps / 1000:.3f} GB/s"
        out += [f"\t Link {link}: {speed if up else '<inactive>'}" for link, up in enumerate(gpu.nvlink_active)]
    return "\n".join(out) + "\n"


def nvlink_errors(state: NodeState) -> str:
    """``nvidia-smi nvlink -e``."""
    out: list[str] = []
    for i, gpu in enumerate(state.visible_gpus):
        out.append(f"GPU {i}: {gpu.name} (UUID: {gpu.uuid})")
        blocks = []
        for link in range(len(gpu.nvlink_active)):
            errors = gpu.nvlink_errors
            crc = errors["crc_flit"][link] + errors["crc_data"][link]
            blocks.append(f"\t Link {link}: Replay Errors: {errors['replay'][link]}\n"
                          f"\t Link {link}: Recovery Errors: {errors['recovery'][link]}\n"
                          f"\t Link {link}: CRC Errors: {crc}")
        out.append("\n\n".join(blocks))
    return "\n".join(out) + "\n"


class _Q:
    """Accumulates ``-q`` lines: label padded so the colon sits at column 42."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, depth: int, label: str, value: object = None) -> None:
        key = "    " * depth + label
        self.lines.append(key if value is None else f"{key:<42}: {value}")


def _yes(flag: bool) -> str:
    return "Yes" if flag else "No"


def _on(flag: bool) -> str:
    return "Enabled" if flag else "Disabled"


def _watts(mw: int) -> str:
    return f"{mw / 1000:.2f} W"


def _gpu_query(q: _Q, minor: int, gpu: GpuState, driver: str) -> None:
    bus = nvml_bus_id(gpu.bus_id)
    domain, bus_no, rest = gpu.bus_id.split(":")
    q.add(0, f"GPU {bus}")
    for label, value in (("Product Name", gpu.name), ("Product Brand", "NVIDIA"),
                         ("Product Architecture", "Hopper"), ("Display Mode", "Disabled"),
                         ("Display Active", "Disabled"), ("Persistence Mode", _on(gpu.persistence)),
                         ("Addressing Mode", "None")):
        q.add(1, label, value)
    q.add(1, "MIG Mode")
    q.add(2, "Current", _on(gpu.mig_current))
    q.add(2, "Pending", _on(gpu.mig_pending))
    q.add(1, "Accounting Mode", "Disabled")
    q.add(1, "Accounting Mode Buffer Size", 4000)
    q.add(1, "Driver Model")
    q.add(2, "Current", "N/A")
    q.add(2, "Pending", "N/A")
    q.add(1, "Serial Number", gpu.serial)
    q.add(1, "GPU UUID", gpu.uuid)
    q.add(1, "Minor Number", minor)
    q.add(1, "VBIOS Version", gpu.vbios or "N/A")
    q.add(1, "MultiGPU Board", "No")
    q.add(1, "Board ID", f"0x{int(bus_no, 16):02x}00")
    q.add(1, "Board Part Number", gpu.board_part)
    q.add(1, "GPU Part Number", "2330-885-A1")
    q.add(1, "FRU Part Number", "N/A")
    q.add(1, "Module ID", gpu.module_id)
    q.add(1, "Inforom Version")
    q.add(2, "Image Version", gpu.inforom_image or "N/A")
    q.add(2, "OEM Object", gpu.inforom_oem or "N/A")
    q.add(2, "ECC Object", gpu.inforom_ecc or "N/A")
    q.add(2, "Power Management Object", gpu.inforom_power or "N/A")
    q.add(1, "GPU Operation Mode")
    q.add(2, "Current", "N/A")
    q.add(2, "Pending", "N/A")
    q.add(1, "GSP Firmware Version", driver)
    q.add(1, "GPU Virtualization Mode")
    q.add(2, "Virtualization Mode", "None")
    q.add(2, "Host VGPU Mode", "N/A")
    q.add(1, "GPU Reset Status")
    q.add(2, "Reset Required", _yes(gpu.remap_pending))
    q.add(2, "Drain and Reset Recommended", "No")
    q.add(1, "PCI")
    q.add(2, "Bus", f"0x{int(bus_no, 16):02X}")
    q.add(2, "Device", f"0x{int(rest.split('.')[0], 16):02X}")
    q.add(2, "Domain", f"0x{int(domain, 16):04X}")
    q.add(2, "Device Id", "0x233010DE")
    q.add(2, "Bus Id", bus)
    q.add(2, "Sub System Id", "0x16C110DE")
    q.add(2, "GPU Link Info")
    q.add(3, "PCIe Generation")
    q.add(4, "Max", gpu.pcie_gen_max)
    q.add(4, "Current", gpu.pcie_gen_current)
    q.add(4, "Device Current", gpu.pcie_gen_current)
    q.add(4, "Device Max", gpu.pcie_gen_gpu_max)
    q.add(4, "Host Max", "N/A")
    q.add(3, "Link Width")
    q.add(4, "Max", f"{gpu.pcie_width_max}x")
    q.add(4, "Current", f"{gpu.pcie_width_current}x")
    q.add(2, "Bridge Chip")
    q.add(3, "Type", "N/A")
    q.add(3, "Firmware", "N/A")
    q.add(2, "Replays Since Reset", gpu.pcie_replay)
    q.add(2, "Replay Number Rollovers", 0)
    q.add(2, "Tx Throughput", "612 KB/s")
    q.add(2, "Rx Throughput", "523 KB/s")
    q.add(2, "Atomic Caps Inbound", "N/A")
    q.add(2, "Atomic Caps Outbound", "N/A")
    q.add(1, "Fan Speed", "N/A")
    q.add(1, "Performance State", "P0")
    q.add(1, "Clocks Event Reasons")
    for depth, label, bit in _CLOCK_REASONS:
        q.add(depth + 1, label, "Active" if gpu.clock_event_reasons & bit else "Not Active")
    q.add(1, "Sparse Operation Mode", "Disabled")
    q.add(1, "FB Memory Usage")
    free = gpu.memory_total_mib - gpu.memory_reserved_mib - gpu.memory_used_mib
    for label, mib in (("Total", gpu.memory_total_mib), ("Reserved", gpu.memory_reserved_mib),
                       ("Used", gpu.memory_used_mib), ("Free", free)):
        q.add(2, label, f"{mib} MiB")
    q.add(1, "BAR1 Memory Usage")
    for label, mib in (("Total", 131072), ("Used", 1), ("Free", 131071)):
        q.add(2, label, f"{mib} MiB")
    q.add(1, "Compute Mode", "Default")
    q.add(1, "Utilization")
    for label in ("Gpu", "Memory", "Encoder", "Decoder", "JPEG", "OFA"):
        q.add(2, label, "0 %")
    _ecc_query(q, gpu)
    _remap_query(q, gpu)
    q.add(1, "Temperature")
    q.add(2, "GPU Current Temp", f"{gpu.temperature_c} C")
    q.add(2, "GPU T.Limit Temp", f"{gpu.gpu_max_c - gpu.temperature_c} C")
    q.add(2, "GPU Shutdown T.Limit Temp", f"{gpu.gpu_max_c - gpu.shutdown_c} C")
    q.add(2, "GPU Slowdown T.Limit Temp", f"{gpu.gpu_max_c - gpu.slowdown_c} C")
    q.add(2, "GPU Max Operating T.Limit Temp", "0 C")
    q.add(2, "GPU Target Temperature", "N/A")
    q.add(2, "Memory Current Temp", f"{gpu.memory_temperature_c} C")
    q.add(2, "Memory Max Operating T.Limit Temp", "0 C")
    q.add(1, "GPU Power Readings")
    q.add(2, "Power Draw", _watts(gpu.power_usage_mw))
    q.add(2, "Current Power Limit", _watts(gpu.power_enforced_mw))
    q.add(2, "Requested Power Limit", _watts(gpu.power_limit_mw))
    q.add(2, "Default Power Limit", _watts(gpu.power_default_mw))
    q.add(2, "Min Power Limit", _watts(gpu.power_min_mw))
    q.add(2, "Max Power Limit", _watts(gpu.power_max_mw))
    q.add(1, "Clocks")
    for label, mhz in (("Graphics", 345), ("SM", 345), ("Memory", 2619), ("Video", 765)):
        q.add(2, label, f"{mhz} MHz")
    q.add(1, "Max Clocks")
    for label, mhz in (("Graphics", 1980), ("SM", 1980), ("Memory", 2619), ("Video", 1545)):
        q.add(2, label, f"{mhz} MHz")
    q.add(1, "Fabric")
    q.add(2, "State", _FABRIC_STATE.get(gpu.fabric_state, "N/A") if gpu.fabric_supported else "N/A")
    q.add(2, "Status", ("Success" if gpu.fabric_status == 0 else "Failure") if gpu.fabric_supported
          and gpu.fabric_state == 3 else "N/A")
    q.add(1, "Processes", "None")


def _ecc_query(q: _Q, gpu: GpuState) -> None:
    q.add(1, "ECC Mode")
    q.add(2, "Current", _on(gpu.ecc_current))
    q.add(2, "Pending", _on(gpu.ecc_pending))
    q.add(1, "ECC Errors")

    def value(key: str) -> object:
        return gpu.ecc[key] if gpu.ecc_current else "N/A"

    for counter in ("volatile", "aggregate"):
        q.add(2, counter.capitalize())
        q.add(3, "SRAM Correctable", value(f"corrected_{counter}_sram"))
        q.add(3, "SRAM Uncorrectable Parity", 0 if gpu.ecc_current else "N/A")
        q.add(3, "SRAM Uncorrectable SEC-DED", value(f"uncorrected_{counter}_sram"))
        q.add(3, "DRAM Correctable", value(f"corrected_{counter}_dram"))
        q.add(3, "DRAM Uncorrectable", value(f"uncorrected_{counter}_dram"))
    q.add(3, "SRAM Threshold Exceeded", _yes(gpu.ecc["uncorrected_aggregate_sram"] > 4))
    q.add(2, "Aggregate Uncorrectable SRAM Sources")
    for label in ("SRAM L2", "SRAM SM", "SRAM Microcontroller", "SRAM PCIE", "SRAM Other"):
        q.add(3, label, gpu.ecc["uncorrected_aggregate_sram"] if label == "SRAM L2" else 0)


def _remap_query(q: _Q, gpu: GpuState) -> None:
    q.add(1, "Retired Pages")
    for label in ("Single Bit ECC", "Double Bit ECC", "Pending Page Blacklist"):
        q.add(2, label, "N/A")
    q.add(1, "Remapped Rows")
    q.add(2, "Correctable Error", gpu.remap_correctable)
    q.add(2, "Uncorrectable Error", gpu.remap_uncorrectable)
    q.add(2, "Pending", _yes(gpu.remap_pending))
    q.add(2, "Remapping Failure Occurred", _yes(gpu.remap_failure))
    q.add(2, "Bank Remap Availability Histogram")
    for label, banks in zip(("Max", "High", "Partial", "Low", "None"), gpu.remap_histogram, strict=True):
        q.add(3, label, f"{banks} bank(s)")


def cuda_version_text(version: int) -> str:
    return f"{version // 1000}.{version % 1000 // 10}"


def query(state: NodeState, now: float | None = None) -> str:
    """``nvidia-smi -q``."""
    q = _Q()
    q.lines.append("")
    q.lines.append("==============NVSMI LOG==============")
    q.lines.append("")
    q.add(0, "Timestamp", time.strftime("%a %b %d %H:%M:%S %Y", time.gmtime(now)))
    q.add(0, "Driver Version", state.host.driver_version)
    q.add(0, "CUDA Version", cuda_version_text(state.host.cuda_version))
    q.lines.append("")
    gpus = state.visible_gpus
    q.add(0, "Attached GPUs", len(gpus))
    for minor, gpu in enumerate(gpus):
        _gpu_query(q, minor, gpu, state.host.driver_version)
        q.lines.append("")
    return "\n".join(q.lines) + "\n"


def _row(*cells: str) -> str:
    return "|" + "|".join(cells) + "|"


def _spread(left: str, right: str, width: int) -> str:
    return left + " " * max(1, width - len(left) - len(right)) + right


def summary(state: NodeState, now: float | None = None) -> str:
    """``nvidia-smi`` with no arguments: the GPU table of driver 535."""
    driver = state.host.driver_version
    cuda = cuda_version_text(state.host.cuda_version)
    rule = "+" + "-" * 41 + "+" + "-" * 22 + "+" + "-" * 22 + "+"
    lines = [
        time.strftime("%a %b %d %H:%M:%S %Y", time.gmtime(now)) + " " * 7,
        "+" + "-" * 87 + "+",
        _row(f" NVIDIA-SMI {driver:<23}Driver Version: {driver:<13}CUDA Version: {cuda:<9}"),
        "|" + "-" * 41 + "+" + "-" * 22 + "+" + "-" * 22 + "+",
        _row(" GPU  Name                 Persistence-M ", " Bus-Id        Disp.A ", " Volatile Uncorr. ECC "),
        _row(" Fan  Temp   Perf          Pwr:Usage/Cap ", "         Memory-Usage ", " GPU-Util  Compute M. "),
        _row(" " * 41, " " * 22, "               MIG M. "),
        "|" + "=" * 41 + "+" + "=" * 22 + "+" + "=" * 22 + "|",
    ]
    for i, gpu in enumerate(state.visible_gpus):
        ecc = str(gpu.ecc["uncorrected_volatile_dram"] + gpu.ecc["uncorrected_volatile_sram"]) \
            if gpu.ecc_current else "N/A"
        power = f"{round(gpu.power_usage_mw / 1000)}W / {round(gpu.power_enforced_mw / 1000)}W "
        used = gpu.memory_used_mib + 1
        lines += [
            _row(_spread(f"{i:>4}  {gpu.name}", "On  " if gpu.persistence else "Off  ", 41),
                 f" {nvml_bus_id(gpu.bus_id)} Off ", f"{ecc:>21} "),
            _row(_spread(f" N/A  {gpu.temperature_c:>3}C    P0", power, 41),
                 f"{f'{used}MiB / {gpu.memory_total_mib}MiB':>21} ", f"{'0%':>8}{'Default':>13} "),
            _row(" " * 41, " " * 22, f"{'Enabled' if gpu.mig_current else 'Disabled':>21} "),
            rule,
        ]
    lines += [
        " " * 89,
        "+" + "-" * 87 + "+",
        _row(f"{' Processes:':<87}"),
        _row(f"{'  GPU   GI   CI        PID   Type   Process name':<75}{'GPU Memory':<12}"),
        _row(f"{'        ID   ID':<75}{'Usage':<12}"),
        "|" + "=" * 87 + "|",
        _row(f"{'  No running processes found':<87}"),
        "+" + "-" * 87 + "+",
    ]
    return "\n".join(lines) + "\n"
