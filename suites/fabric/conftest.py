"""Fixtures of the fabric suite."""

import pytest

from burnin.checks.fabric import multi_node_applicable
from burnin.checks.fabric import other_collectives as _others
from burnin.facts import Facts


@pytest.fixture
def multi_node(facts: Facts) -> None:
    """Skip multi-node checks where they cannot apply (a run of one node)."""
    applicable, reason = multi_node_applicable(facts)
    if not applicable:
        pytest.skip(reason)


@pytest.fixture
def other_collectives(facts: Facts) -> None:
    """Skip NCCL-02 unless the fabric settings asked for collectives besides all_reduce."""
    if not _others(facts):
        pytest.skip("only all_reduce was measured (fabric setting collectives)")
