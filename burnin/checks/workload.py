"""Workload checks (MEG, PIN): the Megatron smoke run and where its ranks were placed.

They judge the ``megatron`` and ``placement`` sections the Megatron phase merges
into each node's facts (shapes in docs/megatron.md; findings in
burnin.megatron.judge and burnin.megatron.pinning). A node without them was not
measured: incomplete, with the cause.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from burnin.checks.base import check
from burnin.checks.references import reference
from burnin.evaluate.verdict import Finding, Unmeasurable, Verdict, roll_up
from burnin.facts import Facts
from burnin.megatron import alone, judge, pinning
from burnin.topology.model import Topology

MegFindings = Callable[..., list[Finding]]


def _megatron(facts: Facts) -> dict[str, Any]:
    return alone.section(facts)


def _placement(facts: Facts) -> dict[str, Any]:
    if facts.unreachable:
        raise Unmeasurable(facts.unreachable)
    return pinning.section(facts.data.get("placement"))


def _meg(check_id: str, facts: Facts, topology: Topology, findings: MegFindings,
         expected: Callable[[], str], *, include_multi: bool = True) -> Verdict:
    data = _megatron(facts)  # an unmeasured node says why before any reference is looked up
    found = findings(data, topology, include_multi=include_multi)
    return roll_up(check_id, facts.node, found, expected=expected(), healthy=judge.summary(found))


@check("MEG-01", "Megatron launch: every rank ran and exited 0 in time", sources=("megatron",), fast=False)
def megatron_launch(facts: Facts, topology: Topology) -> Verdict:
    return _meg("MEG-01", facts, topology, judge.meg01,
                lambda: f"every rank ({topology.gpus.count} per node) exits 0 within the launch timeout")


@check("MEG-02", "Megatron log: every iteration parsed", sources=("megatron",), fast=False)
def megatron_log(facts: Facts, topology: Topology) -> Verdict:
    return _meg("MEG-02", facts, topology, judge.meg02,
                lambda: "every iteration 1..train_iters logged with its time, throughput and loss")


@check("MEG-03", "Megatron MFU from the model shape and iteration time",
       sources=("megatron",), references=(judge.PEAK_REF, judge.MFU_REF, judge.AGREEMENT_REF), fast=False)
def megatron_mfu(facts: Facts, topology: Topology) -> Verdict:
    def expected() -> str:
        floor = reference(topology, judge.MFU_REF)
        peak = reference(topology, judge.PEAK_REF)
        return f"MFU {judge.share(floor)} of {peak.value:g} TFLOP/s BF16 dense; the log's TFLOP/s/GPU agrees"

    return _meg("MEG-03", facts, topology, judge.meg03, expected, include_multi=False)


@check("MEG-04", "Megatron run health: loss, NaN, NCCL errors, throughput, stragglers",
       sources=("megatron",), fast=False,
       references=(judge.LOSS_DROP_REF, judge.TFLOPS_REF, judge.STRAGGLER_REF, judge.MULTI_REF))
def megatron_health(facts: Facts, topology: Topology) -> Verdict:
    def expected() -> str:
        floor = reference(topology, judge.TFLOPS_REF)
        tol = reference(topology, judge.STRAGGLER_REF).value
        multi = reference(topology, judge.MULTI_REF).value
        return (f"finite falling loss, no NaN/skipped iteration, no NCCL error, {floor.describe()}, "
                f"within {tol:.0%} of the run's median node and of {floor.value:g} {floor.unit}, "
                f"multi-node within {multi:.0%} of its members' median single-node")

    return _meg("MEG-04", facts, topology, judge.meg04, expected)


def _pin(check_id: str, facts: Facts, topology: Topology, findings: Callable[[dict[str, Any], Topology],
         list[Finding]], expected: str) -> Verdict:
    data = _placement(facts)
    found = findings(data, topology)
    return roll_up(check_id, facts.node, found, expected=expected, healthy=judge.summary(found))


@check("PIN-01", "Ranks placed on their GPU's NUMA node (placement probe under the real launcher)",
       sources=("placement",), fast=False)
def placement_cpus(facts: Facts, topology: Topology) -> Verdict:
    return _pin("PIN-01", facts, topology, pinning.pin01,
                "each rank's CPUs and memory nodes within its GPU's NUMA node, one rank per GPU")


@check("PIN-02", "Rank memory on its GPU's NUMA node",
       sources=("placement",), references=(pinning.LOCAL_MEMORY_REF,), fast=False)
def placement_memory(facts: Facts, topology: Topology) -> Verdict:
    data = _placement(facts)
    floor = reference(topology, pinning.LOCAL_MEMORY_REF)
    found = pinning.pin02(data, topology)
    return roll_up("PIN-02", facts.node, found, healthy=judge.summary(found),
                   expected=f"share of each rank's written memory on its GPU's NUMA node {judge.share(floor)}")


@check("PIN-03", "Rank threads stay on their allowed CPUs", sources=("placement",), fast=False)
def placement_threads(facts: Facts, topology: Topology) -> Verdict:
    return _pin("PIN-03", facts, topology, pinning.pin03, "every thread sample on one of the rank's allowed CPUs")


@check("PIN-04", "NCCL may use each GPU's paired HCA and no storage HCA", sources=("placement",), fast=False)
def placement_nic(facts: Facts, topology: Topology) -> Verdict:
    return _pin("PIN-04", facts, topology, pinning.pin04,
                "NCCL_IB_HCA includes the HCA paired with each rank's GPU and no storage HCA")
