"""NCCL never uses storage devices (STO-02), with the runtime evidence of this suite's multi-node runs.

The fabric phase ran the multi-node all_reduce with ``NCCL_DEBUG=INFO`` (and one
short run that left ``NCCL_IB_HCA`` to each node's own NCCL configuration):
the devices NCCL said it opened on each node are judged with the node's static
NCCL configuration. A node type without a storage fabric declares STO-02 not
applicable.
"""

import pytest

from burnin.checks.base import not_applicable_reason
from burnin.evaluate.verdict import Verdict
from burnin.suite import assert_passed, not_applicable
from burnin.topology.model import Topology


@pytest.fixture
def storage_fabric(topology: Topology) -> None:
    """Stand aside, with the topology's reason, where the node type has no storage fabric."""
    reason = not_applicable_reason("STO-02", topology)
    if reason is not None:
        not_applicable(reason)


@pytest.mark.check("STO-02")
def test_nccl_opened_compute_hcas_only(storage_fabric: None, verdict: Verdict) -> None:
    """NCCL's own INFO lines name compute HCAs only, and nccl.conf and the environment select exactly those."""
    assert_passed(verdict)
