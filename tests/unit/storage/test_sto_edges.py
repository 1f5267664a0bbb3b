"""Edges of STO-01/02/05/06 that planted bugs slipped through (bench/mutants on burnin/checks/storage.py).

Each test pins one decision: which line of a failing tool's output a reason
quotes, which argv it names, a virtual netdev's RDMA device, the table a pass
names, an nccl.conf that is not there, a storage HCA outside the BlueField
list, the topology's own NCCL list, a device that is neither compute nor
storage, which NCCL sources a verdict lists, and the QoS profile's absence.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from storage_support import Gather, with_routing
from test_sto_checks import FAIL, INCOMPLETE, PASS, TARGET, expect, judge, nccl_conf

from burnin.topology.model import Hca, StorageRouting, Topology

COMPUTE_LIST = "=" + ",".join(f"mlx5_{i}" for i in range(8))


def test_a_failing_tool_is_quoted_by_its_last_line_and_its_own_argv(facts: dict[str, Any],
                                                                    sto_topology: Topology) -> None:
    facts["storage"]["routes"][TARGET] = {"argv": ["ip", "-j", "route", "get", TARGET], "exit_status": 2,
                                          "stdout": "", "stderr": "first line\nsecond line\n", "error": None}
    verdict = judge("STO-01", facts, sto_topology)
    expect(verdict, INCOMPLETE, f"ip -j route get {TARGET} exited 2: second line")
    assert "first line" not in verdict.reason
    facts["storage"]["routes"][TARGET] = {"exit_status": 2, "stdout": "only stdout\n", "stderr": "", "error": None}
    expect(judge("STO-01", facts, sto_topology), INCOMPLETE, f"ip route get {TARGET} exited 2: only stdout")


def test_a_virtual_ipoib_netdev_names_no_rdma_device(facts: dict[str, Any], sto_topology: Topology) -> None:
    facts["storage"]["rdma"]["mlx5_99"] = {}  # a device whose PCI function is not known
    facts["storage"]["netdevs"]["ib0.8001"] = {"pci": None, "type": 32, "mtu": 4092}
    facts["storage"]["routes"][TARGET]["stdout"] = json.dumps([{"dst": TARGET, "dev": "ib0.8001"}])
    verdict = judge("STO-01", facts, sto_topology)
    expect(verdict, FAIL, f"{TARGET} routed via ib0.8001 (IPoIB) (expected")


@pytest.mark.rack
def test_a_pass_names_the_policy_table_but_not_main(faulted: Gather, facts: dict[str, Any],
                                                     sto_topology: Topology) -> None:
    main = judge("STO-01", facts, sto_topology)
    expect(main, PASS)
    assert main.findings[0].measured == "via enp41s0f0np0 (BlueField 0000:29:00.0)"
    site = with_routing(sto_topology, StorageRouting(table=100), "site-table")
    table = judge("STO-01", faulted(site), site)
    expect(table, PASS)
    assert table.findings[0].measured == "via enp41s0f0np0 (BlueField 0000:29:00.0, table 100)"


def test_an_nccl_conf_that_is_not_there_is_not_judged(facts: dict[str, Any], sto_topology: Topology) -> None:
    facts["storage"]["nccl"]["files"]["/etc/nccl.conf.d"] = {"present": False, "text": "NCCL_IB_HCA=mlx5_8\n",
                                                             "error": None}
    expect(judge("STO-02", facts, sto_topology), PASS)


def test_a_storage_hca_outside_the_bluefield_list_is_named_by_its_netdev(facts: dict[str, Any],
                                                                         sto_topology: Topology) -> None:
    extra = Hca("mlx5_10", "0000:aa:00.0", 1, "Ethernet", "storage", netdev="enp170s0np0")
    site = dataclasses.replace(sto_topology, name="site-extra-storage", hcas=(*sto_topology.hcas, extra))
    facts["storage"]["nccl"]["environment"] = {"NCCL_IB_HCA": "=mlx5_10"}
    expect(judge("STO-02", facts, site), FAIL, "selects storage device mlx5_10 (enp170s0np0)")


def test_the_topologys_own_nccl_list_is_what_nccl_must_select(facts: dict[str, Any],
                                                               sto_topology: Topology) -> None:
    assert sto_topology.storage is not None
    four = dataclasses.replace(sto_topology, name="site-four-rails", storage=dataclasses.replace(
        sto_topology.storage, nccl_ib_hca=("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3")))
    verdict = judge("STO-02", facts, four)
    expect(verdict, FAIL, "selects non-compute mlx5_4, mlx5_5, mlx5_6, mlx5_7",
           "expected NCCL_IB_HCA selecting exactly mlx5_0,mlx5_1,mlx5_2,mlx5_3;")
    nccl_conf(facts, "NCCL_IB_HCA==mlx5_0,mlx5_1,mlx5_2,mlx5_3\n")
    expect(judge("STO-02", facts, four), PASS)


def test_a_device_neither_compute_nor_storage_is_named(facts: dict[str, Any], sto_topology: Topology) -> None:
    facts["storage"]["rdma"]["mlx5_10"] = {"pci": "0000:aa:00.0"}
    nccl_conf(facts, f"NCCL_IB_HCA={COMPUTE_LIST},mlx5_10\n")
    verdict = judge("STO-02", facts, sto_topology)
    expect(verdict, FAIL, f"/etc/nccl.conf NCCL_IB_HCA={COMPUTE_LIST},mlx5_10 selects non-compute mlx5_10 (expected")
    assert "storage device" not in verdict.reason


def test_only_sources_that_set_nccl_are_listed(facts: dict[str, Any], sto_topology: Topology) -> None:
    verdict = judge("STO-02", facts, sto_topology)
    expect(verdict, PASS)
    assert [f.subject for f in verdict.findings] == ["/etc/nccl.conf"]  # the empty environment says nothing
    facts["storage"]["nccl"]["environment"] = {"NCCL_SOCKET_IFNAME": "=ibp24s0"}
    assert [f.subject for f in judge("STO-02", facts, sto_topology).findings] == ["/etc/nccl.conf", "environment"]


def test_sto05_called_without_a_qos_profile_says_why(facts: dict[str, Any], sto_topology: Topology) -> None:
    assert sto_topology.storage is not None
    no_qos = dataclasses.replace(sto_topology, name="site-no-qos",
                                 storage=dataclasses.replace(sto_topology.storage, qos=None))
    expect(judge("STO-05", facts, no_qos), INCOMPLETE,
           "topology site-no-qos declares no RoCE QoS profile for storage (storage.qos)")


def test_mlnx_qos_without_a_pfc_table_is_incomplete(facts: dict[str, Any], sto_topology: Topology) -> None:
    record = facts["storage_nic"]["mlnx_qos"]["enp41s0f0np0"]
    record["stdout"] = "DCBX mode: OS controlled\nPriority trust state: dscp\n"
    expect(judge("STO-05", facts, sto_topology), INCOMPLETE,
           "mlnx_qos -i enp41s0f0np0 printed no trust state or PFC table")
