"""The simulated host's CPUs, memory and census devices (TOP-06, 07, 09, 10), and the faults that break them.

A healthy node follows its topology: every CPU on the designed cpufreq governor,
THP in an accepted mode, no static hugepages, the designed memory split evenly
over the NUMA nodes, and the topology's count of NVSwitches and NVMe drives on
the PCI bus. Files are rendered in the kernel's formats (fs/proc/meminfo.c,
drivers/base/node.c, mm/huge_memory.c).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from burnin.errors import UsageError
from burnin.sim.pcie import PciDevice, PciKind
from burnin.sim.software import software_files
from burnin.topology.model import Topology

if TYPE_CHECKING:
    from burnin.sim.faults import Fault
    from burnin.sim.state import NodeState

NVSWITCH_PCI_ID = ("0x10de", "0x22a3", "0x10de", "0x0000")  # H100 NVSwitch (lspci: Bridge ... Device 22a3)
NVME_PCI_ID = ("0x1344", "0x51c3", "0x1344", "0x0000")  # Micron NVMe, as in the HGX H100 lspci reference
CLASS_NVSWITCH = "0x068000"
CLASS_NVME = "0x010802"
NODE_MEMORY_KIB = 1056466740  # a DGX H100 NUMA node's MemTotal (2015 GiB over two nodes) when no reference says
HUGEPAGE_SIZES_KIB = (2048, 1048576)
THP_MODES = ("always", "madvise", "never")
THP_DEFRAG = ("always", "defer", "defer+madvise", "madvise", "never")
CPUFREQ_DRIVER = "intel_pstate"
DIMM_KIB = 64 * 1024 * 1024  # one 64 GB DDR5 RDIMM of a DGX H100
RESERVED_HUGEPAGES = 16384  # 2 MiB pages: 32 GiB held out of the host's memory
_USED_FRACTION = 0.024  # memory a freshly booted node uses (kernel, page cache)


# ------------------------------------------------------------------ healthy node


def _count(topology: Topology, key: str) -> int:
    ref = topology.ref(key)
    return max(0, int(ref.value)) if ref is not None else 0


def census_endpoints(topology: Topology) -> list[PciDevice]:
    """NVSwitches and NVMe drives as the topology counts them (GPUs and HCAs come from their own lists).

    Wanted buses: NVSwitches at 83-86 as on an HGX H100 (shared/reference/lspci); NVMe split between
    the sockets, low buses on the first NUMA node and high ones on the last. A taken bus moves
    (burnin.sim.pcie.attach_endpoints).
    """
    nodes = sorted(topology.numa.cpulists) or [0]
    first, last = nodes[0], nodes[-1]
    devices: list[PciDevice] = []
    for i in range(_count(topology, "nvswitch_count")):
        devices.append(_endpoint("nvswitch", 0x83 + i, NVSWITCH_PCI_ID, CLASS_NVSWITCH, "0xa1", last, topology,
                                 f"nvswitch{i}"))
    drives = _count(topology, "nvme_count")
    low = (drives + 1) // 2
    for i in range(drives):
        bus, numa = (0x02 + 2 * i, first) if i < low else (0xe2 + 2 * (i - low), last)
        devices.append(_endpoint("nvme", bus, NVME_PCI_ID, CLASS_NVME, "0x01", numa, topology, f"nvme{i}"))
    return devices


def _endpoint(kind: PciKind, bus: int, ids: tuple[str, str, str, str], class_code: str, revision: str, numa: int,
              topology: Topology, label: str) -> PciDevice:
    vendor, device, sub_vendor, sub_device = ids
    return PciDevice(bdf=f"0000:{bus:02x}:00.0", kind=kind, parent=None, host_bridge="", vendor=vendor,
                     device=device, subsystem_vendor=sub_vendor, subsystem_device=sub_device,
                     class_code=class_code, revision=revision, numa_node=numa,
                     local_cpulist=topology.numa.cpulists.get(numa, ""), label=label)


def node_memory(topology: Topology) -> dict[int, int]:
    """MemTotal (kB) of each NUMA node: the topology's host memory split evenly."""
    nodes = sorted(topology.numa.cpulists) or list(range(topology.numa.nodes))
    ref = topology.ref("host_memory_gib")
    each = int(ref.value * 1024 * 1024 / len(nodes)) if ref is not None else NODE_MEMORY_KIB
    return dict.fromkeys(nodes, each)


def thp_mode(topology: Topology) -> str:
    """The THP mode a healthy node runs: madvise (Ubuntu's default) where accepted, else the first accepted."""
    accepted = topology.host.transparent_hugepage
    return "madvise" if "madvise" in accepted else accepted[0]


# ------------------------------------------------------------------ files


def _kb(label: str, kib: int) -> str:
    return f"{label + ':':<16}{kib:>8} kB\n"


def _node_kb(node: int, label: str, kib: int) -> str:
    return f"Node {node} {label + ':':<16}{kib:>8} kB\n"


def _meminfo(state: NodeState) -> str:
    total = sum(_node_sizes(state).values())
    hugetlb = sum(size * count for size, count in state.host.hugepages.items())
    default = state.host.hugepages.get(2048, 0)
    used = int(total * _USED_FRACTION)
    free = max(0, total - used - hugetlb)
    cached = used // 4
    return "".join((
        _kb("MemTotal", total), _kb("MemFree", free), _kb("MemAvailable", free + cached),
        _kb("Buffers", used // 50), _kb("Cached", cached), _kb("SwapCached", 0),
        _kb("Active", used // 3), _kb("Inactive", used // 5), _kb("SwapTotal", 0), _kb("SwapFree", 0),
        _kb("Dirty", 120), _kb("Writeback", 0), _kb("AnonPages", used // 6), _kb("Mapped", used // 40),
        _kb("Shmem", used // 90), _kb("Slab", used // 7), _kb("KernelStack", 52416), _kb("PageTables", 61348),
        _kb("CommitLimit", (total - hugetlb) // 2), _kb("Committed_AS", used // 2),
        _kb("VmallocTotal", 13743895347199), _kb("VmallocUsed", 1102412), _kb("Percpu", 437248),
        _kb("AnonHugePages", 0), _kb("ShmemHugePages", 0), _kb("FileHugePages", 0),
        f"HugePages_Total:   {default:>5}\n", f"HugePages_Free:    {default:>5}\n",
        f"HugePages_Rsvd:    {0:>5}\n", f"HugePages_Surp:    {0:>5}\n",
        _kb("Hugepagesize", 2048), _kb("Hugetlb", hugetlb),
        _kb("DirectMap4k", 1531628), _kb("DirectMap2M", 47732736), _kb("DirectMap1G", 2099249152),
    ))


def _node_sizes(state: NodeState) -> dict[int, int]:
    return {node: state.host.node_memory_kib.get(node, NODE_MEMORY_KIB) for node in sorted(state.host.numa_cpulists)}


def node_meminfo(state: NodeState, node: int) -> str:
    """``node<N>/meminfo`` in drivers/base/node.c's layout (the hugepages are reserved on the first node)."""
    total = _node_sizes(state)[node]
    hugetlb = sum(size * count for size, count in state.host.hugepages.items())
    held = hugetlb if node == min(state.host.numa_cpulists) else 0
    used = int(total * _USED_FRACTION)
    free = max(0, total - used - held)
    pages = state.host.hugepages.get(2048, 0) if held else 0
    return "".join((
        _node_kb(node, "MemTotal", total), _node_kb(node, "MemFree", free), _node_kb(node, "MemUsed", total - free),
        _node_kb(node, "SwapCached", 0), _node_kb(node, "Active", used // 3), _node_kb(node, "Inactive", used // 5),
        _node_kb(node, "Dirty", 60), _node_kb(node, "FilePages", used // 4), _node_kb(node, "AnonPages", used // 6),
        _node_kb(node, "Slab", used // 7),
        f"Node {node} HugePages_Total: {pages:>5}\n", f"Node {node} HugePages_Free:  {pages:>5}\n",
        f"Node {node} HugePages_Surp:  {0:>5}\n",
    ))


def _choices(modes: tuple[str, ...], active: str) -> str:
    return " ".join(f"[{m}]" if m == active else m for m in modes)


def host_files(state: NodeState, ncpus: int) -> tuple[dict[str, str], dict[str, str]]:
    """(files, symlinks) below the root: cpufreq policies, meminfo, THP and hugepage pools; paths root-relative."""
    host = state.host
    files: dict[str, str] = {"sys/devices/system/cpu/present": f"0-{ncpus - 1}", "proc/meminfo": _meminfo(state)}
    links: dict[str, str] = {}
    sockets = {cpu: node for node, text in host.numa_cpulists.items() for cpu in _cpus(text)}
    for cpu in range(ncpus):
        base = f"sys/devices/system/cpu/cpu{cpu}"
        files[f"{base}/topology/physical_package_id"] = str(sockets.get(cpu, 0))
        if cpu:
            files[f"{base}/online"] = "1"
        if host.cpu_governor is not None:
            policy = f"sys/devices/system/cpu/cpufreq/policy{cpu}"
            files[f"{policy}/scaling_governor"] = host.cpu_governor
            files[f"{policy}/scaling_driver"] = CPUFREQ_DRIVER
            links[f"{base}/cpufreq"] = policy
    for node in sorted(host.numa_cpulists):
        files[f"sys/devices/system/node/node{node}/meminfo"] = node_meminfo(state, node)
    files["sys/kernel/mm/transparent_hugepage/enabled"] = _choices(THP_MODES, host.thp_enabled)
    files["sys/kernel/mm/transparent_hugepage/defrag"] = _choices(THP_DEFRAG, "madvise")
    for size, count in sorted(host.hugepages.items()):
        pool = f"sys/kernel/mm/hugepages/hugepages-{size}kB"
        for name, value in (("nr_hugepages", count), ("free_hugepages", count), ("resv_hugepages", 0),
                            ("surplus_hugepages", 0), ("nr_overcommit_hugepages", 0)):
            files[f"{pool}/{name}"] = str(value)
    stack, stack_links = software_files(state)  # the NCCL library (INV-10, burnin.sim.software)
    return {**files, **stack}, {**links, **stack_links}


def _cpus(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        if lo:
            out += range(int(lo), int(hi or lo) + 1)
    return out


# ------------------------------------------------------------------ faults


def governor_powersave(state: NodeState, fault: Fault) -> None:
    if state.host.cpu_governor == "powersave":
        raise UsageError("fault 'governor-powersave': this topology's CPUs already run powersave by design")
    state.host.cpu_governor = "powersave"


def hugepages_reserved(state: NodeState, fault: Fault) -> None:
    state.host.hugepages[2048] = state.host.hugepages.get(2048, 0) + RESERVED_HUGEPAGES


def dimm_missing(state: NodeState, fault: Fault) -> None:
    sizes = _node_sizes(state)
    if not sizes:
        raise UsageError("fault 'dimm-missing': the node has no NUMA node to take a DIMM from")
    last = max(sizes)
    state.host.node_memory_kib = {**sizes, last: sizes[last] - DIMM_KIB}


def nvme_missing(state: NodeState, fault: Fault) -> None:
    drives = [d for d in state.pci if d.kind == "nvme"]
    if not drives:
        raise UsageError("fault 'nvme-missing': this topology has no NVMe drive (nvme_count)")
    gone = max(drives, key=lambda d: d.bdf)
    state.pci = [d for d in state.pci if d.bdf != gone.bdf]


HOST_MUTATORS = {
    "governor-powersave": governor_powersave,
    "hugepages-reserved": hugepages_reserved,
    "dimm-missing": dimm_missing,
    "nvme-missing": nvme_missing,
}
