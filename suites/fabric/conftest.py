"""Fixtures of the fabric suite."""

import pytest

from burnin.checks.fabric import multi_node_applicable
from burnin.checks.fabric import other_collectives as _others
from burnin.facts import Facts
from burnin.suite import not_applicable


@pytest.fixture
def multi_node(facts: Facts) -> None:
    """Multi-node checks do not apply to a run of one node, nor to a node every other node was left out of.

    An explicit not-applicable with its reason (gate.json ``not_applicable``); a
    node that was itself left out of the multi-node runs is judged (incomplete).
    """
    applicable, reason = multi_node_applicable(facts)
    if not applicable:
        not_applicable(reason or "multi-node checks do not apply to this node")


@pytest.fixture
def other_collectives(facts: Facts) -> None:
    """NCCL-02 applies only when the fabric settings asked for collectives besides all_reduce."""
    if not _others(facts):
        not_applicable("only all_reduce was measured (fabric setting collectives)")
