"""The node's sysfs and procfs below ``<node>/root``, as a list of files and relative symlinks.

Layout follows Linux: ``sys/devices/pci0000:15/0000:15:01.0/.../0000:1b:00.0`` holds
each PCI function; ``sys/bus/pci/devices/<bdf>``, ``sys/class/infiniband/<hca>`` and
``sys/kernel/iommu_groups/<n>/devices/<bdf>`` are relative symlinks into it, so
``realpath`` never leaves the root and the tree can be moved.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from burnin.sim.formats.dmesg import cmdline
from burnin.sim.host import host_files
from burnin.sim.pcie import SPEED_SYSFS, PciDevice, sysfs_path
from burnin.sim.state import HcaState, NodeState

HW_COUNTERS = ("local_ack_timeout_err", "packet_seq_err", "out_of_buffer")
PKEY_TABLE_IB = 128
_DRIVERS = {"root_port": "pcieport", "switch_up": "pcieport", "switch_down": "pcieport",
            "gpu": "nvidia", "hca": "mlx5_core", "nvswitch": "nvidia-nvswitch", "nvme": "nvme"}
_AER_UNCOR = "".join(f"{name} 0\n" for name in (
    "Undefined", "DLP", "SDES", "TLP", "FCP", "CmpltTO", "CmpltAbrt", "UnxCmplt", "RxOF", "MalfTLP",
    "ECRC", "UnsupReq", "ACSViol", "UncorrIntErr", "BlockedTLP", "AtomicOpBlocked", "TLPBlockedErr",
    "PoisonTLPBlocked"))
_AER_FATAL = _AER_UNCOR + "TOTAL_ERR_FATAL 0"
_AER_NONFATAL = _AER_UNCOR + "TOTAL_ERR_NONFATAL 0"


@dataclass
class Tree:
    """Files (path -> text) and symlinks (path -> relative target), paths relative to the root."""

    files: dict[str, str] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)
    dirs: set[str] = field(default_factory=set)

    def file(self, path: str, text: str) -> None:
        self.files[path] = text if text.endswith("\n") else text + "\n"

    def link(self, path: str, target: str) -> None:
        """A symlink at ``path`` to ``target`` (both root-relative, normalized), stored relative."""
        self.links[path] = relative_target(path, target)

    def dir(self, path: str) -> None:
        self.dirs.add(path)

    def host_link(self, path: str, target: str) -> None:
        """A symlink at ``path`` to the absolute ``target``: a file of the kernel the reader runs under.

        Read inside a lab node's network namespace (the lab's kernel-network racks), ``/sys/class/net/...``
        and ``/proc/sys/net/...`` are that namespace's own.
        """
        if not target.startswith("/"):
            raise ValueError(f"host_link target {target!r} is not absolute")
        self.links[path] = target


def relative_target(link: str, target: str) -> str:
    """The relative symlink text that makes ``link`` point at ``target`` (pure string work)."""
    here = link.split("/")[:-1]
    there = target.split("/")
    common = 0
    for a, b in zip(here, there, strict=False):
        if a != b:
            break
        common += 1
    return "/".join([".."] * (len(here) - common) + there[common:]) or "."


def parse_cpulist(text: str) -> list[int]:
    cpus: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus += range(int(lo), int(hi or lo) + 1)
    return cpus


def cpumask(text: str, ncpus: int) -> str:
    """sysfs ``local_cpus`` form: comma-separated 32-bit hex words, most significant first."""
    mask = 0
    for cpu in parse_cpulist(text):
        mask |= 1 << cpu
    words = max(1, (ncpus + 31) // 32)
    return ",".join(f"{(mask >> (32 * w)) & 0xFFFFFFFF:08x}" for w in reversed(range(words)))


def _pci_device(tree: Tree, state: NodeState, index: dict[str, PciDevice], device: PciDevice,
                ncpus: int) -> str:
    path = "sys/" + sysfs_path(index, device.bdf)
    values = {
        "vendor": device.vendor, "device": device.device, "class": device.class_code,
        "subsystem_vendor": device.subsystem_vendor, "subsystem_device": device.subsystem_device,
        "numa_node": str(device.numa_node), "local_cpulist": device.local_cpulist,
        "local_cpus": cpumask(device.local_cpulist, ncpus),
        "current_link_speed": SPEED_SYSFS[device.cur_gen], "current_link_width": str(device.cur_width),
        "max_link_speed": SPEED_SYSFS[device.max_gen], "max_link_width": str(device.max_width),
    }
    if device.kind in ("gpu", "hca"):
        values["aer_dev_fatal"] = _AER_FATAL
        values["aer_dev_nonfatal"] = _AER_NONFATAL
    for name, text in values.items():
        tree.file(f"{path}/{name}", text)
    driver = f"sys/bus/pci/drivers/{_DRIVERS[device.kind]}"
    tree.dir(driver)
    tree.link(f"{path}/driver", driver)
    tree.link(f"sys/bus/pci/devices/{device.bdf}", path)
    if state.host.cmdline_iommu:
        group = f"sys/kernel/iommu_groups/{device.iommu_group}"
        tree.file(f"{group}/type", state.host.iommu_type)
        tree.link(f"{group}/devices/{device.bdf}", path)
        tree.link(f"{path}/iommu_group", group)
    return path


def _gid(guid: int, ethernet: bool) -> str:
    if ethernet:
        return "0000:0000:0000:0000:0000:ffff:0a00:" + f"{guid & 0xFFFF:04x}"
    g = f"{guid:016x}"
    return "fe80:0000:0000:0000:" + ":".join(g[i:i + 4] for i in range(0, 16, 4))


def _guid_text(guid: int) -> str:
    g = f"{guid:016x}"
    return ":".join(g[i:i + 4] for i in range(0, 16, 4))


def _infiniband(tree: Tree, state: NodeState, hca: HcaState, device_path: str) -> None:
    base = f"{device_path}/infiniband/{hca.name}"
    for name, text in (("fw_ver", hca.fw_ver), ("board_id", hca.board_id), ("hca_type", hca.hca_type),
                       ("hw_rev", "0x0"), ("node_guid", _guid_text(hca.node_guid)),
                       ("sys_image_guid", _guid_text(hca.node_guid)), ("node_type", "1: CA"),
                       ("node_desc", f"{state.name} {hca.name}")):
        tree.file(f"{base}/{name}", text)
    port = f"{base}/ports/1"
    ethernet = hca.link_layer == "Ethernet"
    for name, text in (("state", hca.state), ("phys_state", hca.phys_state), ("rate", hca.rate),
                       ("link_layer", hca.link_layer), ("lid", f"0x{hca.lid:x}"),
                       ("sm_lid", f"0x{hca.sm_lid:x}"), ("lid_mask_count", "0"), ("sm_sl", "0"),
                       ("cap_mask", f"0x{hca.cap_mask:08x}"), ("gids/0", _gid(hca.port_guid, ethernet))):
        tree.file(f"{port}/{name}", text)
    for name, value in (*hca.counters.items(), *hca.traffic.items()):
        tree.file(f"{port}/counters/{name}", str(value))
    # mlx5 shows a 128-entry pkey table on an InfiniBand port and a single entry on a RoCE one.
    table = PKEY_TABLE_IB if not ethernet else 1
    for index in range(max(table, len(hca.pkeys))):
        tree.file(f"{port}/pkeys/{index}", hca.pkeys[index] if index < len(hca.pkeys) else "0x0000")
    for name in HW_COUNTERS:
        tree.file(f"{port}/hw_counters/{name}", "0")
    tree.link(f"{base}/device", device_path)
    tree.link(f"sys/class/infiniband/{hca.name}", base)
    if hca.netdev:
        net = f"{device_path}/net/{hca.netdev}"
        tree.file(f"{net}/operstate", "up" if hca.state.startswith("4") else "down")
        tree.file(f"{net}/mtu", "9000" if ethernet else "4092")
        tree.link(f"sys/class/net/{hca.netdev}", net)


_MODULE_SIZES = (
    ("nvidia_peermem", 16384, "", "(POE)"), ("nvidia_uvm", 1437696, "", "(POE)"),
    ("nvidia_drm", 77824, "", "(POE)"), ("nvidia_modeset", 1302528, "nvidia_drm,", "(POE)"),
    ("nvidia", 56524800, "nvidia_uvm,nvidia_peermem,nvidia_modeset,", "(POE)"),
    ("mlx5_ib", 446464, "", "(OE)"), ("ib_uverbs", 176128, "nvidia_peermem,mlx5_ib,", "(OE)"),
    ("ib_core", 442368, "ib_uverbs,mlx5_ib,", "(OE)"), ("mlx5_core", 2162688, "mlx5_ib,", "(OE)"),
)


def loaded_modules(state: NodeState) -> list[tuple[str, int, str, str]]:
    """(name, size, users, taint) as /proc/modules lists them; peermem only when loaded."""
    if state.host.peermem_loaded:
        return list(_MODULE_SIZES)
    return [(name, size, users.replace("nvidia_peermem,", ""), taint)
            for name, size, users, taint in _MODULE_SIZES if name != "nvidia_peermem"]


def _kernel(tree: Tree, state: NodeState) -> None:
    host = state.host
    tree.file("proc/driver/nvidia/version",
              f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {host.module_version}  "
              "Sun May 12 19:39:15 UTC 2024\n"
              "GCC version:  gcc version 11.4.0 (Ubuntu 11.4.0-1ubuntu1~22.04) \n")
    tree.file("proc/sys/kernel/numa_balancing", str(host.numa_balancing))
    tree.file("proc/sys/kernel/osrelease", host.kernel_release)
    tree.file("proc/cmdline", cmdline(state))
    tree.file("proc/version", f"Linux version {host.kernel_release} (buildd@lcy02-amd64-051) "
                              "#122-Ubuntu SMP Thu May 23 07:48:21 UTC 2024")
    modules = loaded_modules(state)
    tree.file("proc/modules", "".join(
        f"{name} {size} {users.count(',')} {users or '-'} Live 0x0000000000000000 {taint}\n"
        for name, size, users, taint in modules))
    for name, _size, _users, _taint in modules:
        tree.file(f"sys/module/{name}/initstate", "live")
    tree.file("sys/module/nvidia/version", host.module_version)
    if host.peermem_loaded:
        tree.file("sys/module/nvidia_peermem/version", host.module_version)
    tree.file("sys/module/mlx5_core/version", "24.04-0.6.6")


def _numa(tree: Tree, state: NodeState) -> int:
    cpulists = state.host.numa_cpulists
    nodes = sorted(cpulists)
    ncpus = max((max(parse_cpulist(c), default=0) for c in cpulists.values()), default=0) + 1
    online = f"{nodes[0]}-{nodes[-1]}" if len(nodes) > 1 else str(nodes[0])
    for name in ("online", "possible", "has_cpu", "has_memory"):
        tree.file(f"sys/devices/system/node/{name}", online)
    for node in nodes:
        tree.file(f"sys/devices/system/node/node{node}/cpulist", cpulists[node])
        tree.file(f"sys/devices/system/node/node{node}/cpumap", cpumask(cpulists[node], ncpus))
    tree.file("sys/devices/system/cpu/online", f"0-{ncpus - 1}")
    tree.file("sys/devices/system/cpu/possible", f"0-{ncpus - 1}")
    return ncpus


def render_root(state: NodeState) -> Tree:
    """Everything below ``<node>/root``."""
    tree = Tree()
    ncpus = _numa(tree, state)
    index = state.pci_index()
    paths: dict[str, str] = {}
    for device in state.pci:
        paths[device.bdf] = _pci_device(tree, state, index, device, ncpus)
    for hca in state.hcas:
        if hca.bus_id in paths:
            _infiniband(tree, state, hca, paths[hca.bus_id])
    _kernel(tree, state)
    files, links = host_files(state, ncpus)  # CPU governors, meminfo, hugepages (burnin.sim.host)
    for path, text in files.items():
        tree.file(path, text)
    for path, target in links.items():
        tree.link(path, target)
    tree.dir("sys/class/infiniband")
    return tree
