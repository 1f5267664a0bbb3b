"""The storage fabric of a simulated node: netdevs, routes, NCCL config, sysctls, and its faults (STO).

The storage view of a node is derived from its NodeState (the topology it
carries, its HCAs and its fault list), so every renderer agrees:

- sysfs/procfs below ``root/``: ``sys/class/net/<netdev>/{type,mtu,address,device,master,statistics,ecn}``
  for the BlueField netdevs and the compute IPoIB netdevs, ``proc/sys/net/ipv4/conf/*``, ``etc/nccl.conf``;
- shims in ``bin/`` (:mod:`burnin.sim.formats.storage_tools` prints their real formats): ``ip`` (addr, link,
  route, route get, rule; text and ``-j``), ``ibdev2netdev``, ``mlxconfig``, ``mlnx_qos``, ``ethtool``.

Addressing (burnin.sim.addressing, the one plan the lab's kernel uses too): compute
rail ``r`` has IPoIB ``192.168.<r>.<h>/24``; BlueField netdev ``i`` has
``10.20.<4i>.<h>/22`` with gateway ``.1``, ``<h>`` the node's host offset (free of
gateways and storage targets); each storage target is reachable through
BlueField netdev ``j = target index mod netdevs`` (directly when inside its
subnet, else via its gateway). With a policy table
the storage routes live in that table behind ``ip rule`` ``to <target> lookup
T``; with a VRF they live in the VRF's table and the BlueField netdevs are its
members.

Faults (each caught by its STO check, on this node only):
``storage-route-via-ib`` (the first target routed through the IPoIB netdev of a
compute HCA), ``nccl-hca-leak`` (``/etc/nccl.conf`` NCCL_IB_HCA adds the first
storage RDMA device), ``storage-mtu-1500``, ``bf-nic-mode``, ``qos-pfc-off`` (each
on the first BlueField netdev), ``arp-leak`` (``arp_ignore``/``arp_announce`` 0); ``storage-traffic-on-ib``
is the write tool's (burnin.sim.formats.write_tool): its bytes land on compute HCA mlx5_2's port counters.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from dataclasses import dataclass, field

from burnin.errors import UsageError
from burnin.sim.addressing import IPOIB_GATEWAY_OFFSET, ipoib_network
from burnin.sim.addressing import plan as address_plan
from burnin.sim.faults import DEFAULT_HCA, Fault, parse_fault_spec
from burnin.sim.pcie import sysfs_path
from burnin.sim.state import NodeState, topology_from_dict
from burnin.sim.sysfs import Tree
from burnin.topology.model import Topology

STORAGE_FAULTS = ("storage-route-via-ib", "nccl-hca-leak", "storage-mtu-1500", "bf-nic-mode", "qos-pfc-off",
                  "arp-leak", "storage-traffic-on-ib")
VRF_TABLE = 1000
ARPHRD_ETHER = 1
ARPHRD_INFINIBAND = 32
DEFAULT_SYSCTL = {"rp_filter": 2, "arp_ignore": 1, "arp_announce": 2}


@dataclass
class SimNetdev:
    name: str
    bus_id: str
    rdma: str | None
    kind: str
    """``bluefield`` or ``ipoib``."""
    mtu: int
    interface: str | None
    """Address with prefix (``10.20.0.7/22``), or None."""
    mac: str
    up: bool
    mode: str = "dpu"
    trust: str = "dscp"
    pfc: list[int] = field(default_factory=lambda: [0, 0, 0, 1, 0, 0, 0, 0])
    ecn: list[int] = field(default_factory=lambda: [0, 0, 0, 1, 0, 0, 0, 0])
    rx_bytes: int = 0
    tx_bytes: int = 0
    master: str | None = None
    index: int = 0
    rate_gbps: int = 400

    @property
    def arp_type(self) -> int:
        return ARPHRD_INFINIBAND if self.kind == "ipoib" else ARPHRD_ETHER

    @property
    def address(self) -> str | None:
        return self.interface.split("/")[0] if self.interface else None


@dataclass
class SimRoute:
    dst: str
    dev: str
    gateway: str | None = None
    table: str | None = None
    """None: main."""
    prefsrc: str | None = None
    protocol: str | None = None
    scope: str | None = None
    metric: int | None = None


@dataclass
class SimRule:
    priority: int
    dst: str
    table: str


@dataclass
class SimStorage:
    netdevs: list[SimNetdev]
    routes: list[SimRoute]
    rules: list[SimRule]
    vrf: str | None
    vrf_table: int | None
    destinations: list[str]
    nccl_conf: str
    sysctl: dict[str, dict[str, int]]
    has_fabric: bool

    def netdev(self, name: str) -> SimNetdev | None:
        return next((n for n in self.netdevs if n.name == name), None)

    @property
    def bluefields(self) -> list[SimNetdev]:
        return [n for n in self.netdevs if n.kind == "bluefield"]

    @property
    def ipoib(self) -> list[SimNetdev]:
        return [n for n in self.netdevs if n.kind == "ipoib"]


# ------------------------------------------------------------------ deriving


def _mac(node: str, name: str) -> str:
    raw = hashlib.blake2b(f"{node}/{name}".encode(), digest_size=3).digest()
    return "a0:88:c2:" + ":".join(f"{b:02x}" for b in raw)


def _ipoib_hwaddr(guid: int) -> str:
    return "00:00:10:29:fe:80:00:00:00:00:00:00:" + ":".join(f"{(guid >> s) & 0xff:02x}" for s in range(56, -8, -8))


def derive(state: NodeState) -> SimStorage:
    """The node's storage view, healthy, then with its storage faults applied."""
    topology = topology_from_dict(state.topology)
    plan = address_plan(topology)
    addresses = plan.node(state.name)
    netdevs: list[SimNetdev] = []
    routes: list[SimRoute] = []
    rules: list[SimRule] = []
    compute = [h for h in state.hcas if h.role == "compute" and h.netdev]
    for rail, hca in enumerate(compute):
        interface = addresses.ipoib[rail]
        netdevs.append(SimNetdev(hca.netdev or "", hca.bus_id, hca.name, "ipoib", 4092,
                                 str(interface), _ipoib_hwaddr(hca.port_guid),
                                 hca.state.startswith("4"), index=len(netdevs)))
        routes.append(SimRoute(str(interface.network), hca.netdev or "", protocol="kernel", scope="link",
                               prefsrc=str(interface.ip)))
    fabric = topology.storage
    sysctl_values = dict(DEFAULT_SYSCTL)
    vrf = vrf_table = None
    destinations: list[str] = []
    if fabric is not None:
        sysctl_values = dict(fabric.sysctl.expected()) or dict(DEFAULT_SYSCTL)
        routing = fabric.routing
        vrf = routing.vrf if routing is not None else None
        vrf_table = VRF_TABLE if vrf is not None else None
        table = str(vrf_table) if vrf_table is not None else (
            str(routing.table) if routing is not None and routing.table is not None else None)
        nets = [s for s in plan.subnets if s.kind == "storage"]
        by_bus = {h.bus_id: h for h in state.hcas}
        qos = fabric.qos
        for i, spec in enumerate(fabric.netdevs):
            owner = by_bus.get(spec.bus_id)
            interface = addresses.storage[i]
            bf = SimNetdev(spec.name, spec.bus_id, spec.hca or (owner.name if owner else None), "bluefield",
                           spec.mtu, str(interface), _mac(state.name, spec.name),
                           owner is None or owner.state.startswith("4"),
                           mode=spec.mode, master=vrf, index=len(netdevs),
                           rx_bytes=1_000_000 * (i + 1), tx_bytes=2_000_000 * (i + 1))
            if qos is not None:
                bf.trust = qos.trust
                bf.pfc = [1 if p in qos.pfc_priorities else 0 for p in range(8)]
                bf.ecn = [1 if p in qos.ecn_priorities else 0 for p in range(8)]
            netdevs.append(bf)
            routes.append(SimRoute(str(interface.network), spec.name, table=table, protocol="kernel",
                                   scope="link", prefsrc=str(interface.ip)))
        for j, target in enumerate(fabric.targets):
            destinations.append(target.destination)
            bf = [n for n in netdevs if n.kind == "bluefield"][j % len(fabric.netdevs)]
            net = nets[j % len(fabric.netdevs)]
            dst = target.subnet or f"{target.address}/{32 if ':' not in str(target.address) else 128}"
            destination = ipaddress.ip_network(dst, strict=False)
            if isinstance(destination, ipaddress.IPv4Network) and destination.subnet_of(net.network):
                continue  # on the BlueField's own subnet: its connected route carries it
            routes.append(SimRoute(dst, bf.name, gateway=str(net.gateway), table=table,
                                   protocol="static", prefsrc=bf.address))
            if routing is not None and routing.table is not None:
                rules.append(SimRule(100, dst, str(routing.table)))
        if routing is not None and routing.table is not None:
            for net in nets:
                rules.append(SimRule(100, str(net.network), str(routing.table)))
    sysctl = {scope: dict(sysctl_values) for scope in ("all", "default", *(n.name for n in netdevs))}
    sysctl["lo"] = {"rp_filter": 0, "arp_ignore": 0, "arp_announce": 0}
    compute_names = list(topology.storage.nccl_ib_hca) if topology.storage and topology.storage.nccl_ib_hca \
        else [h.name for h in compute]
    storage_ifs = [n.name for n in netdevs if n.kind == "bluefield"]
    conf = ("# NCCL settings for every job on this node (burnin simulator)\n"
            f"NCCL_IB_HCA=={','.join(f'{name}:1' for name in compute_names)}\n"
            f"NCCL_SOCKET_IFNAME=^{','.join(['docker', 'lo', *storage_ifs])}\n")
    storage = SimStorage(netdevs, routes, rules, vrf, vrf_table, destinations, conf, sysctl, fabric is not None)
    for text in state.faults:
        if text.split("@", 1)[0] in STORAGE_FAULTS:
            _apply(storage, parse_fault_spec(text, topology), state, topology)
    return storage


# ------------------------------------------------------------------ faults


def check_applicable(state: NodeState, fault: Fault) -> None:
    """The inject mutator of every storage fault: the node type must have a storage fabric to break.

    The change itself is derived from the node's fault list when the node is rendered (:func:`derive`).
    """
    if fault.name == "nccl-hca-leak":
        topology = topology_from_dict(state.topology)
        if not [h for h in state.hcas if h.role == "storage"] and topology.storage is None:
            raise UsageError(f"fault {fault.label!r} needs a storage RDMA device; topology "
                             f"{state.topology_name} has none")
        return
    if topology_from_dict(state.topology).storage is None:
        raise UsageError(f"fault {fault.label!r} needs a storage fabric; topology {state.topology_name} declares "
                         "none (no storage section)")


def _first_bluefield(storage: SimStorage) -> SimNetdev:
    return storage.bluefields[0]


def _apply(storage: SimStorage, fault: Fault, state: NodeState, topology: Topology) -> None:
    name = fault.name
    if name == "storage-route-via-ib":
        ipoib = storage.ipoib
        via = next((n for n in ipoib if n.rdma == DEFAULT_HCA), ipoib[0] if ipoib else None)
        if via is None or not storage.destinations:
            raise UsageError("fault 'storage-route-via-ib' needs a compute IPoIB netdev and a storage target")
        rail = ipoib.index(via)
        table = str(storage.vrf_table) if storage.vrf_table is not None else None
        if table is None and topology.storage is not None and topology.storage.routing is not None:
            table = str(topology.storage.routing.table)
        gateway = ipoib_network(rail).network_address + IPOIB_GATEWAY_OFFSET
        storage.routes.insert(0, SimRoute(f"{storage.destinations[0]}/32", via.name,
                                          gateway=str(gateway), table=table,
                                          protocol="static", prefsrc=via.address))
    elif name == "nccl-hca-leak":
        leak = next((n.rdma for n in storage.bluefields if n.rdma),
                    next((h.name for h in state.hcas if h.role == "storage"), None))
        storage.nccl_conf = re.sub(r"^(NCCL_IB_HCA=.*)$", lambda m: f"{m.group(1)},{leak}:1", storage.nccl_conf,
                                   count=1, flags=re.MULTILINE)
    elif name == "storage-mtu-1500":
        _first_bluefield(storage).mtu = 1500
    elif name == "bf-nic-mode":
        _first_bluefield(storage).mode = "nic"
    elif name == "qos-pfc-off":
        _first_bluefield(storage).pfc = [0] * 8
    elif name == "arp-leak":
        for values in storage.sysctl.values():
            values["arp_ignore"] = 0
            values["arp_announce"] = 0


# ------------------------------------------------------------------ routing


def resolve(storage: SimStorage, address: str, vrf: str | None = None) -> SimRoute | None:
    """The route the kernel would pick for ``address`` (policy rules, then the longest prefix, lowest metric)."""
    target = ipaddress.ip_address(address)
    if vrf is not None:
        tables = [str(storage.vrf_table)] if vrf == storage.vrf and storage.vrf_table is not None else []
    else:
        tables = [r.table for r in sorted(storage.rules, key=lambda r: r.priority)
                  if target in ipaddress.ip_network(r.dst, strict=False)]
        tables.append("main")
    for table in tables:
        candidates = [r for r in storage.routes if (r.table or "main") == table
                      and target in ipaddress.ip_network(r.dst, strict=False)]
        if candidates:
            return sorted(candidates, key=lambda r: (-ipaddress.ip_network(r.dst, strict=False).prefixlen,
                                                     r.metric or 0))[0]
    return None


# ------------------------------------------------------------------ sysfs


KERNEL_NETWORK_MARK = "kernel-network"
"""A file in a node's directory: its netdevs are real kernel interfaces in a network namespace of its own."""
KERNEL_NETDEV_FILES = ("mtu", "operstate", "statistics")
"""What a kernel-network node's sysfs tree takes from the kernel (the rest stays simulated: PCI, type, ECN)."""


def extend_root(tree: Tree, state: NodeState, *, kernel_network: bool = False) -> Tree:
    """Add the storage view to the node's sysfs/procfs tree (``render_root``'s result).

    With ``kernel_network`` (a lab node in a network namespace of its own: the lab's netns module), each
    netdev's MTU, state and byte counters, and ``proc/sys/net/ipv4/conf``, are links to the kernel's
    files, which the node's processes (running in that namespace) read as their own.
    """
    storage = derive(state)
    index = state.pci_index()
    for netdev in storage.netdevs:
        if netdev.bus_id not in index:
            continue  # the device is off the bus (gpu-missing does not touch HCAs; kept for safety)
        device = "sys/" + sysfs_path(index, netdev.bus_id)
        net = f"{device}/net/{netdev.name}"
        for name, text in (("type", str(netdev.arp_type)), ("mtu", str(netdev.mtu)),
                           ("operstate", "up" if netdev.up else "down"), ("address", netdev.mac),
                           ("dev_port", "0"), ("ifindex", str(10 + netdev.index)),
                           ("statistics/rx_bytes", str(netdev.rx_bytes)),
                           ("statistics/tx_bytes", str(netdev.tx_bytes))):
            if not (kernel_network and name.split("/")[0] in KERNEL_NETDEV_FILES):
                tree.file(f"{net}/{name}", text)
        if kernel_network:
            for name in KERNEL_NETDEV_FILES:
                for path in [p for p in tree.files if p == f"{net}/{name}" or p.startswith(f"{net}/{name}/")]:
                    del tree.files[path]  # what the PCI renderer gave the HCA's netdev
                tree.host_link(f"{net}/{name}", f"/sys/class/net/{netdev.name}/{name}")
        tree.link(f"{net}/device", device)
        tree.link(f"sys/class/net/{netdev.name}", net)
        if netdev.kind == "bluefield":
            for prio in range(8):
                for point in ("roce_np", "roce_rp"):
                    tree.file(f"{net}/ecn/{point}/enable/{prio}", str(netdev.ecn[prio]))
        if netdev.master:
            tree.link(f"{net}/master", f"sys/devices/virtual/net/{netdev.master}")
    for rail, hca in enumerate(h for h in state.hcas if h.bus_id in index):  # data counters, 4-byte units (STO-03)
        counters = f"sys/{sysfs_path(index, hca.bus_id)}/infiniband/{hca.name}/ports/1/counters"
        tree.file(f"{counters}/port_xmit_data", str(250_000 * (rail + 1)))
        tree.file(f"{counters}/port_rcv_data", str(500_000 * (rail + 1)))
    if storage.vrf:
        virtual = f"sys/devices/virtual/net/{storage.vrf}"
        for name, text in (("type", "1"), ("mtu", "65575"), ("operstate", "up"), ("address", "00:00:00:00:00:00")):
            tree.file(f"{virtual}/{name}", text)
        tree.link(f"sys/class/net/{storage.vrf}", virtual)
    lo = "sys/devices/virtual/net/lo"
    for name, text in (("type", "772"), ("mtu", "65536"), ("operstate", "unknown"), ("address", "00:00:00:00:00:00")):
        tree.file(f"{lo}/{name}", text)
    tree.link("sys/class/net/lo", lo)
    if kernel_network:
        tree.host_link("proc/sys/net/ipv4/conf", "/proc/sys/net/ipv4/conf")
    else:
        for scope, values in storage.sysctl.items():
            for name, value in values.items():
                tree.file(f"proc/sys/net/ipv4/conf/{scope}/{name}", str(value))
    tree.file("etc/nccl.conf", storage.nccl_conf)
    return tree
