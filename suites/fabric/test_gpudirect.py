"""GPUDirect RDMA per HCA (IB-08): perftest ib_write_bw in loopback on each node, GPU and host memory."""

import pytest

from burnin.evaluate.verdict import Verdict
from burnin.suite import assert_passed


@pytest.mark.check("IB-08")
def test_gpudirect_rdma_bandwidth_per_hca(verdict: Verdict) -> None:
    """Every compute HCA writes at its reference from its paired GPU's memory and from host memory."""
    assert_passed(verdict)
