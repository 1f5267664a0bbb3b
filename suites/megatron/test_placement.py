"""Rank placement (PIN): the placement probe under the launcher, with the binding options training uses.

Each rank reported its allowed CPUs and memory nodes, its GPU, where its memory
landed, where its threads ran and the HCAs NCCL may use; the tests judge them
against the topology's NUMA layout and GPU-HCA pairing.
"""

import pytest

from burnin.evaluate.verdict import Verdict
from burnin.suite import assert_passed


@pytest.mark.check("PIN-01")
def test_ranks_on_their_gpu_numa_node(verdict: Verdict) -> None:
    """Each rank's CPUs and memory nodes lie within its GPU's NUMA node; one rank per GPU; binding configured."""
    assert_passed(verdict)


@pytest.mark.check("PIN-02")
def test_rank_memory_local(verdict: Verdict) -> None:
    """The memory each rank wrote landed on its GPU's NUMA node."""
    assert_passed(verdict)


@pytest.mark.check("PIN-03")
def test_rank_threads_stay_put(verdict: Verdict) -> None:
    """Every thread of a rank ran on one of its allowed CPUs."""
    assert_passed(verdict)


@pytest.mark.check("PIN-04")
def test_nccl_sees_the_paired_nic(verdict: Verdict) -> None:
    """NCCL may use the HCA paired with each rank's GPU and no storage HCA."""
    assert_passed(verdict)
