"""STO-01..07 on a simulated node's facts: healthy passes, each broken input fails or is incomplete with
measured vs expected naming the target and the device; node types without a storage fabric stand aside."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from storage_support import Gather, with_routing

from burnin.checks import load_all
from burnin.checks.base import not_applicable_reason
from burnin.checks.storage import STO_CHECKS, bluefield_mode, collector_sources, nccl_selects, parse_nccl_conf
from burnin.evaluate.verdict import Status, Verdict
from burnin.facts import Facts
from burnin.topology.model import StorageRouting, Topology

PASS, FAIL, INCOMPLETE = Status.PASS, Status.FAIL, Status.INCOMPLETE
TARGET = "10.20.0.10"


def judge(check_id: str, data: dict[str, Any], topology: Topology) -> Verdict:
    return load_all()[check_id].func(Facts("sim01", data), topology)


def expect(verdict: Verdict, status: Status, *needles: str) -> None:
    assert verdict.status is status, verdict.reason
    for needle in needles:
        assert needle in verdict.reason, (needle, verdict.reason)


def route_get(data: dict[str, Any], address: str, stdout: str = "", *, exit_status: int = 0,
              stderr: str = "") -> None:
    data["storage"]["routes"][address] = {"argv": ["ip", "-j", "route", "get", address], "exit_status": exit_status,
                                          "stdout": stdout, "stderr": stderr, "error": None}


@pytest.mark.parametrize("check_id", STO_CHECKS)
def test_every_sto_check_passes_on_the_healthy_node(facts: dict[str, Any], sto_topology: Topology,
                                                    check_id: str) -> None:
    expect(judge(check_id, facts, sto_topology), PASS)


# ------------------------------------------------------------------ STO-01


def test_route_via_ipoib_names_target_and_compute_device(facts: dict[str, Any], sto_topology: Topology) -> None:
    route_get(facts, TARGET, json.dumps([{"dst": TARGET, "gateway": "192.168.2.254", "dev": "ibp79s0",
                                          "prefsrc": "192.168.2.3", "flags": [], "uid": 0, "cache": []}]))
    verdict = judge("STO-01", facts, sto_topology)
    assert verdict.reason == (f"STO-01 {TARGET} routed via ibp79s0 (IPoIB, mlx5_2) "
                              "(expected a BlueField netdev: enp41s0f0np0/enp177s0f0np0)")
    assert verdict.status is FAIL


def test_route_text_form_is_read_too(facts: dict[str, Any], sto_topology: Topology) -> None:
    route_get(facts, TARGET, f"{TARGET} via 192.168.2.254 dev ibp79s0 src 192.168.2.3 uid 0 \n    cache \n")
    expect(judge("STO-01", facts, sto_topology), FAIL, "ibp79s0 (IPoIB, mlx5_2)")


def test_route_via_a_management_nic(facts: dict[str, Any], sto_topology: Topology) -> None:
    facts["storage"]["netdevs"]["eno1"] = {"pci": "0000:03:00.0", "vendor": "0x8086", "device_id": "0x1563",
                                           "type": 1, "mtu": 1500}
    route_get(facts, TARGET, json.dumps([{"dst": TARGET, "gateway": "10.0.0.1", "dev": "eno1"}]))
    expect(judge("STO-01", facts, sto_topology), FAIL, "eno1 (PCI 0000:03:00.0 0x8086:0x1563, not a storage netdev)")


def test_no_route_is_a_failure_not_a_gap(facts: dict[str, Any], sto_topology: Topology) -> None:
    route_get(facts, TARGET, exit_status=2, stderr="RTNETLINK answers: Network is unreachable\n")
    expect(judge("STO-01", facts, sto_topology), FAIL, f"{TARGET} has no route")


def test_blackhole_route_fails(facts: dict[str, Any], sto_topology: Topology) -> None:
    route_get(facts, TARGET, json.dumps([{"type": "blackhole", "dst": TARGET, "flags": []}]))
    expect(judge("STO-01", facts, sto_topology), FAIL, "blackhole")


def test_storage_netdev_name_on_another_function_fails(facts: dict[str, Any], sto_topology: Topology) -> None:
    facts["storage"]["netdevs"]["enp41s0f0np0"]["pci"] = "0000:2a:00.0"
    expect(judge("STO-01", facts, sto_topology), FAIL, "PCI 0000:2a:00.0, not the BlueField at 0000:29:00.0")


def test_storage_netdev_that_is_no_bluefield_fails(facts: dict[str, Any], sto_topology: Topology) -> None:
    facts["storage"]["netdevs"]["enp41s0f0np0"]["device_id"] = "0x1021"  # a ConnectX-7
    expect(judge("STO-01", facts, sto_topology), FAIL, "0x15b3:0x1021, not a BlueField")


def test_route_error_is_incomplete_with_the_tool_message(facts: dict[str, Any], sto_topology: Topology) -> None:
    route_get(facts, TARGET, exit_status=1, stderr='Error: any valid prefix is expected rather than "x".\n')
    expect(judge("STO-01", facts, sto_topology), INCOMPLETE, "exited 1", "any valid prefix")


def test_target_not_given_to_the_collector_is_incomplete(facts: dict[str, Any], sto_topology: Topology) -> None:
    del facts["storage"]["routes"][TARGET]
    expect(judge("STO-01", facts, sto_topology), INCOMPLETE, "not looked up")


def test_policy_table_is_required_when_designed(facts: dict[str, Any], sto_topology: Topology) -> None:
    site = with_routing(sto_topology, StorageRouting(table=100), "site-table")
    expect(judge("STO-01", facts, site), FAIL, "from table main", "expected a BlueField netdev: "
           "enp41s0f0np0/enp177s0f0np0 from table 100")


def test_vrf_membership_is_required_when_designed(facts: dict[str, Any], sto_topology: Topology) -> None:
    site = with_routing(sto_topology, StorageRouting(vrf="storage"), "site-vrf")
    expect(judge("STO-01", facts, site), FAIL, "not in VRF storage (master none)")


@pytest.mark.rack
@pytest.mark.parametrize("routing", [StorageRouting(table=100), StorageRouting(vrf="vrf-storage")],
                         ids=["policy-table", "vrf"])
def test_routing_designs_pass_healthy_and_catch_the_ipoib_route(faulted: Gather, sto_topology: Topology,
                                                                routing: StorageRouting) -> None:
    site = with_routing(sto_topology, routing, f"site-{routing.table or routing.vrf}")
    expect(judge("STO-01", faulted(site), site), PASS)
    verdict = judge("STO-01", faulted(site, "storage-route-via-ib"), site)
    expect(verdict, FAIL, f"{TARGET} routed via ibp79s0 (IPoIB, mlx5_2)")


# ------------------------------------------------------------------ STO-02


def nccl_conf(data: dict[str, Any], text: str | None) -> None:
    data["storage"]["nccl"]["files"]["/etc/nccl.conf"] = {"present": text is not None, "text": text, "error": None}


@pytest.mark.parametrize(("conf", "needle"), [
    ("NCCL_IB_HCA=mlx5\n", "selects storage devices mlx5_8 (enp41s0f0np0), mlx5_9 (enp177s0f0np0)"),
    ("NCCL_IB_HCA=^=mlx5_9\n", "selects storage device mlx5_8 (enp41s0f0np0)"),
    ("NCCL_IB_HCA==mlx5_0,mlx5_1\n", "leaves out compute HCA mlx5_2"),
    ("NCCL_IB_HCA==mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7\nNCCL_SOCKET_IFNAME=enp\n",
     "NCCL_SOCKET_IFNAME=enp selects storage netdev enp41s0f0np0, enp177s0f0np0"),
])
def test_nccl_conf_that_reaches_storage_or_drops_a_rail_fails(facts: dict[str, Any], sto_topology: Topology,
                                                              conf: str, needle: str) -> None:
    nccl_conf(facts, conf)
    expect(judge("STO-02", facts, sto_topology), FAIL, "/etc/nccl.conf", needle)


@pytest.mark.parametrize("conf", ["NCCL_IB_HCA=^=mlx5_8,mlx5_9\n", "# site\nNCCL_IB_HCA = =mlx5_0:1,mlx5_1:1,"
                                  "mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1  # rails\n"])
def test_exact_list_or_exclusion_of_the_bluefields_passes(facts: dict[str, Any], sto_topology: Topology,
                                                          conf: str) -> None:
    nccl_conf(facts, conf)
    expect(judge("STO-02", facts, sto_topology), PASS)


def test_environment_overrides_are_judged_too(facts: dict[str, Any], sto_topology: Topology) -> None:
    facts["storage"]["nccl"]["environment"] = {"NCCL_IB_HCA": "mlx5_8"}
    expect(judge("STO-02", facts, sto_topology), FAIL, "environment NCCL_IB_HCA=mlx5_8 selects storage device mlx5_8")


def test_nccl_hca_unset_everywhere_fails(facts: dict[str, Any], sto_topology: Topology) -> None:
    nccl_conf(facts, None)
    expect(judge("STO-02", facts, sto_topology), FAIL, "NCCL_IB_HCA set neither", "mlx5_8, mlx5_9 included")


def test_unreadable_nccl_conf_is_incomplete(facts: dict[str, Any], sto_topology: Topology) -> None:
    facts["storage"]["nccl"]["files"]["/etc/nccl.conf"] = {"present": True, "text": None,
                                                           "error": "/etc/nccl.conf: Permission denied"}
    expect(judge("STO-02", facts, sto_topology), INCOMPLETE, "Permission denied")


@pytest.mark.parametrize(("selector", "name", "expected"), [
    ("mlx5_1", "mlx5_10", True), ("=mlx5_1", "mlx5_10", False), ("=mlx5_1:1", "mlx5_1", True),
    ("^mlx5_8", "mlx5_8", False), ("^mlx5_8", "mlx5_80", False), ("^=mlx5_8", "mlx5_80", True),
    ("^docker,lo,enp41s0f0np0", "enp41s0f0np0", False), ("^docker,lo", "ibp24s0", True), ("", "mlx5_0", False),
])
def test_nccl_selection_semantics(selector: str, name: str, expected: bool) -> None:
    assert nccl_selects(selector, name) is expected


def test_nccl_conf_lines() -> None:
    # NCCL loads the file with setenv(..., 0): the first setting of a key is the one a job gets
    assert parse_nccl_conf("# c\nNCCL_IB_HCA=a\nNCCL_DEBUG = INFO # x\nOTHER=1\nNCCL_IB_HCA=b\n") == {
        "NCCL_IB_HCA": "a", "NCCL_DEBUG": "INFO"}


def test_burnins_own_job_environment_names_compute_hcas_only(sto_topology: Topology) -> None:
    """The environment `burnin run --suite fabric` gives every nccl-tests launch (burnin.fabric.commands)."""
    from burnin.fabric.commands import nccl_env
    from burnin.fabric.settings import FabricSettings

    env = nccl_env(sto_topology, FabricSettings())
    devices = [h.name for h in sto_topology.hcas]
    assert [d for d in devices if nccl_selects(env["NCCL_IB_HCA"], d)] == [h.name for h in sto_topology.compute_hcas]
    assert sto_topology.storage is not None
    assert not [n.name for n in sto_topology.storage.netdevs if nccl_selects(env["NCCL_SOCKET_IFNAME"], n.name)]


# ------------------------------------------------------------------ STO-04..06


def test_mtu_1500_names_the_netdev(facts: dict[str, Any], sto_topology: Topology) -> None:
    facts["storage"]["netdevs"]["enp177s0f0np0"]["mtu"] = 1500
    verdict = judge("STO-04", facts, sto_topology)
    assert verdict.reason == "STO-04 enp177s0f0np0 MTU 1500 (expected MTU 9000 on every BlueField netdev)"


def test_missing_bluefield_netdev_fails(facts: dict[str, Any], sto_topology: Topology) -> None:
    del facts["storage"]["netdevs"]["enp41s0f0np0"]
    for check_id in ("STO-04", "STO-05"):
        expect(judge(check_id, facts, sto_topology), FAIL, "enp41s0f0np0 absent from /sys/class/net")


@pytest.mark.rack
def test_qos_without_pfc_and_with_pcp_trust_fails(faulted: Gather, sto_topology: Topology) -> None:
    data = faulted(sto_topology, "qos-pfc-off")
    expect(judge("STO-05", data, sto_topology), FAIL, "enp41s0f0np0 trust dscp, PFC on none, ECN on 3")
    data["storage"]["netdevs"]["enp177s0f0np0"]["ecn"]["roce_rp"]["3"] = 0
    expect(judge("STO-05", data, sto_topology), FAIL, "enp177s0f0np0 trust dscp, PFC on 3, ECN on none")


@pytest.mark.rack
def test_nic_mode_is_named_with_the_mlxconfig_value(faulted: Gather, sto_topology: Topology) -> None:
    verdict = judge("STO-06", faulted(sto_topology, "bf-nic-mode"), sto_topology)
    expect(verdict, FAIL, "enp41s0f0np0 0000:29:00.0 NIC mode (INTERNAL_CPU_OFFLOAD_ENGINE DISABLED(1)",
           "expected DPU mode on enp41s0f0np0/enp177s0f0np0")


@pytest.mark.rack
def test_designed_nic_mode_passes_a_nic_mode_bluefield(faulted: Gather, sto_topology: Topology) -> None:
    assert sto_topology.storage is not None
    netdevs = tuple(dataclasses.replace(n, mode="nic") if i == 0 else n
                    for i, n in enumerate(sto_topology.storage.netdevs))
    site = dataclasses.replace(sto_topology, storage=dataclasses.replace(sto_topology.storage, netdevs=netdevs))
    expect(judge("STO-06", faulted(sto_topology, "bf-nic-mode"), site), PASS)
    expect(judge("STO-06", faulted(sto_topology), site), FAIL, "DPU mode")


@pytest.mark.parametrize(("engine", "model", "mode"), [
    (0, 1, "dpu"), (0, None, "dpu"), (1, 1, "nic"), (1, 0, "nic"), (0, 0, "separated-host"), (None, 1, None)])
def test_bluefield_mode_from_mlxconfig_codes(engine: int | None, model: int | None, mode: str | None) -> None:
    assert bluefield_mode(engine, model) == mode


# ------------------------------------------------------------------ STO-07


@pytest.mark.rack
def test_arp_leak_names_every_netdev(faulted: Gather, sto_topology: Topology) -> None:
    verdict = judge("STO-07", faulted(sto_topology, "arp-leak"), sto_topology)
    expect(verdict, FAIL, "enp41s0f0np0 arp_ignore=0 arp_announce=0",
           "expected rp_filter=2 arp_ignore=1 arp_announce=2")


def test_effective_value_is_the_larger_of_all_and_the_device(facts: dict[str, Any], sto_topology: Topology) -> None:
    facts["storage"]["sysctl"]["all"]["rp_filter"] = 0  # the device's own 2 still applies
    expect(judge("STO-07", facts, sto_topology), PASS)
    facts["storage"]["sysctl"]["all"]["arp_announce"] = 0
    facts["storage"]["sysctl"]["ibp24s0"]["arp_announce"] = 0
    expect(judge("STO-07", facts, sto_topology), FAIL, "ibp24s0 arp_announce=0")


def test_compute_address_inside_a_storage_subnet_fails(facts: dict[str, Any], sto_topology: Topology) -> None:
    record = facts["storage"]["ip_addr"]
    items = json.loads(record["stdout"])
    ib = next(i for i in items if i["ifname"] == "ibp24s0")
    ib["addr_info"].append({"family": "inet", "local": "10.20.8.77", "prefixlen": 24, "scope": "global"})
    record["stdout"] = json.dumps(items)
    expect(judge("STO-07", facts, sto_topology), FAIL,
           "ibp24s0 address 10.20.8.77/24 inside storage subnet (target parallel-fs 10.20.8.0/22)")


def test_storage_address_inside_a_compute_subnet_fails(facts: dict[str, Any], sto_topology: Topology) -> None:
    record = facts["storage"]["ip_addr"]
    items = json.loads(record["stdout"])
    bf = next(i for i in items if i["ifname"] == "enp41s0f0np0")
    bf["addr_info"].append({"family": "inet", "local": "192.168.3.9", "prefixlen": 24, "scope": "global"})
    record["stdout"] = json.dumps(items)
    expect(judge("STO-07", facts, sto_topology), FAIL,
           "enp41s0f0np0 address 192.168.3.9/24 inside compute subnet (ibp94s0 192.168.3.0/24)")


# ------------------------------------------------------------------ applicability


def test_node_type_without_storage_declares_every_sto_check_not_applicable(sto_topology: Topology,
                                                                          facts: dict[str, Any]) -> None:
    bare = dataclasses.replace(sto_topology, name="no-storage", storage=None)
    for check_id in STO_CHECKS:
        reason = not_applicable_reason(check_id, bare)
        assert reason == "topology no-storage declares no storage fabric (no storage section)"
        assert not_applicable_reason(check_id, sto_topology) is None
        verdict = judge(check_id, facts, bare)  # asked anyway: never a pass
        assert verdict.status is INCOMPLETE and "declares no storage fabric" in verdict.reason


def test_storage_without_roce_qos_makes_only_sto05_not_applicable(sto_topology: Topology) -> None:
    assert sto_topology.storage is not None
    plain = dataclasses.replace(sto_topology, name="tcp-storage",
                                storage=dataclasses.replace(sto_topology.storage, qos=None))
    assert not_applicable_reason("STO-05", plain) == "topology tcp-storage declares no RoCE QoS profile for storage " \
                                                     "(storage.qos)"
    assert [c for c in STO_CHECKS if not_applicable_reason(c, plain)] == ["STO-05"]


def test_collector_sources_carry_every_node_types_targets(sto_topology: Topology) -> None:
    site = with_routing(sto_topology, StorageRouting(vrf="vrf-storage"), "site")
    bare = dataclasses.replace(sto_topology, storage=None)
    assert collector_sources("all", [bare]) == "all,sdc-size=1024"  # GPU-14's workload size (topology sdc.size)
    items = collector_sources("all", [sto_topology, site, bare]).split(",")
    assert items[0] == "all" and sorted(items[1:]) == [
        "sdc-size=1024", "storage-route=10.20.0.10", "storage-route=10.20.8.11", "storage-vrf=vrf-storage"]


def test_only_cheap_sto_checks_are_in_the_probe() -> None:
    from burnin.probe import fast_check_ids

    assert {c for c in fast_check_ids() if c.startswith("STO")} == {"STO-01", "STO-02", "STO-04", "STO-07"}
