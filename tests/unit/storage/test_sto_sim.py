"""The simulated storage fabric: shims answer like the tools, parse back to the node's state, and each fault
changes only what its check reads."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from pathlib import Path

import pytest
from storage_support import with_routing

from burnin.errors import UsageError
from burnin.parsers.ibdev2netdev import parse_ibdev2netdev
from burnin.parsers.iproute import parse_ip_addr, parse_ip_link, parse_ip_route
from burnin.parsers.mlnx_qos import parse_mlnx_qos
from burnin.parsers.mlxconfig import parse_mlxconfig_query
from burnin.sim import SimNode, build_rack
from burnin.sim.faults import FAULTS
from burnin.sim.formats import storage_tools
from burnin.sim.state import healthy_state
from burnin.sim.storage import STORAGE_FAULTS, derive, resolve
from burnin.topology.model import StorageRouting, Topology


def run(node: SimNode, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **node.environment(), "LC_ALL": "C"}
    return subprocess.run(list(argv), env=env, capture_output=True, text=True, timeout=30, check=False)


def test_storage_faults_are_registered_with_their_checks() -> None:
    assert {name: FAULTS[name].check_id for name in STORAGE_FAULTS} == {
        "storage-route-via-ib": "STO-01", "nccl-hca-leak": "STO-02", "storage-mtu-1500": "STO-04",
        "bf-nic-mode": "STO-06", "qos-pfc-off": "STO-05", "arp-leak": "STO-07", "storage-traffic-on-ib": "STO-03"}
    assert all(FAULTS[name].suite == ("storage" if name == "storage-traffic-on-ib" else "node")
               and FAULTS[name].target_kind == "node" for name in STORAGE_FAULTS)


@pytest.mark.rack
def test_ip_shim_text_and_json_agree(healthy_node: SimNode) -> None:
    for args, parser in ((("route",), parse_ip_route), (("route", "show", "table", "all"), parse_ip_route),
                         (("route", "get", "10.20.8.11"), parse_ip_route), (("-d", "link"), parse_ip_link),
                         (("link", "show", "dev", "enp41s0f0np0"), parse_ip_link), (("addr",), parse_ip_addr),
                         (("addr", "show", "ibp24s0"), parse_ip_addr)):
        text, data = run(healthy_node, "ip", *args), run(healthy_node, "ip", "-j", *args)
        assert text.returncode == data.returncode == 0, (args, text.stderr, data.stderr)
        assert parser(text.stdout) == parser(data.stdout), args


@pytest.mark.rack
def test_ip_shim_routes_targets_through_the_bluefields(healthy_node: SimNode) -> None:
    near = parse_ip_route(run(healthy_node, "ip", "-j", "route", "get", "10.20.0.10").stdout).routes[0]
    assert (near.dev, near.gateway, near.prefsrc) == ("enp41s0f0np0", None, "10.20.0.3")  # sim01: .3
    far = parse_ip_route(run(healthy_node, "ip", "route", "get", "10.20.8.11").stdout).routes[0]
    assert (far.dev, far.gateway) == ("enp177s0f0np0", "10.20.4.1")
    lost = run(healthy_node, "ip", "-j", "route", "get", "8.8.8.8")
    assert lost.returncode == 2 and lost.stderr == "RTNETLINK answers: Network is unreachable\n"
    bad = run(healthy_node, "ip", "route", "get", "$(reboot)")
    assert bad.returncode == 1 and "valid prefix" in bad.stderr
    assert run(healthy_node, "ip", "-j", "route", "get", "vrf", "nope", "10.20.0.10").stderr == \
        'Cannot find device "nope"\n'
    assert run(healthy_node, "ip", "link", "show", "eth9").returncode == 1
    assert run(healthy_node, "ip", "-x", "route").returncode == 255


@pytest.mark.rack
def test_brief_addresses_and_ibdev2netdev(healthy_node: SimNode) -> None:
    brief = {i.name: i for i in parse_ip_addr(run(healthy_node, "ip", "-br", "addr").stdout).interfaces}
    assert brief["enp177s0f0np0"].addresses[0].local == "10.20.4.3"
    report = parse_ibdev2netdev(run(healthy_node, "ibdev2netdev").stdout)
    assert report.netdev_of("mlx5_8") == "enp41s0f0np0" and report.netdev_of("mlx5_2") == "ibp79s0"
    assert [e.device for e in report.entries][:3] == ["mlx5_0", "mlx5_1", "mlx5_2"]
    verbose = parse_ibdev2netdev(run(healthy_node, "ibdev2netdev", "-v").stdout)
    assert next(e for e in verbose.entries if e.device == "mlx5_9").pci == "0000:b1:00.0"


@pytest.mark.rack
def test_vendor_tool_shims(healthy_node: SimNode) -> None:
    query = run(healthy_node, "mlxconfig", "-d", "29:00.0", "q", "INTERNAL_CPU_OFFLOAD_ENGINE")
    device, = parse_mlxconfig_query(query.stdout).devices
    assert [p.name for p in device.params] == ["INTERNAL_CPU_OFFLOAD_ENGINE"]
    assert device.current("INTERNAL_CPU_OFFLOAD_ENGINE") == "ENABLED(0)"
    unsupported = run(healthy_node, "mlxconfig", "-d", "0000:29:00.0", "q", "NO_SUCH_PARAM")
    assert unsupported.returncode == 1 and "doesn't support NO_SUCH_PARAM" in unsupported.stdout
    assert run(healthy_node, "mlxconfig", "-d", "0000:18:00.0", "q").returncode == 1  # a CX-7: no BlueField config
    qos = parse_mlnx_qos(run(healthy_node, "mlnx_qos", "-i", "enp177s0f0np0").stdout)
    assert qos.trust == "dscp" and qos.pfc_priorities == (3,) and 26 in qos.dscp_to_prio[3]
    assert run(healthy_node, "mlnx_qos", "-i", "ibp24s0").returncode == 1
    stats = run(healthy_node, "ethtool", "-S", "enp41s0f0np0").stdout
    assert "rx_bytes_phy:" in stats and "tx_prio3_pause: 0" in stats
    assert "bus-info: 0000:29:00.0" in run(healthy_node, "ethtool", "-i", "enp41s0f0np0").stdout
    assert "Speed: 400000Mb/s" in run(healthy_node, "ethtool", "enp41s0f0np0").stdout


def test_sysfs_and_procfs_of_the_fabric(healthy_node: SimNode) -> None:
    net = healthy_node.root / "sys" / "class" / "net"
    assert (net / "enp41s0f0np0" / "type").read_text() == "1\n"
    assert (net / "ibp79s0" / "type").read_text() == "32\n"
    assert os.path.basename(os.path.realpath(net / "enp41s0f0np0" / "device")) == "0000:29:00.0"
    assert (net / "enp41s0f0np0" / "ecn" / "roce_np" / "enable" / "3").read_text() == "1\n"
    conf = healthy_node.root / "proc" / "sys" / "net" / "ipv4" / "conf"
    assert (conf / "all" / "arp_announce").read_text() == "2\n"
    assert (healthy_node.root / "etc" / "nccl.conf").read_text().count("NCCL_IB_HCA==mlx5_0:1,") == 1


@pytest.mark.parametrize("fault", STORAGE_FAULTS)
def test_each_fault_changes_only_its_own_part(sto_topology: Topology, fault: str) -> None:
    from burnin.sim.faults import parse_fault_spec
    from burnin.sim.inject import apply_faults

    healthy = healthy_state(sto_topology, "sim04")
    broken = healthy_state(sto_topology, "sim04")
    apply_faults(broken, [parse_fault_spec(fault, sto_topology)])
    before, after = derive(healthy), derive(broken)
    changed = {field.name for field in dataclasses.fields(before) if getattr(before, field.name) !=
               getattr(after, field.name)}
    assert changed == {"storage-route-via-ib": {"routes"}, "nccl-hca-leak": {"nccl_conf"},
                       "storage-mtu-1500": {"netdevs"}, "bf-nic-mode": {"netdevs"}, "qos-pfc-off": {"netdevs"},
                       "arp-leak": {"sysctl"}, "storage-traffic-on-ib": set()}[fault]  # the write tool's
    assert broken.faults == [fault]


def test_route_via_ib_follows_the_routing_design(sto_topology: Topology) -> None:
    from burnin.sim.faults import parse_fault_spec
    from burnin.sim.inject import apply_faults

    for routing, vrf in ((None, None), (StorageRouting(table=100), None), (StorageRouting(vrf="vrf-st"), "vrf-st")):
        topology = with_routing(sto_topology, routing, "site") if routing else sto_topology
        state = healthy_state(topology, "sim01")
        assert resolve(derive(state), "10.20.0.10", vrf).dev == "enp41s0f0np0"  # type: ignore[union-attr]
        apply_faults(state, [parse_fault_spec("storage-route-via-ib", topology)])
        route = resolve(derive(state), "10.20.0.10", vrf)
        assert route is not None and route.dev == "ibp79s0"
        assert route.table == ({None: None, "vrf-st": "1000"}[vrf] if routing is None or vrf else "100")


@pytest.mark.rack
def test_vrf_shows_in_link_details_and_route_tables(sim_base: Path, sto_topology: Topology) -> None:
    topology = with_routing(sto_topology, StorageRouting(vrf="vrf-st"), "site-vrf")
    node, = build_rack(sim_base / "vrf-shims", topology, ["sim01"])
    links = {link.name: link for link in parse_ip_link(run(node, "ip", "-d", "link").stdout).links}
    assert (links["vrf-st"].kind, links["vrf-st"].vrf_table) == ("vrf", 1000)
    assert (links["enp41s0f0np0"].master, links["enp41s0f0np0"].slave_table) == ("vrf-st", 1000)
    in_vrf = parse_ip_route(run(node, "ip", "-j", "route", "get", "vrf", "vrf-st", "10.20.8.11").stdout).routes[0]
    assert (in_vrf.dev, in_vrf.table) == ("enp177s0f0np0", "1000")
    assert run(node, "ip", "route", "get", "10.20.8.11").returncode == 2  # not in the main table
    assert "enp41s0f0np0" in run(node, "ip", "route", "show", "vrf", "vrf-st").stdout
    assert "1000" in run(node, "ip", "vrf").stdout


def test_storage_faults_need_a_storage_fabric(sim_base: Path, sto_topology: Topology) -> None:
    bare = dataclasses.replace(sto_topology, name="bare", storage=None)
    for fault in ("storage-route-via-ib", "storage-mtu-1500", "arp-leak"):
        with pytest.raises(UsageError, match="needs a storage fabric"):
            build_rack(sim_base / "bare", bare, ["sim01"], {"sim01": [fault]})
    with pytest.raises(UsageError, match="takes no @target"):
        build_rack(sim_base / "bare", sto_topology, ["sim01"], {"sim01": ["bf-nic-mode@mlx5_8"]})


def test_outputs_render_for_a_node_without_storage(sto_topology: Topology) -> None:
    bare = dataclasses.replace(sto_topology, name="bare", storage=None)
    out = storage_tools.outputs(healthy_state(bare, "sim01"))
    assert "storage/ip/addr.json" in out and not any(k.startswith("storage/mlxconfig/") for k in out)
    assert json.loads(out["storage/ip/route.json"])[0]["dev"] == "ibp24s0"
