"""IB-05 subnet manager reachability and addressing: LID and SM LID on every compute InfiniBand port, one SM.

The healthy facts come from a simulated node read by the real collector (sysfs ``lid`` ``0x<n>``,
``sm_lid`` ``0x1`` as the kernel prints them); each test changes one port.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from checks_support import (
    COMPUTE_HCAS,
    FAIL,
    INCOMPLETE,
    NODE,
    PASS,
    STORAGE_HCAS,
    TOPOLOGY,
    assert_status,
    failing_subjects,
    judge,
    port,
    unmeasured_subjects,
)

from burnin.checks.base import not_applicable_reason
from burnin.checks.ib_subnet import fold_names, subnet_not_applicable, sysfs_lid
from burnin.evaluate.verdict import Unmeasurable
from burnin.topology.model import Topology

Facts = dict[str, Any]


def roce(*names: str, topology: Topology = TOPOLOGY) -> Topology:
    """The topology with ``names`` declared Ethernet (RoCE compute HCAs)."""
    return replace(topology, hcas=tuple(replace(h, link_layer="Ethernet") if h.name in names else h
                                        for h in topology.hcas))


def as_roce(facts: Facts, hca: str) -> None:
    """What a RoCE port shows in sysfs: Ethernet, LID and SM LID 0x0."""
    port(facts, hca).update(link_layer="Ethernet", lid="0x0", sm_lid="0x0")


def test_a_healthy_node_passes_with_its_sm_named(facts: Facts) -> None:
    verdict = judge("IB-05", facts)
    assert verdict.status is PASS, verdict.reason
    assert verdict.reason == "IB-05 ok: 8 compute ports with a LID, SM LID 0x1"
    assert len(verdict.findings) == len(COMPUTE_HCAS)
    assert verdict.node == NODE


@pytest.mark.parametrize("hca", COMPUTE_HCAS)
def test_sm_lid_zero_fails_that_port(facts: Facts, hca: str) -> None:
    port(facts, hca)["sm_lid"] = "0x0"
    verdict = judge("IB-05", facts)
    assert verdict.reason == f"IB-05 {hca} port 1 SM LID 0x0 (expected a subnet manager: SM LID != 0)"
    assert failing_subjects(verdict) == {f"{hca} port 1"}


def test_lid_zero_fails_the_port(facts: Facts) -> None:
    port(facts, "mlx5_3")["lid"] = "0x0"
    assert judge("IB-05", facts).reason == "IB-05 mlx5_3 port 1 LID 0x0 (expected a subnet manager: LID != 0)"


def test_a_port_no_sm_swept_names_both(facts: Facts) -> None:
    port(facts, "mlx5_3").update(state="2: INIT", lid="0x0", sm_lid="0x0")
    verdict = judge("IB-05", facts)
    assert verdict.status is FAIL
    assert verdict.reason == ("IB-05 mlx5_3 port 1 LID 0x0, SM LID 0x0 "
                              "(expected a subnet manager: LID != 0, SM LID != 0)")


def test_a_second_sm_lid_fails_the_node_naming_the_groups(facts: Facts) -> None:
    port(facts, "mlx5_7")["sm_lid"] = "0x5"
    verdict = judge("IB-05", facts)
    assert verdict.status is FAIL
    assert verdict.reason == ("IB-05 SM LID differs: mlx5_0..6 0x1, mlx5_7 0x5 "
                              "(expected one subnet manager for all compute ports)")
    assert failing_subjects(verdict) == {"SM LID"}


def test_split_groups_fold_in_topology_order(facts: Facts) -> None:
    for hca in ("mlx5_0", "mlx5_4"):
        port(facts, hca)["sm_lid"] = "0x2A"
    assert judge("IB-05", facts).measured == "SM LID differs: mlx5_0,4 0x2a, mlx5_1..3,5..7 0x1"


def test_three_sm_lids(facts: Facts) -> None:
    port(facts, "mlx5_2")["sm_lid"] = "0x7"
    port(facts, "mlx5_5")["sm_lid"] = "0x9"
    assert judge("IB-05", facts).measured == "SM LID differs: mlx5_0..1,3..4,6..7 0x1, mlx5_2 0x7, mlx5_5 0x9"


def test_a_zero_and_a_split_are_both_named(facts: Facts) -> None:
    port(facts, "mlx5_1")["sm_lid"] = "0x0"
    port(facts, "mlx5_6")["sm_lid"] = "0x3"
    verdict = judge("IB-05", facts)
    assert verdict.reason == ("IB-05 mlx5_1 port 1 SM LID 0x0; SM LID differs: mlx5_0,2..5,7 0x1, mlx5_6 0x3 "
                              "(expected a subnet manager: SM LID != 0; one subnet manager for all compute ports)")


def test_ports_without_an_sm_are_left_out_of_the_comparison(facts: Facts) -> None:
    for hca in COMPUTE_HCAS[:7]:
        port(facts, hca)["sm_lid"] = "0x0"
    verdict = judge("IB-05", facts)
    assert "differs" not in verdict.reason
    assert failing_subjects(verdict) == {f"{hca} port 1" for hca in COMPUTE_HCAS[:7]}


def test_storage_ports_are_not_judged(facts: Facts) -> None:
    port(facts, STORAGE_HCAS[0]).update(lid="garbage", sm_lid="0x9", phys_state="3: Disabled")
    assert judge("IB-05", facts).status is PASS


@pytest.mark.parametrize(("field", "value", "cause"), [
    ("sm_lid", None, "port 1 sm_lid not readable"),
    ("lid", None, "port 1 lid not readable"),
    ("sm_lid", "", "port 1 sm_lid '' is not a LID"),
    ("sm_lid", "1", "port 1 sm_lid '1' is not a LID"),  # sysfs prints 0x%x: a bare number is no sysfs reading
    ("sm_lid", "0x", "port 1 sm_lid '0x' is not a LID"),
    ("sm_lid", "0x10000", "port 1 sm_lid '0x10000' is not a LID"),  # a LID is 16 bits
    ("lid", "0xg1", "port 1 lid '0xg1' is not a LID"),
    ("lid", 1, "port 1 lid 1 is not a LID"),
    ("lid", ["0x1"], "port 1 lid ['0x1'] is not a LID"),
    ("link_layer", None, "port 1 link_layer None unreadable"),
    ("link_layer", "IB", "port 1 link_layer 'IB' unreadable"),
    ("phys_state", None, "port 1 phys_state None unreadable"),
    ("phys_state", " ", "port 1 phys_state ' ' unreadable"),
    ("phys_state", 5, "port 1 phys_state 5 unreadable"),
])
def test_unreadable_values_are_incomplete_never_pass(facts: Facts, field: str, value: object, cause: str) -> None:
    port(facts, "mlx5_4")[field] = value
    verdict = judge("IB-05", facts)
    assert_status(verdict, INCOMPLETE, f"IB-05 could not be measured: mlx5_4: {cause}")
    assert unmeasured_subjects(verdict) == {"mlx5_4"}


def test_an_unreadable_port_does_not_hide_a_failure(facts: Facts) -> None:
    port(facts, "mlx5_4")["lid"] = None
    port(facts, "mlx5_5")["sm_lid"] = "0x0"
    verdict = judge("IB-05", facts)
    assert_status(verdict, FAIL, "mlx5_5 port 1 SM LID 0x0", "not measured: mlx5_4 port 1 lid not readable")


@pytest.mark.parametrize("phys", ["2: Polling", "3: Disabled", "1: Sleep", "LinkUpX"])
def test_a_port_without_a_link_is_incomplete_for_ib01(facts: Facts, phys: str) -> None:
    port(facts, "mlx5_2").update(state="1: DOWN", phys_state=phys, lid="0x0", sm_lid="0x0")
    verdict = judge("IB-05", facts)
    assert_status(verdict, INCOMPLETE, f"mlx5_2: port 1 {phys}: no link for a subnet manager to reach (see IB-01)")


@pytest.mark.parametrize("state", ["2: INIT", "3: ARMED", "4: ACTIVE"])
def test_a_linked_port_is_judged_whatever_its_logical_state(facts: Facts, state: str) -> None:
    port(facts, "mlx5_2").update(state=state, sm_lid="0x0")
    assert failing_subjects(judge("IB-05", facts)) == {"mlx5_2 port 1"}


def test_an_ethernet_port_where_infiniband_is_declared_is_incomplete(facts: Facts) -> None:
    as_roce(facts, "mlx5_2")
    verdict = judge("IB-05", facts)
    assert_status(verdict, INCOMPLETE, "mlx5_2: port 1 link layer Ethernet where topology hgx-h100-8gpu declares "
                  "InfiniBand: no subnet manager to judge (see IB-03)")


def test_a_declared_roce_port_is_named_not_judged(facts: Facts) -> None:
    as_roce(facts, "mlx5_7")
    verdict = judge("IB-05", facts, roce("mlx5_7"))
    assert verdict.status is PASS, verdict.reason
    assert verdict.reason == ("IB-05 ok: 7 compute ports with a LID, SM LID 0x1; "
                              "mlx5_7 port 1 Ethernet (RoCE): no subnet manager, not judged")


def test_declared_roce_ports_are_folded(facts: Facts) -> None:
    for hca in ("mlx5_5", "mlx5_6", "mlx5_7"):
        as_roce(facts, hca)
    verdict = judge("IB-05", facts, roce("mlx5_5", "mlx5_6", "mlx5_7"))
    assert verdict.measured == ("5 compute ports with a LID, SM LID 0x1; "
                                "mlx5_5..7 port 1 Ethernet (RoCE): no subnet manager, not judged")


def test_a_declared_roce_hca_that_runs_infiniband_is_judged(facts: Facts) -> None:
    port(facts, "mlx5_7")["sm_lid"] = "0x0"
    assert failing_subjects(judge("IB-05", facts, roce("mlx5_7"))) == {"mlx5_7 port 1"}


def test_an_all_roce_compute_fabric_is_declared_not_applicable(facts: Facts) -> None:
    topology = roce(*COMPUTE_HCAS)
    reason = not_applicable_reason("IB-05", topology)
    assert reason == ("topology hgx-h100-8gpu declares every compute HCA Ethernet (RoCE): "
                      "no InfiniBand subnet manager to reach")
    for hca in COMPUTE_HCAS:
        as_roce(facts, hca)
    # called anyway, it says nothing was judged: never a pass
    verdict = judge("IB-05", facts, topology)
    assert_status(verdict, INCOMPLETE, "no compute InfiniBand port to judge (mlx5_0 port 1, ")


def test_the_rule_declares_only_an_all_ethernet_compute_fabric() -> None:
    assert subnet_not_applicable(TOPOLOGY) is None
    assert subnet_not_applicable(roce(*COMPUTE_HCAS[:-1])) is None
    no_compute = replace(TOPOLOGY, hcas=tuple(h for h in TOPOLOGY.hcas if h.role == "storage"),
                         gpus=replace(TOPOLOGY.gpus, devices=tuple(replace(d, hca=None)
                                                                   for d in TOPOLOGY.gpus.devices)))
    assert subnet_not_applicable(no_compute) is None  # nothing declared Ethernet: judged (and found empty)


def test_a_node_type_without_compute_hcas_is_incomplete(facts: Facts) -> None:
    no_compute = replace(TOPOLOGY, hcas=tuple(h for h in TOPOLOGY.hcas if h.role == "storage"),
                         gpus=replace(TOPOLOGY.gpus, devices=tuple(replace(d, hca=None)
                                                                   for d in TOPOLOGY.gpus.devices)))
    verdict = judge("IB-05", facts, no_compute)
    assert verdict.status is INCOMPLETE
    assert verdict.reason == "IB-05 could not be measured: no compute InfiniBand port to judge"


def test_an_absent_hca_fails(facts: Facts) -> None:
    del facts["infiniband"]["hcas"]["mlx5_6"]
    assert judge("IB-05", facts).reason == "IB-05 mlx5_6 absent (expected present)"


def test_a_missing_port_is_incomplete(facts: Facts) -> None:
    facts["infiniband"]["hcas"]["mlx5_6"]["ports"] = {}
    assert_status(judge("IB-05", facts), INCOMPLETE, "mlx5_6: port 1 not present")


def test_a_failed_source_is_incomplete(facts: Facts) -> None:
    facts["sources"]["infiniband"] = {"ok": False, "error": "timed out after 5 s"}
    assert_status(judge("IB-05", facts), INCOMPLETE, "infiniband: timed out after 5 s")


@pytest.mark.parametrize(("text", "value"), [("0x0", 0), ("0x1", 1), ("0xbfff", 0xBFFF), ("0xFFFF", 0xFFFF),
                                             (" 0x80\n", 0x80)])
def test_sysfs_lid_reads_what_the_kernel_prints(text: str, value: int) -> None:
    assert sysfs_lid(text, "lid") == value


def test_sysfs_lid_refuses_anything_else() -> None:
    for text in ("0x12345", "80", "-0x1", "0x 1", "lid"):
        with pytest.raises(Unmeasurable, match="is not a LID"):
            sysfs_lid(text, "lid")


@pytest.mark.parametrize(("names", "folded"), [
    (["mlx5_0", "mlx5_1", "mlx5_2"], "mlx5_0..2"),
    (["mlx5_7"], "mlx5_7"),
    (["mlx5_0", "mlx5_2"], "mlx5_0,2"),
    (["mlx5_3", "mlx5_1", "mlx5_2", "mlx5_1"], "mlx5_1..3"),
    (["mlx5_0", "mlx5_1", "mlx5_3", "mlx5_4", "mlx5_6"], "mlx5_0..1,3..4,6"),
    (["mlx5_9", "mlx5_10", "mlx5_11"], "mlx5_9..11"),
    (["mlx5_1", "ibp1_0", "mlx5_2"], "mlx5_1..2, ibp1_0"),
    (["hca", "mlx5_0"], "mlx5_0, hca"),
    ([], ""),
])
def test_fold_names(names: list[str], folded: str) -> None:
    assert fold_names(names) == folded
