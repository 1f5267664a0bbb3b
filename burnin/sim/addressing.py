"""The address plan of a simulated rack: one pure function of the node type and the node's name.

Every address a simulated node holds comes from here, so the shims (burnin.sim.storage.derive, the
fabric's NCCL bootstrap address) and the lab's kernel (its network namespaces: node namespaces, the fabric
namespace's bridges and targets, the management /31s) agree:

- compute rail ``r`` (a compute HCA with an IPoIB netdev): ``192.168.<r>.<h>/24``, gateway ``.254``;
- BlueField netdev ``i`` of the storage fabric: ``10.20.<4i>.<h>/22``, gateway ``.1``;
- a node type without a compute IPoIB netdev: ``10.0.0.<h>/24`` (``eth0``, where NCCL bootstraps);
- in a kernel-network lab, node ``k`` of the rack: a /31 of the lab's /24 of 198.18.0.0/15 (host to node),
  and ``.k+1`` of another /24 of it, the nodes' own network (node to node: ssh, mpirun).

``<h>``, the node's host offset, is the same in every subnet of the node: the node's number ``n``
(the digits its name ends with: ``sim07`` is 7, ``sim128`` 128) takes the ``n``-th offset, counting
from ``.3``, that is free in every one of its subnets: not a network or broadcast address, not a
gateway, not a storage target's address (its ``address``, or a subnet's probe), not inside a storage
subnet that lies within the node's subnet. So ``sim01``..``sim07`` are ``.3``..``.9`` and, with
``nfs-home`` at 10.20.0.10, ``sim08`` is ``.11``. A name without a number gets a stable hash.

Why from the name, not from the node's place in the rack: a node is rendered from its NodeState
alone, at every shim call, fault and re-render (``apply_fault`` rebuilds a node from its name), so
its addresses must be a function of its name and node type: stable, the same in any rack, and for
the simulator's names (``sim01``..``simN``, numbered 1..N) distinct by construction.
:meth:`AddressPlan.check_rack` refuses, as a usage error (exit 2), a rack whose names would share
an offset or that holds more nodes than the plan has offsets (:attr:`AddressPlan.capacity`: 250 for
``hgx-h100-8gpu``, whose /24 rails and one target at .10 bound it). A kernel-network lab holds at
most :data:`MANAGEMENT_SLOT_NODES` (128) nodes: its management /31s fill one /24.
"""

from __future__ import annotations

import functools
import hashlib
import ipaddress
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Interface, IPv4Network
from typing import Literal

from burnin.errors import UsageError
from burnin.topology.model import StorageTarget, Topology

IPOIB_GATEWAY_OFFSET = 254
"""The compute rails' gateway: ``192.168.<rail>.254`` (the lab's fabric bridge of that rail)."""
STORAGE_GATEWAY_OFFSET = 1
"""The storage networks' gateway: ``10.20.<4i>.1``, through which off-subnet targets are routed."""
OOB_NETWORK = IPv4Network("10.0.0.0/24")
OOB_GATEWAY_OFFSET = 254
FIRST_OFFSET = 3
"""Node 1's host offset when nothing below it is reserved (``.1`` gateway, ``.2`` kept free)."""
MANAGEMENT_NET = IPv4Network("198.18.0.0/15")
"""The kernel-network lab's management addresses (the benchmarking range, never a site's)."""
MANAGEMENT_SLOT_NODES = 128
"""Nodes of one kernel-network lab rack: its management /31s fill one /24 of :data:`MANAGEMENT_NET`."""
MANAGEMENT_SLOTS = MANAGEMENT_NET.num_addresses // 256

SubnetKind = Literal["ipoib", "storage", "oob"]


def ipoib_network(rail: int) -> IPv4Network:
    return IPv4Network(f"192.168.{rail}.0/24")


def storage_network(index: int) -> IPv4Network:
    return IPv4Network(f"10.20.{4 * index}.0/22")


@dataclass(frozen=True)
class Subnet:
    """One network every node of the rack has an address in."""

    kind: SubnetKind
    index: int
    """The rail (``ipoib``), the BlueField netdev's position in the storage section (``storage``), 0 (``oob``)."""
    network: IPv4Network
    gateway: IPv4Address

    @property
    def label(self) -> str:
        what = {"ipoib": f"IPoIB rail {self.index}", "storage": f"storage network {self.index}",
                "oob": "out-of-band network"}[self.kind]
        return f"{what} {self.network}"


@dataclass(frozen=True)
class NodeAddresses:
    """A node's addresses, with their prefixes."""

    node: str
    number: int
    offset: int
    ipoib: tuple[IPv4Interface, ...]
    """Per compute rail."""
    storage: tuple[IPv4Interface, ...]
    """Per BlueField netdev of the storage section."""
    oob: IPv4Interface | None
    """Only for a node type without a compute IPoIB netdev."""

    @property
    def interfaces(self) -> tuple[IPv4Interface, ...]:
        return (*self.ipoib, *self.storage, *((self.oob,) if self.oob is not None else ()))


@dataclass(frozen=True)
class AddressPlan:
    subnets: tuple[Subnet, ...]
    targets: tuple[IPv4Address, ...]
    """Every IPv4 storage target address (an ``address``, a subnet's probe or first host), in order."""
    reserved: frozenset[IPv4Address]
    """Addresses no node may hold: network, broadcast and gateway of each subnet, targets, storage subnets."""
    offsets: tuple[int, ...]
    """The host offsets free in every subnet, ascending: node number ``n`` takes ``offsets[n - 1]``."""

    @property
    def capacity(self) -> int:
        """The most nodes of one rack (numbered 1..capacity)."""
        return len(self.offsets)

    def number(self, node: str) -> int:
        """The node's number: the digits its name ends with, else (or for 0) a stable hash in 1..capacity."""
        digits = re.search(r"(\d+)$", node)
        value = int(digits.group(1)) if digits else 0
        if value:
            return value
        digest = int.from_bytes(hashlib.blake2b(node.encode(), digest_size=4).digest(), "big")
        return 1 + digest % max(1, self.capacity)

    def node(self, node: str) -> NodeAddresses:
        number = self.number(node)
        if number > self.capacity:
            raise UsageError(f"simulated node {node} is number {number}: {self._limit()}")
        offset = self.offsets[number - 1]

        def at(kind: SubnetKind) -> tuple[IPv4Interface, ...]:
            return tuple(IPv4Interface(f"{s.network.network_address + offset}/{s.network.prefixlen}")
                         for s in self.subnets if s.kind == kind)

        oob = at("oob")
        return NodeAddresses(node, number, offset, at("ipoib"), at("storage"), oob[0] if oob else None)

    def rack(self, names: Sequence[str], what: str = "a simulated rack") -> dict[str, NodeAddresses]:
        """Every node's addresses, after :meth:`check_rack`."""
        self.check_rack(names, what)
        return {name: self.node(name) for name in names}

    def check_rack(self, names: Sequence[str], what: str = "a simulated rack") -> None:
        """Refuse (UsageError) a rack whose nodes would share addresses or run past :attr:`capacity`."""
        if len(names) > self.capacity:
            raise UsageError(f"{len(names):,} simulated nodes asked for: {self._limit(what)}")
        seen: dict[int, str] = {}
        for name in names:
            number = self.number(name)
            if number > self.capacity:
                raise UsageError(f"simulated node {name} is number {number}: {self._limit(what)}")
            other = seen.setdefault(number, name)
            if other != name:
                offset = self.offsets[number - 1]
                raise UsageError(f"simulated nodes {other} and {name} would share host address .{offset} in "
                                 f"{self.subnets[0].label} (a node's addresses follow the number its name ends "
                                 "with): name them sim01, sim02, ...")

    def _limit(self, what: str = "a simulated rack") -> str:
        smallest = min(self.subnets, key=lambda s: s.network.num_addresses)
        return (f"{what} holds at most {self.capacity} nodes of this node type (each takes one host address, "
                f"the same in all its {len(self.subnets)} subnets, free of gateways and storage targets; the "
                f"smallest is {smallest.label})")


def plan(topology: Topology) -> AddressPlan:
    """The address plan of a rack of ``topology``'s nodes."""
    rails = sum(1 for h in topology.compute_hcas if h.netdev)
    storage = topology.storage
    return plan_for(rails, len(storage.netdevs) if storage is not None else 0,
                    tuple(storage.targets) if storage is not None else ())


@functools.lru_cache(maxsize=64)
def plan_for(rails: int, storage_netdevs: int, targets: tuple[StorageTarget, ...]) -> AddressPlan:
    """The plan of a node type with ``rails`` compute IPoIB netdevs, ``storage_netdevs`` BlueField netdevs
    and these storage targets."""
    subnets = [Subnet("ipoib", r, net, net.network_address + IPOIB_GATEWAY_OFFSET)
               for r, net in ((r, ipoib_network(r)) for r in range(rails))]
    subnets += [Subnet("storage", i, net, net.network_address + STORAGE_GATEWAY_OFFSET)
                for i, net in ((i, storage_network(i)) for i in range(storage_netdevs))]
    if not rails:
        subnets.append(Subnet("oob", 0, OOB_NETWORK, OOB_NETWORK.network_address + OOB_GATEWAY_OFFSET))
    addresses = [ipaddress.ip_address(t.destination) for t in targets]
    target_addresses = tuple(a for a in addresses if isinstance(a, IPv4Address))
    reserved = set(target_addresses)
    for subnet in subnets:
        reserved |= {subnet.network.network_address, subnet.network.broadcast_address, subnet.gateway}
        reserved |= _inner_storage_subnets(subnet.network, targets)
    top = min(s.network.num_addresses for s in subnets) - 1  # the broadcast offset of the smallest subnet
    offsets = tuple(o for o in range(FIRST_OFFSET, top)
                    if all(s.network.network_address + o not in reserved for s in subnets))
    return AddressPlan(tuple(subnets), target_addresses, frozenset(reserved), offsets)


def _inner_storage_subnets(network: IPv4Network, targets: Iterable[StorageTarget]) -> set[IPv4Address]:
    """Every address of a storage target subnet that lies inside (and is smaller than) ``network``."""
    out: set[IPv4Address] = set()
    for target in targets:
        if target.subnet is None:
            continue
        inner = ipaddress.ip_network(target.subnet)
        if isinstance(inner, IPv4Network) and inner.subnet_of(network) and inner.prefixlen > network.prefixlen:
            out |= set(inner)
    return out


def management_pair(slot: int, index: int) -> tuple[IPv4Address, IPv4Address]:
    """(host side, node side) of node ``index``'s /31 in a kernel-network lab's /24 ``slot`` of 198.18.0.0/15."""
    if not 0 <= slot < MANAGEMENT_SLOTS or not 0 <= index < MANAGEMENT_SLOT_NODES:
        raise ValueError(f"management slot {slot}, node {index}: outside 0..{MANAGEMENT_SLOTS - 1}, "
                         f"0..{MANAGEMENT_SLOT_NODES - 1}")
    base = MANAGEMENT_NET.network_address + slot * 256 + 2 * index
    return base, base + 1


def mesh_address(slot: int, index: int) -> IPv4Interface:
    """Node ``index``'s address on a kernel-network lab's node-to-node network (ssh and mpirun between nodes).

    The /24 half the range away from the lab's management slot, so it never meets the lab's own /31s;
    it lives only inside the lab's namespaces (a bridge of the fabric namespace), never on the host.
    """
    if not 0 <= slot < MANAGEMENT_SLOTS or not 0 <= index < MANAGEMENT_SLOT_NODES:
        raise ValueError(f"management slot {slot}, node {index}: outside 0..{MANAGEMENT_SLOTS - 1}, "
                         f"0..{MANAGEMENT_SLOT_NODES - 1}")
    base = MANAGEMENT_NET.network_address + ((slot + MANAGEMENT_SLOTS // 2) % MANAGEMENT_SLOTS) * 256
    return IPv4Interface(f"{base + index + 1}/24")
