"""The simulated PCIe hierarchy: host bridges, root ports, switches and endpoints.

Every GPU sits behind a PCIe switch (root port -> switch upstream port ->
downstream port -> endpoint) and its paired compute HCA hangs off another
downstream port of the SAME switch, so their nearest common ancestor is that
switch (``PIX`` in ``nvidia-smi topo -m``). Storage HCAs sit directly under a
root port of their own. Bus numbers for the bridges are picked below the
endpoints' buses, as firmware numbers them on a DGX.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict

PciKind = Literal["root_port", "switch_up", "switch_down", "gpu", "hca", "nvswitch", "nvme"]

# PCIe generation -> sysfs speed string and lspci speed token.
SPEED_SYSFS = {1: "2.5 GT/s PCIe", 2: "5.0 GT/s PCIe", 3: "8.0 GT/s PCIe", 4: "16.0 GT/s PCIe",
               5: "32.0 GT/s PCIe"}
SPEED_LSPCI = {1: "2.5GT/s", 2: "5GT/s", 3: "8GT/s", 4: "16GT/s", 5: "32GT/s"}

# ACS control bits (PCIe spec): SrcValid, TransBlk, ReqRedir, CmpltRedir, UpstreamFwd,
# EgressCtrl, DirectTrans.
ACS_BITS = ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans")
ACS_SWITCH_CAP = 0x5F  # everything but EgressCtrl
ACS_ROOT_CAP = 0x1F
ACS_REDIRECT = 0x1D  # SrcValid+ ReqRedir+ CmpltRedir+ UpstreamFwd+: what the kernel enables


class PciDevice(BaseModel):
    """One PCI function as sysfs, lspci and topo -m see it."""

    model_config = ConfigDict(extra="forbid")

    bdf: str
    kind: PciKind
    parent: str | None
    host_bridge: str
    vendor: str
    device: str
    subsystem_vendor: str
    subsystem_device: str
    class_code: str
    revision: str
    numa_node: int
    local_cpulist: str
    cur_gen: int = 5
    max_gen: int = 5
    cur_width: int = 16
    max_width: int = 16
    acs_cap: int | None = None
    acs_ctl: int = 0
    label: str = ""
    secondary_bus: int | None = None
    subordinate_bus: int | None = None
    port_number: int = 0
    iommu_group: int = 0


def bus_of(bdf: str) -> int:
    return int(bdf.split(":")[1], 16)


def domain_of(bdf: str) -> int:
    return int(bdf.split(":")[0], 16)


def _bdf(domain: int, bus: int, dev: int = 0) -> str:
    return f"{domain:04x}:{bus:02x}:{dev:02x}.0"


class _BusAllocator:
    """Hands out bus numbers that no endpoint and no other bridge uses."""

    def __init__(self, used: Iterable[int]) -> None:
        self.used = set(used)

    def run_below(self, limit: int, length: int) -> int:
        """The highest start ``b`` with ``b .. b+length-1`` free and ``< limit``; else anywhere."""
        for start in range(limit - length, -1, -1):
            if all(b not in self.used for b in range(start, start + length)):
                return self._take(start, length)
        for start in range(256 - length):
            if all(b not in self.used for b in range(start, start + length)):
                return self._take(start, length)
        raise ValueError("no free PCI bus numbers left for the simulated hierarchy")

    def _take(self, start: int, length: int) -> int:
        self.used.update(range(start, start + length))
        return start


def _root_port(domain: int, root_bus: int, numa: int, cpulist: str, secondary: int, subordinate: int) -> PciDevice:
    return PciDevice(
        bdf=_bdf(domain, root_bus, 1), kind="root_port", parent=None,
        host_bridge=f"pci{domain:04x}:{root_bus:02x}", vendor="0x8086", device="0x352a",
        subsystem_vendor="0x8086", subsystem_device="0x0000", class_code="0x060400", revision="0x04",
        numa_node=numa, local_cpulist=cpulist, acs_cap=ACS_ROOT_CAP, secondary_bus=secondary,
        subordinate_bus=subordinate, port_number=1,
    )


def _switch_port(kind: PciKind, bdf: str, parent: str, host_bridge: str, numa: int, cpulist: str,
                 secondary: int, subordinate: int, port: int) -> PciDevice:
    return PciDevice(
        bdf=bdf, kind=kind, parent=parent, host_bridge=host_bridge, vendor="0x1000", device="0xc030",
        subsystem_vendor="0x1000", subsystem_device="0x100b", class_code="0x060400", revision="0xb0",
        numa_node=numa, local_cpulist=cpulist,
        acs_cap=ACS_SWITCH_CAP if kind == "switch_down" else None,
        secondary_bus=secondary, subordinate_bus=subordinate, port_number=port,
    )


def build_tree(endpoints: list[PciDevice], switch_groups: list[list[str]]) -> list[PciDevice]:
    """Place ``endpoints`` in a hierarchy; each group of bdfs shares one switch, others a root port.

    The endpoints' ``parent`` and ``host_bridge`` are filled in; returns every device
    (bridges and endpoints) sorted by bdf.
    """
    by_bdf = {e.bdf: e for e in endpoints}
    alloc = _BusAllocator(bus_of(e.bdf) for e in endpoints)
    devices: list[PciDevice] = []
    grouped = {bdf for group in switch_groups for bdf in group}
    for group in switch_groups:
        members = sorted(group, key=bus_of)
        first = by_bdf[members[0]]
        domain = domain_of(first.bdf)
        base = alloc.run_below(bus_of(first.bdf), 3)
        last_bus = max(bus_of(b) for b in members)
        root = _root_port(domain, base, first.numa_node, first.local_cpulist, base + 1, last_bus)
        up = _switch_port("switch_up", _bdf(domain, base + 1), root.bdf, root.host_bridge,
                          first.numa_node, first.local_cpulist, base + 2, last_bus, 0)
        devices += [root, up]
        for slot, bdf in enumerate(members):
            down = _switch_port("switch_down", _bdf(domain, base + 2, slot), up.bdf, root.host_bridge,
                                first.numa_node, first.local_cpulist, bus_of(bdf), bus_of(bdf), slot + 1)
            endpoint = by_bdf[bdf]
            endpoint.parent = down.bdf
            endpoint.host_bridge = root.host_bridge
            devices += [down, endpoint]
    for endpoint in endpoints:
        if endpoint.bdf in grouped:
            continue
        devices += attach_to_new_root_port(endpoint, alloc)
    devices.sort(key=lambda d: d.bdf)
    _assign_iommu_groups(devices)
    return devices


def _assign_iommu_groups(devices: list[PciDevice]) -> None:
    """Root ports isolate; everything below one switch shares a group (ACS off on its ports)."""
    index = {d.bdf: d for d in devices}
    groups: dict[str, int] = {}
    for device in devices:
        up = next((a for a in ancestors(index, device.bdf) if a.kind == "switch_up"), None)
        key = up.bdf if up is not None else device.bdf  # a switch's upstream port keys itself
        device.iommu_group = groups.setdefault(key, len(groups))


def attach_to_new_root_port(endpoint: PciDevice, alloc: _BusAllocator) -> list[PciDevice]:
    domain = domain_of(endpoint.bdf)
    base = alloc.run_below(bus_of(endpoint.bdf), 1)
    root = _root_port(domain, base, endpoint.numa_node if endpoint.numa_node >= 0 else 0,
                      endpoint.local_cpulist, bus_of(endpoint.bdf), bus_of(endpoint.bdf))
    endpoint.parent = root.bdf
    endpoint.host_bridge = root.host_bridge
    return [root, endpoint]


def attach_endpoints(devices: list[PciDevice], endpoints: list[PciDevice]) -> list[PciDevice]:
    """Hang each of ``endpoints`` off a root port of its own, leaving the bus numbers of ``devices`` as they are.

    An endpoint's bus (its bdf) is kept when free, else it moves to the nearest free bus below; each
    new device gets an IOMMU group of its own. Returns every device sorted by bdf.
    """
    alloc = _BusAllocator(bus_of(d.bdf) for d in devices)
    alloc.used.update(b for d in devices for b in (d.secondary_bus, d.subordinate_bus) if b is not None)
    alloc.used.update(int(d.host_bridge.split(":")[1], 16) for d in devices if d.host_bridge)
    group = max((d.iommu_group for d in devices), default=-1) + 1
    out = list(devices)
    for endpoint in endpoints:
        bus = bus_of(endpoint.bdf)
        if bus in alloc.used:
            bus = alloc.run_below(bus, 1)
        else:
            alloc.used.add(bus)
        endpoint.bdf = _bdf(domain_of(endpoint.bdf), bus)
        added = attach_to_new_root_port(endpoint, alloc)
        for device in added:
            device.iommu_group = group
            group += 1
        out += added
    out.sort(key=lambda d: d.bdf)
    return out


def move_to_own_root_port(devices: list[PciDevice], bdf: str, numa: int, cpulist: str) -> list[PciDevice]:
    """Detach endpoint ``bdf`` from its switch and hang it off a new root port (same socket)."""
    index = {d.bdf: d for d in devices}
    endpoint = index[bdf]
    old_port = index.get(endpoint.parent or "")
    kept = [d for d in devices if old_port is None or d.kind != "switch_down" or d.bdf != old_port.bdf]
    alloc = _BusAllocator(bus_of(d.bdf) for d in kept)
    alloc.used.update(b for d in kept for b in (d.secondary_bus, d.subordinate_bus) if b is not None)
    alloc.used.update(int(d.host_bridge.split(":")[1], 16) for d in kept)
    domain = domain_of(bdf)
    base = alloc.run_below(bus_of(bdf), 1)
    root = _root_port(domain, base, numa, cpulist, bus_of(bdf), bus_of(bdf))
    root.iommu_group = max(d.iommu_group for d in devices) + 1
    endpoint.iommu_group = root.iommu_group + 1
    endpoint.parent = root.bdf
    endpoint.host_bridge = root.host_bridge
    kept.append(root)
    kept.sort(key=lambda d: d.bdf)
    return kept


def ancestors(devices: dict[str, PciDevice], bdf: str) -> list[PciDevice]:
    """The bridges above ``bdf``, nearest first."""
    chain: list[PciDevice] = []
    parent = devices[bdf].parent
    while parent is not None:
        bridge = devices[parent]
        chain.append(bridge)
        parent = bridge.parent
    return chain


def sysfs_path(devices: dict[str, PciDevice], bdf: str) -> str:
    """``devices/pci0000:15/0000:15:01.0/.../<bdf>`` relative to ``/sys``."""
    chain = [d.bdf for d in reversed(ancestors(devices, bdf))]
    return "/".join(["devices", devices[bdf].host_bridge, *chain, bdf])


def relation(devices: dict[str, PciDevice], a: str, b: str) -> str:
    """What ``nvidia-smi topo -m`` prints for two endpoints' PCIe path."""
    if a == b:
        return " X "
    up_a, up_b = ancestors(devices, a), ancestors(devices, b)
    common = {d.bdf for d in up_a} & {d.bdf for d in up_b}
    if common:
        nearest = next(d for d in up_a if d.bdf in common)
        bridges_a = up_a.index(nearest)
        bridges_b = next(i for i, d in enumerate(up_b) if d.bdf == nearest.bdf)
        if nearest.kind == "switch_up" and bridges_a <= 1 and bridges_b <= 1:
            return "PIX"
        if nearest.kind != "root_port":
            return "PXB"
        return "PHB"
    if devices[a].host_bridge == devices[b].host_bridge:
        return "PHB"
    numa_a = up_a[-1].numa_node if up_a else devices[a].numa_node
    numa_b = up_b[-1].numa_node if up_b else devices[b].numa_node
    return "NODE" if numa_a == numa_b else "SYS"


def switch_downstream_ports(devices: dict[str, PciDevice], bdf: str) -> list[PciDevice]:
    """The downstream ports of the switch above endpoint ``bdf`` (empty when it has none)."""
    up = next((d for d in ancestors(devices, bdf) if d.kind == "switch_up"), None)
    if up is None:
        return []
    return [d for d in devices.values() if d.kind == "switch_down" and d.parent == up.bdf]


def acs_flags(value: int) -> str:
    return " ".join(f"{name}{'+' if value & (1 << bit) else '-'}" for bit, name in enumerate(ACS_BITS))
