"""Kernel networking for a lab rack: each node's fabric netdevs as real interfaces in a namespace of its own.

``burnin sim up --ssh N`` (root, a topology with a storage fabric) builds, per
lab rack, with ``ip`` only:

- one namespace per node, ``burnin-<lab>-<node>``, holding ``lo``, a management
  veth ``mgmt0`` (its peer ``bm<lab><i>`` in the host namespace, a /31 of
  198.18.0.0/15, the benchmarking range: the one thing the host can reach), and
  one veth per compute IPoIB netdev and per BlueField netdev, named as the
  topology names them, with the node's addresses, MTUs, routes, policy rules
  and ``rp_filter``/``arp_*`` settings (burnin.sim.storage.derive: the same
  view the shims print, faults included);
- one namespace ``burnin-<lab>-fabric``: a bridge per compute rail
  (``192.168.<rail>.254/24``, the IPoIB side) and per BlueField network (its
  gateway ``.1``), every node's peer veth enslaved to its bridge, and each
  storage target address on ``lo``, where the lab's storage target
  (burnin_lab.netstore) listens; and the bridge ``mesh``, the nodes' own
  network: each node's ``mesh0`` (``.k+1`` of a /24 of 198.18.0.0/15 that is
  not the management one, burnin.sim.addressing.mesh_address) reaches every
  other node's sshd there, as ``mpirun`` on a node needs (the fabric's faults
  never touch it). Nothing routes between the fabric namespace and the host.

Every address (node, gateway, target, management) comes from one plan,
burnin.sim.addressing, that the shims use too: no node holds another's
address, a gateway's or a storage target's, up to :data:`MAX_NODES` nodes.

The node's sshd runs inside its namespace (``ip netns exec``: the namespace's
own ``/sys``), so what the node's tools read is the kernel's: ``ip`` is the real
one, ``/sys/class/net/<dev>/{mtu,operstate,statistics}`` and
``/proc/sys/net/ipv4/conf`` are linked from the node's sysfs tree
(burnin.sim.storage.KERNEL_NETWORK_MARK), and STO-03's writes cross the
kernel's routes as TCP to the target. Faults that change routes, MTU or
sysctls (``storage-route-via-ib``, ``storage-mtu-1500``, ``arp-leak``) are
applied to the kernel; the others stay in the shims (PCI functions, firmware
mode, QoS, NCCL files). This kernel has no VRF support: a topology whose
routing names a VRF is refused here (policy routing: ``routing.table``).

``destroy`` deletes every namespace it created (which deletes their veths, and
the host-side peers with them); the processes inside (sshd, the target) are
the supervisor's children and stop with it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import ipaddress
import json
import os
import subprocess
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from burnin.errors import UsageError
from burnin.sim import addressing
from burnin.sim.state import NodeState, topology_from_dict
from burnin.sim.storage import KERNEL_NETWORK_MARK, SimStorage, derive
from burnin_lab import netstore

MGMT_NET = addressing.MANAGEMENT_NET
MGMT_IFNAME = "mgmt0"
MESH_IFNAME = "mesh0"
MESH_BRIDGE = "mesh"
IP = "/usr/sbin/ip"
PING = "/usr/bin/ping"
IP_TIMEOUT_S = 60.0
MOUNTS_FILE = "storage-targets.json"
MAX_NODES = addressing.MANAGEMENT_SLOT_NODES
"""A rack's management /31s fill one /24 of 198.18.0.0/15."""
SLOT_LOCK = Path("/run/burnin-lab-netns.lock")
"""Held while a lab picks its /24 and adds its addresses: two labs built at once never pick the same one."""


class NetnsError(UsageError):
    """The lab could not build (or tear down) its namespaces: one line, what ``ip`` said."""


# ------------------------------------------------------------------ names


def lab_id(state_dir: Path) -> str:
    """Four hex digits from the state folder: names of two labs on one host do not collide."""
    return hashlib.blake2b(str(state_dir.resolve()).encode(), digest_size=2).hexdigest()


def node_ns(lab: str, node: str) -> str:
    return f"burnin-{lab}-{node}"


def fabric_ns(lab: str) -> str:
    return f"burnin-{lab}-fabric"


def host_ifname(lab: str, index: int) -> str:
    return f"bm{lab}{index}"[:15]


def peer_ifname(index: int, slot: int) -> str:
    return f"n{index}p{slot}"


def mesh_peer_ifname(index: int) -> str:
    return f"n{index}m"


def mgmt_pair(slot: int, index: int) -> tuple[str, str]:
    """(host side, node side) addresses of node ``index``'s /31 in the lab's /24 slot of 198.18.0.0/15."""
    host, node = addressing.management_pair(slot, index)
    return str(host), str(node)


# ------------------------------------------------------------------ running ip


def _ip(*args: str, netns: str | None = None, batch: Sequence[str] = ()) -> str:
    argv = [IP, *(("-n", netns) if netns else ()), *args]
    if batch:
        argv = [IP, *(("-n", netns) if netns else ()), "-batch", "-"]
    try:
        done = subprocess.run(argv, input="\n".join(batch) + "\n" if batch else None, capture_output=True,
                              text=True, timeout=IP_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NetnsError(f"ip {' '.join(args) or '-batch'}: {exc}") from None
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()
        raise NetnsError(f"ip {' '.join(argv[1:])}: {detail[-1] if detail else f'exit {done.returncode}'}")
    return done.stdout


def _sysctl(netns: str, values: Iterable[tuple[str, int | str]]) -> None:
    settings = [f"{key}={value}" for key, value in values]
    if not settings:
        return
    argv = [IP, "netns", "exec", netns, "sysctl", "-q", "-w", *settings]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=IP_TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise NetnsError(f"sysctl in {netns}: {(done.stderr or done.stdout).strip()[-200:]}")


def unavailable() -> str | None:
    """Why this host cannot give a lab kernel networking (None when it can)."""
    if os.geteuid() != 0:
        return "not root"
    for tool in (IP, PING):
        if not os.access(tool, os.X_OK):
            return f"{tool} missing (apt-get install iproute2 iputils-ping)"
    trial = f"burnin-check-{os.getpid()}"
    try:
        _ip("netns", "add", trial)
    except NetnsError as exc:
        return f"cannot create a network namespace ({exc})"
    try:
        _ip("netns", "del", trial)
    except NetnsError as exc:
        return f"cannot delete a network namespace ({exc})"
    return None


def namespaces() -> list[str]:
    """Every namespace ``ip netns`` lists (for tests and leak checks)."""
    return [line.split()[0] for line in _ip("netns", "list").splitlines() if line.strip()]


def _slot_of(address: ipaddress.IPv4Address) -> int | None:
    return (int(address) - int(MGMT_NET.network_address)) // 256 if address in MGMT_NET else None


def _free_slot(lab: str, plan: addressing.AddressPlan) -> int:
    """A /24 slot of 198.18.0.0/15 that no host address and no storage target uses (starting from the lab id)."""
    used = {_slot_of(address) for address in plan.targets}
    for item in json.loads(_ip("-j", "-4", "addr", "show") or "[]"):
        for info in item.get("addr_info", []):
            used.add(_slot_of(ipaddress.IPv4Address(info.get("local") or 0)))
    slots = addressing.MANAGEMENT_SLOTS
    first = int(lab, 16) % slots
    for step in range(slots):
        slot = (first + step) % slots
        if slot not in used:
            return slot
    raise NetnsError("no free /24 left in 198.18.0.0/15 for the lab's management addresses")


# ------------------------------------------------------------------ building


BRIDGES = {"ipoib": ("ib", 4092), "storage": ("bf", 9000)}
"""Per subnet kind of the address plan: the fabric bridge's name prefix and MTU (no bridge for ``oob``)."""


def _bridges(plan: addressing.AddressPlan) -> dict[str, tuple[str, int]]:
    """Bridge name -> (the subnet's gateway with its prefix, MTU) for each compute rail and BlueField network."""
    return {f"{BRIDGES[s.kind][0]}{s.index}": (f"{s.gateway}/{s.network.prefixlen}", BRIDGES[s.kind][1])
            for s in plan.subnets if s.kind in BRIDGES}


def _bridge_of(storage: SimStorage, name: str) -> str:
    ipoib = [n.name for n in storage.ipoib]
    if name in ipoib:
        return f"ib{ipoib.index(name)}"
    return f"bf{[n.name for n in storage.bluefields].index(name)}"


def mounts(state: NodeState) -> dict[str, str]:
    """Mount point -> the address the node's writes there go to (the target's address, probe or first host)."""
    fabric = topology_from_dict(state.topology).storage
    return {str(t.mount): t.destination for t in (fabric.targets if fabric is not None else ()) if t.mount}


def check_size(count: int) -> None:
    if count > MAX_NODES:
        raise NetnsError(f"a kernel-network lab rack holds at most {MAX_NODES} nodes (one /24 of management "
                         f"addresses); {count} asked: use --netns off")


def check_topology(state: NodeState) -> None:
    fabric = topology_from_dict(state.topology).storage
    if fabric is None:
        raise NetnsError(f"topology {state.topology_name} declares no storage fabric: nothing to put in the kernel")
    if fabric.routing is not None and fabric.routing.vrf is not None:
        raise NetnsError(f"topology {state.topology_name} routes storage in VRF {fabric.routing.vrf}: this kernel "
                         "has no VRF support; use policy routing (storage.routing.table) for a kernel-network lab")


def _node_commands(storage: SimStorage, lab: str, index: int, node: str, slot: int) -> list[str]:
    """``ip -batch`` lines, run in the host namespace, that create node ``index``'s interfaces."""
    ns, fab = node_ns(lab, node), fabric_ns(lab)
    host, _inner = mgmt_pair(slot, index)
    lines = [
        f"link add {host_ifname(lab, index)} type veth peer name {MGMT_IFNAME} netns {ns}",
        f"link set {host_ifname(lab, index)} addrgenmode none",  # no IPv6 link-local on the host side
        f"addr add {host}/31 dev {host_ifname(lab, index)}",
        f"link set {host_ifname(lab, index)} up",
    ]
    for k, netdev in enumerate([*storage.ipoib, *storage.bluefields]):
        peer = peer_ifname(index, k)
        lines += [f"link add {peer} netns {fab} type veth peer name {netdev.name} netns {ns}"]
    lines += [f"link add {mesh_peer_ifname(index)} netns {fab} type veth peer name {MESH_IFNAME} netns {ns}"]
    return lines


def _inside_commands(storage: SimStorage, inner: str, mesh: str) -> list[str]:
    """``ip -batch`` lines run in the node's namespace: addresses, MTU, state, routes, rules."""
    lines = ["link set lo up", f"addr add {inner}/31 dev {MGMT_IFNAME}", f"link set {MGMT_IFNAME} up",
             f"addr add {mesh} dev {MESH_IFNAME}", f"link set {MESH_IFNAME} up"]
    for netdev in [*storage.ipoib, *storage.bluefields]:
        lines.append(f"link set {netdev.name} mtu {netdev.mtu}")
        if netdev.interface:
            lines.append(f"addr add {netdev.interface} dev {netdev.name}")
        lines.append(f"link set {netdev.name} {'up' if netdev.up else 'down'}")
    return lines + _route_commands(storage)


def _route_commands(storage: SimStorage) -> list[str]:
    lines: list[str] = []
    for route in storage.routes:
        if route.protocol == "kernel":
            continue  # the kernel makes the connected routes from the addresses
        parts = ["route replace", route.dst]
        if route.gateway:
            parts += ["via", route.gateway]
        parts += ["dev", route.dev, "proto", "static"]
        if route.table:
            parts += ["table", route.table]
        if route.prefsrc:
            parts += ["src", route.prefsrc]
        lines.append(" ".join(parts))
    for rule in storage.rules:
        lines.append(f"rule add priority {rule.priority} to {rule.dst} lookup {rule.table}")
    return lines


def _node_sysctls(storage: SimStorage) -> list[tuple[str, int | str]]:
    values: list[tuple[str, int | str]] = [("net.ipv4.ping_group_range", "0 2147483647")]
    for scope, settings in storage.sysctl.items():
        if scope == "lo":
            continue
        for name, value in settings.items():
            values.append((f"net.ipv4.conf.{scope.replace('.', '/')}.{name}", value))
    return values


@contextlib.contextmanager
def _slot_lock() -> Iterator[None]:
    """One lab at a time between reading the host's addresses (:func:`_free_slot`) and adding its own."""
    with SLOT_LOCK.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released when the file closes
        yield


def create(state_dir: Path, states: Sequence[NodeState]) -> dict[str, Any]:
    """Build the namespaces of a rack; the record that ``lab.json`` keeps (``destroy`` reads it)."""
    with _slot_lock():
        return _create(state_dir, states)


def _create(state_dir: Path, states: Sequence[NodeState]) -> dict[str, Any]:
    if not states:
        raise NetnsError("no nodes")
    check_size(len(states))
    for state in states:
        check_topology(state)
    plan = addressing.plan(topology_from_dict(states[0].topology))  # a lab rack is of one node type
    plan.check_rack([s.name for s in states], "a kernel-network lab rack")
    lab = lab_id(state_dir)
    record: dict[str, Any] = {"lab": lab, "namespaces": [], "host_ifnames": [], "nodes": {}}
    try:
        slot = _free_slot(lab, plan)
        record["slot"] = slot
        fab = fabric_ns(lab)
        _ip("netns", "add", fab)
        record["namespaces"].append(fab)
        bridges = _bridges(plan)
        fabric_lines = ["link set lo up"]
        for bridge, (address, mtu) in bridges.items():
            fabric_lines += [f"link add {bridge} type bridge", f"link set {bridge} mtu {mtu}",
                             f"addr add {address} dev {bridge}", f"link set {bridge} up"]
        fabric_lines += [f"link add {MESH_BRIDGE} type bridge", f"link set {MESH_BRIDGE} up"]
        fabric_lines += [f"addr add {target}/32 dev lo" for target in sorted(set(plan.targets))]
        _ip(netns=fab, batch=fabric_lines)
        _sysctl(fab, [("net.ipv4.conf.all.rp_filter", 0), ("net.ipv4.conf.default.rp_filter", 0)])
        for index, state in enumerate(states):
            ns = node_ns(lab, state.name)
            _ip("netns", "add", ns)
            record["namespaces"].append(ns)
            storage = derive(state)
            inner = mgmt_pair(slot, index)[1]
            record["host_ifnames"].append(host_ifname(lab, index))
            _ip(batch=_node_commands(storage, lab, index, state.name, slot))
            peers = [peer_ifname(index, k) for k in range(len(storage.ipoib) + len(storage.bluefields))]
            names = [n.name for n in [*storage.ipoib, *storage.bluefields]]
            _ip(netns=fab, batch=[line for peer, name in zip(peers, names, strict=True)
                                  for line in (f"link set {peer} mtu {bridges[_bridge_of(storage, name)][1]}",
                                               f"link set {peer} master {_bridge_of(storage, name)}",
                                               f"link set {peer} up")]
                + [f"link set {mesh_peer_ifname(index)} master {MESH_BRIDGE}",
                   f"link set {mesh_peer_ifname(index)} up"])
            _sysctl(ns, _node_sysctls(storage))
            mesh = addressing.mesh_address(slot, index)
            _ip(netns=ns, batch=_inside_commands(storage, inner, str(mesh)))
            record["nodes"][state.name] = {"netns": ns, "address": inner, "mesh": str(mesh.ip)}
    except BaseException:
        destroy(record)
        raise
    return record


def reconfigure(record: dict[str, Any], state: NodeState) -> None:
    """Apply ``state``'s network view (after a fault or a clear) to its running namespace.

    MTUs, link states, static routes, policy rules and sysctls are set again from
    :func:`burnin.sim.storage.derive`; addresses do not change with any fault.
    """
    entry = record.get("nodes", {}).get(state.name)
    if entry is None:
        return
    ns = str(entry["netns"])
    storage = derive(state)
    lines = [f"link set {n.name} mtu {n.mtu}" for n in [*storage.ipoib, *storage.bluefields]]
    lines += [f"link set {n.name} {'up' if n.up else 'down'}" for n in [*storage.ipoib, *storage.bluefields]]
    lines += ["route flush table all proto static"]
    for rule in json.loads(_ip("-j", "rule", "show", netns=ns) or "[]"):
        if int(rule.get("priority", 0)) not in (0, 32766, 32767):
            lines.append(f"rule del priority {rule['priority']}")
    _ip(netns=ns, batch=lines + _route_commands(storage))
    _sysctl(ns, _node_sysctls(storage))


def destroy(record: dict[str, Any]) -> list[str]:
    """Delete every namespace (and so every veth) the record names; what could not be removed."""
    left: list[str] = []
    present = set(namespaces()) if os.path.isdir("/run/netns") else set()
    for ns in reversed(list(record.get("namespaces", []))):
        if ns not in present:
            continue
        try:
            _ip("netns", "del", ns)
        except NetnsError as exc:
            left.append(str(exc))
    # Deleting a namespace deletes its veths, and their host-side peers with them, but the kernel
    # does that later (in a work queue, slower on a loaded machine): a peer still there when looked
    # at may be gone by the time it is deleted here, and that is no failure.
    for name in record.get("host_ifnames", []):
        if Path(f"/sys/class/net/{name}").exists():
            try:
                _ip("link", "del", name)
            except NetnsError as exc:
                if Path(f"/sys/class/net/{name}").exists():
                    left.append(str(exc))
    return left


# ------------------------------------------------------------------ a node's session


def mark_node(node_dir: Path) -> None:
    """Make the node's sysfs tree take MTU, state, counters and conf sysctls from the kernel (at next render)."""
    (node_dir / KERNEL_NETWORK_MARK).write_text("netdevs are real interfaces in the node's network namespace\n")


def write_node_tools(bin_dir: Path, sim_bin: Path, state: NodeState, python: str) -> None:
    """The node's kernel-side tools, first in its PATH: the real ``ip`` and ``ping``; ``dd``/``fio`` that send."""
    mounts_file = bin_dir / MOUNTS_FILE
    mounts_file.write_text(json.dumps(mounts(state), indent=1) + "\n", encoding="utf-8")
    client = Path(netstore.__file__).resolve()
    scripts = {
        "ip": f'#!/bin/sh\nexec {IP} "$@"\n',
        "ping": f'#!/bin/sh\nexec {PING} "$@"\n',
    }
    for tool in ("dd", "fio"):
        scripts[tool] = ('#!/bin/sh\n# STO-03 traffic through the kernel (burnin_lab.netstore)\n'
                         f'{python} {client} client {mounts_file} {tool} "$@" || exit 1\n'
                         f'exec {sim_bin / tool} "$@"\n')
    for name, text in scripts.items():
        path = bin_dir / name
        path.write_text(text, encoding="utf-8")
        path.chmod(0o755)


def sshd_argv(ns: str, argv: Sequence[str]) -> list[str]:
    """Run ``argv`` (the node's sshd) inside its namespace, with the namespace's own ``/sys``."""
    return [IP, "netns", "exec", ns, *argv]


def target_argv(record: dict[str, Any], python: str) -> list[str]:
    """The storage target's command line (a daemon of the lab's supervisor)."""
    return [IP, "netns", "exec", fabric_ns(str(record["lab"])), python, str(Path(netstore.__file__).resolve()),
            "serve", "--port", str(netstore.PORT)]
