"""Passed alone: MEG-01..04 on a node's single-node run, before it may join a multi-node run (pure).

A node that fails on its own would make a group's result unattributable, so the Megatron phase lets a node
join the multi-node run only when every one of these passed on its own run (the phase is handed
:func:`passed_alone` as its predicate).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from burnin.evaluate.verdict import Finding, Status, Unmeasurable, Verdict, roll_up, unknown
from burnin.facts import Facts
from burnin.megatron import judge
from burnin.topology.model import Topology

SINGLE_NODE_CHECKS = ("MEG-01", "MEG-02", "MEG-03", "MEG-04")
"""The checks a node must pass on its own run before it joins a multi-node run (judged without it)."""
_FINDINGS: dict[str, Callable[..., list[Finding]]] = {
    "MEG-01": judge.meg01, "MEG-02": judge.meg02, "MEG-03": judge.meg03, "MEG-04": judge.meg04}

PassedAlone = Callable[[Facts, Topology], tuple[bool, str]]
"""(True, "") when a node passed every single-node check on its own run; else False and the first reason."""


def section(facts: Facts) -> dict[str, Any]:
    """The node's ``megatron`` section; Unmeasurable (saying why) when it was not measured."""
    if facts.unreachable:
        raise Unmeasurable(facts.unreachable)
    return judge.section(facts.data.get("megatron"))


def single_node_verdicts(facts: Facts, topology: Topology) -> list[Verdict]:
    """MEG-01..04 on the node's single-node run alone."""
    verdicts = []
    for check_id in SINGLE_NODE_CHECKS:
        try:
            found = _FINDINGS[check_id](section(facts), topology, include_multi=False)
        except Unmeasurable as exc:
            found = [unknown("node", exc.reason)]
        verdicts.append(roll_up(check_id, facts.node, found, expected="passes on its own"))
    return verdicts


def passed_alone(facts: Facts, topology: Topology) -> tuple[bool, str]:
    """(True, "") when the node passed MEG-01..04 on its own; else False and the first reason."""
    for verdict in single_node_verdicts(facts, topology):
        if verdict.status is not Status.PASS:
            return False, verdict.reason
    return True, ""
