"""NCCL collectives (NCCL): single-node NVLink, multi-node InfiniBand, the bad node, correctness.

The fabric phase of `burnin run --suite fabric` measured everything before these
tests run; each test judges one node. Reasons name the pair and the slow HCA.
"""

import pytest

from burnin.evaluate.verdict import Verdict
from burnin.suite import assert_passed


@pytest.mark.check("NCCL-01")
def test_nccl_single_node_all_reduce(verdict: Verdict) -> None:
    """8-GPU all_reduce busbw at large messages meets the reference and is no straggler."""
    assert_passed(verdict)


@pytest.mark.check("NCCL-02")
def test_nccl_single_node_other_collectives(other_collectives: None, verdict: Verdict) -> None:
    """all_gather / reduce_scatter busbw meet the reference; alltoall is no straggler (when selected)."""
    assert_passed(verdict)


@pytest.mark.check("NCCL-05")
def test_nccl_no_wrong_values(verdict: Verdict) -> None:
    """No #wrong or out-of-bounds value in any run this node took part in."""
    assert_passed(verdict)


@pytest.mark.check("NCCL-04")
def test_nccl_bad_node_localisation(multi_node: None, verdict: Verdict) -> None:
    """Pairwise localisation did not name this node (with the slow HCA when it did)."""
    assert_passed(verdict)


@pytest.mark.check("NCCL-03")
def test_nccl_multi_node_all_reduce(multi_node: None, verdict: Verdict) -> None:
    """The multi-node all_reduce meets its reference, or this node was cleared by known-good pairs."""
    assert_passed(verdict)
