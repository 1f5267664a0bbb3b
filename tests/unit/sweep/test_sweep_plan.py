"""Which nodes a sweep starts on, what each node's sweep came to, and whose facts count (pure)."""

from __future__ import annotations

import pytest

from burnin.facts import Facts
from burnin.sweep.node_job import own_facts
from burnin.sweep.plan import (
    Attempt,
    NodeRecord,
    counts,
    fabric_counts,
    groups_possible,
    limit,
    pick,
    pick_group,
)
from burnin.transport.slurm_jobs import SlurmNode

NODES = [f"n{i}" for i in range(1, 7)]


@pytest.mark.parametrize(("share", "size", "jobs"), [(0.1, 128, 12), (0.5, 6, 3), (0.1, 6, 1), (1.0, 6, 6),
                                                      (0.3, 10, 3)])
def test_at_most_a_share_of_the_partition(share: float, size: int, jobs: int) -> None:
    assert limit(share, size) == jobs


def test_pick_fills_idle_untested_nodes_up_to_the_limit() -> None:
    records = {n: NodeRecord(n) for n in NODES}
    records["n2"].status = "admitted"  # tested already
    records["n6"].status = "ended"  # its job was cancelled: not tried again
    current = {n: SlurmNode(n, "IDLE") for n in NODES}
    current["n3"] = SlurmNode("n3", "ALLOCATED")
    current["n4"] = SlurmNode("n4", "IDLE+DRAIN", "maintenance")
    assert pick(NODES, records, current, running=[], at_once=3) == ["n1", "n5"]
    assert pick(NODES, records, current, running=[], at_once=1) == ["n1"]
    assert pick(NODES, records, current, running=["n1"], at_once=2) == ["n5"]
    assert pick(NODES, records, current, running=["n1", "n5"], at_once=2) == []
    records["n3"].status = "preempted"  # tried again once idle
    current["n3"] = SlurmNode("n3", "IDLE")
    assert pick(NODES, records, current, running=[], at_once=6) == ["n1", "n3", "n5"]


def test_a_node_not_tested_says_why() -> None:
    record = NodeRecord("n1")
    record.saw(SlurmNode("n1", "ALLOCATED"))
    assert record.status == "busy" and "ALLOCATED" in record.why
    record.saw(SlurmNode("n1", "DOWN*", "Not responding"))
    assert record.status == "down" and "Not responding" in record.why
    record.saw(None, "scontrol timed out")
    assert record.status == "down" and "scontrol timed out" in record.why
    record.status, record.why = "preempted", "job 7 preempted"
    record.attempts.append(Attempt("7", "preempted"))
    record.saw(SlurmNode("n1", "ALLOCATED"))  # busy with the job that preempted it: still "preempted"
    assert record.status == "preempted" and record.preemptions == 1 and not record.settled
    record.status = "rejected"
    record.saw(SlurmNode("n1", "IDLE+DRAIN", "burnin: GPU-10"))  # drained by the gate: stays rejected
    assert record.status == "rejected" and record.settled
    assert counts({"n1": record, "n2": NodeRecord("n2")}) == {
        "admitted": [], "rejected": ["n1"], "busy": ["n2"], "preempted": [], "down": [], "ended": []}


def test_facts_count_only_for_the_host_slurm_runs_the_node_on() -> None:
    facts = Facts("gpu7", {"hostname": "gpu7.cluster.local", "sources": {}})
    assert own_facts(facts, "gpu7") is facts
    assert own_facts(facts, "gpu7.cluster.local") is facts
    forged = own_facts(Facts("gpu7", {"hostname": "gpu3", "sources": {}}), "gpu7")
    assert forged.unreachable and "'gpu3'" in forged.unreachable and "not this node's facts" in forged.unreachable
    nameless = own_facts(Facts("gpu7", {"sources": {}}), "gpu7")
    assert nameless.unreachable and "None" in nameless.unreachable
    unknown_host = own_facts(facts, None)
    assert unknown_host.unreachable and "host name" in unknown_host.unreachable
    unreachable = Facts.unreachable_node("gpu7", "srun: error")
    assert own_facts(unreachable, "gpu7") is unreachable


def test_a_group_forms_only_of_admitted_nodes_idle_together() -> None:
    records = {n: NodeRecord(n, status="admitted") for n in NODES}
    records["n1"].status = "rejected"  # failed its node suite: never in a group
    records["n5"].status = "busy"  # not judged yet
    records["n6"].fabric = "passed"  # measured in a group already
    current = {n: SlurmNode(n, "IDLE") for n in NODES}
    assert pick_group(NODES, records, current, running=[], at_once=6, size=2) == ["n2", "n3", "n4"]
    assert pick_group(NODES, records, current, running=[], at_once=6, size=4) == []  # not enough together
    assert pick_group(NODES, records, current, running=["n5"], at_once=3, size=2) == ["n2", "n3"]  # the share
    assert pick_group(NODES, records, current, running=["n5", "n6"], at_once=3, size=2) == []
    current["n3"] = SlurmNode("n3", "ALLOCATED")
    assert pick_group(NODES, records, current, running=[], at_once=6, size=2) == ["n2", "n4"]
    assert pick_group(NODES, records, current, running=["n4"], at_once=6, size=2) == []
    records["n3"].fabric = "preempted"  # its group gave way: tried again once idle
    current["n3"] = SlurmNode("n3", "IDLE")
    assert pick_group(NODES, records, current, running=[], at_once=6, size=3) == ["n2", "n3", "n4"]
    assert pick_group(NODES, records, current, running=[], at_once=6, size=0) == []  # groups off


def test_a_group_can_form_while_enough_nodes_could_still_join() -> None:
    records = {n: NodeRecord(n) for n in NODES[:3]}
    assert groups_possible(records, 3)  # none judged yet: each may be admitted
    records["n1"].status = "rejected"
    assert not groups_possible(records, 3) and groups_possible(records, 2)
    records["n2"].status = "admitted"
    records["n3"].status, records["n3"].fabric = "admitted", "passed"
    assert not groups_possible(records, 2)  # only n2 still waits for one
    assert not groups_possible(records, 0)
    records["n2"].fabric = "ungrouped"
    records["n3"].status, records["n3"].fabric = "rejected", "failed"
    by = fabric_counts(records)
    assert by["ungrouped"] == ["n2"] and by["failed"] == ["n3"] and not any("n1" in nodes for nodes in by.values())
