"""The address plan of simulated racks (burnin.sim.addressing), checked purely at every lab size.

Issue 21: in an 8-node lab sim08's storage address was nfs-home's own (10.20.0.10), so the kernel
routed the target via lo and STO-01 rejected a healthy node. The plan must give every node of a rack
addresses that no other node, gateway, network/broadcast address or storage target holds, at every
size up to the netns lab's 128 nodes (and the plan's own capacity), for the names the simulator uses.
"""

from __future__ import annotations

import ipaddress
import subprocess
import sys
from collections.abc import Iterable
from ipaddress import IPv4Address, IPv4Network
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from burnin.errors import UsageError
from burnin.nodes import sim_names
from burnin.sim.addressing import (
    MANAGEMENT_NET,
    MANAGEMENT_SLOT_NODES,
    MANAGEMENT_SLOTS,
    AddressPlan,
    management_pair,
    plan,
    plan_for,
)
from burnin.sim.state import healthy_state
from burnin.sim.storage import derive
from burnin.topology import Topology
from burnin.topology.model import StorageTarget

NETNS_LIMIT = 128


def _gateways(p: AddressPlan) -> set[IPv4Address]:
    return {s.gateway for s in p.subnets}


def _assert_rack_is_clean(p: AddressPlan, names: Iterable[str]) -> None:
    """Distinct, inside their subnets, and never a gateway, network/broadcast or storage target address."""
    seen: dict[IPv4Address, str] = {}
    forbidden = _gateways(p) | set(p.targets)
    for name, addresses in p.rack(list(names)).items():
        assert len(addresses.interfaces) == len(p.subnets)
        for interface, subnet in zip(addresses.interfaces, p.subnets, strict=True):
            ip = interface.ip
            assert interface.network == subnet.network, (name, interface)
            assert ip not in (subnet.network.network_address, subnet.network.broadcast_address), (name, ip)
            assert ip not in forbidden and ip not in p.reserved, (name, ip)
            assert seen.setdefault(ip, name) == name, f"{name} and {seen[ip]} share {ip}"


@pytest.mark.fuzz
def test_every_rack_size_up_to_the_netns_limit_and_the_capacity_is_clean(h100_topology: Topology) -> None:
    p = plan(h100_topology)
    assert p.capacity == 250  # /24 rails: .3 to .253, less nfs-home's .10
    for size in [*range(1, NETNS_LIMIT + 1), p.capacity]:
        _assert_rack_is_clean(p, sim_names(size))


def test_the_readme_8_node_lab_keeps_sim08_off_the_storage_target(h100_topology: Topology) -> None:
    p = plan(h100_topology)
    sim08 = p.node("sim08")
    assert [str(i) for i in sim08.storage] == ["10.20.0.11/22", "10.20.4.11/22"]
    assert str(sim08.ipoib[2]) == "192.168.2.11/24"
    # the nodes below it keep .3..9 (sim01 is .3), the ones above move up by one
    assert [p.node(f"sim{n:02d}").offset for n in (1, 7, 9, 64)] == [3, 9, 12, 67]


def test_a_node_has_the_same_addresses_in_any_rack(h100_topology: Topology) -> None:
    """Rack-independent and stable: sim08 of 8 nodes is sim008 of 128 (a node is rendered from its name)."""
    p = plan(h100_topology)
    assert p.rack(sim_names(8))["sim08"].interfaces == p.rack(sim_names(128))["sim008"].interfaces
    assert plan(h100_topology) is p  # one plan per node type, cached


def test_the_shims_and_the_lab_take_their_addresses_from_the_plan(h100_topology: Topology) -> None:
    from burnin_lab import netns

    p = plan(h100_topology)
    for name in ("sim08", "sim128"):
        storage = derive(healthy_state(h100_topology, name))
        expected = p.node(name)
        assert [n.interface for n in storage.ipoib] == [str(i) for i in expected.ipoib]
        assert [n.interface for n in storage.bluefields] == [str(i) for i in expected.storage]
    far = next(r for r in derive(healthy_state(h100_topology, "sim01")).routes if r.dst == "10.20.8.0/22")
    assert far.gateway == "10.20.4.1" and IPv4Address(far.gateway) in _gateways(p)
    bridges = netns._bridges(p)
    assert bridges["ib2"] == ("192.168.2.254/24", 4092) and bridges["bf0"] == ("10.20.0.1/22", 9000)
    assert {IPv4Address(a.split("/")[0]) for a, _mtu in bridges.values()} == _gateways(p)


def test_more_nodes_than_the_plan_holds_are_refused_naming_the_limit(h100_topology: Topology) -> None:
    p = plan(h100_topology)
    p.check_rack(sim_names(250))
    with pytest.raises(UsageError, match=r"^251 simulated nodes asked for: a simulated rack holds at most 250 "):
        p.check_rack(sim_names(251))
    with pytest.raises(UsageError, match=r"sim251 is number 251: .* at most 250 nodes"):
        p.node("sim251")
    with pytest.raises(UsageError, match=r"would share host address \.3 "):
        p.check_rack(["a1", "b01"])


def test_names_without_a_number_get_a_stable_address_in_range(h100_topology: Topology) -> None:
    p = plan(h100_topology)
    for name in ("healthy", "gpu-node", "sim0"):
        assert 1 <= p.number(name) <= p.capacity and p.node(name) == p.node(name)
    _assert_rack_is_clean(p, ["healthy", "unswept", "split", "drift"])  # a unit-test rack's names


def test_build_rack_refuses_a_rack_past_the_plan(h100_topology: Topology, tmp_path: Path) -> None:
    from burnin.sim import build_rack

    with pytest.raises(UsageError, match="at most 250 nodes"):
        build_rack(tmp_path, h100_topology, sim_names(251))
    assert not (tmp_path / "nodes").exists()  # refused before anything is rendered


@pytest.mark.rack
def test_sim_run_past_the_limit_exits_2_with_one_line() -> None:
    proc = subprocess.run([sys.executable, "-m", "burnin.cli.main", "run", "--sim", "251"], capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "at most 250 nodes" in proc.stderr, proc.stderr


def test_management_pairs_of_a_full_lab_are_distinct_and_apart_from_the_fabric(h100_topology: Topology) -> None:
    fabric = [s.network for s in plan(h100_topology).subnets]
    for slot in (0, 7, MANAGEMENT_SLOTS - 1):
        pairs = [management_pair(slot, i) for i in range(MANAGEMENT_SLOT_NODES)]
        flat = [a for pair in pairs for a in pair]
        assert len(set(flat)) == len(flat) == 2 * NETNS_LIMIT
        assert all(a in MANAGEMENT_NET and not any(a in net for net in fabric) for a in flat)
        assert all(ipaddress.ip_network(f"{host}/31", strict=True) for host, _node in pairs)  # a /31 each
    for slot, index in ((0, MANAGEMENT_SLOT_NODES), (MANAGEMENT_SLOTS, 0), (-1, 0)):
        with pytest.raises(ValueError, match="outside"):
            management_pair(slot, index)


def test_a_storage_subnet_inside_a_node_subnet_is_kept_free() -> None:
    inner = StorageTarget(name="pfs", subnet="10.20.0.64/26", probe="10.20.0.70")
    p = plan_for(8, 2, (StorageTarget(name="home", address="10.20.0.10"), inner))
    assert p.capacity == 250 - 64  # .64-.127 taken by the storage subnet, .10 by home
    _assert_rack_is_clean(p, sim_names(p.capacity))
    assert all(p.node(n).storage[0].ip not in IPv4Network("10.20.0.64/26") for n in sim_names(p.capacity))


def test_a_storage_subnet_as_wide_as_the_node_subnet_keeps_only_its_probe() -> None:
    """A target subnet that is the storage network itself (the nodes live in it): only its probe is kept free."""
    p = plan_for(8, 2, (StorageTarget(name="pfs", subnet="10.20.4.0/22", probe="10.20.4.20"),))
    assert p.capacity == 251 - 1 and 20 not in p.offsets


def test_a_node_type_without_ipoib_bootstraps_on_the_out_of_band_network() -> None:
    p = plan_for(0, 1, (StorageTarget(name="home", address="10.20.0.10"),))
    sim01 = p.node("sim01")
    assert (str(sim01.oob), sim01.ipoib) == ("10.0.0.3/24", ())
    assert [(s.kind, str(s.gateway)) for s in p.subnets] == [("storage", "10.20.0.1"), ("oob", "10.0.0.254")]


_OFFSET = st.integers(min_value=0, max_value=1023)


@settings(max_examples=60, deadline=None)
@given(rails=st.integers(min_value=0, max_value=8), netdevs=st.integers(min_value=0, max_value=3),
       spots=st.lists(st.tuples(st.integers(min_value=0, max_value=3), _OFFSET), min_size=1, max_size=4))
@pytest.mark.fuzz
def test_any_target_layout_gives_clean_racks_up_to_the_netns_limit(
        rails: int, netdevs: int, spots: list[tuple[int, int]]) -> None:
    """Targets anywhere in (or next to) the storage networks, any rail and netdev count."""
    targets = tuple(StorageTarget(name=f"t{i}", address=str(IPv4Address(f"10.20.{4 * net}.0") + offset))
                    for i, (net, offset) in enumerate(spots))
    p = plan_for(rails, netdevs, targets)
    assert p.capacity >= 251 - len(spots)  # a /24's .3..253, less one offset per target at most
    _assert_rack_is_clean(p, sim_names(min(NETNS_LIMIT, p.capacity)))
