"""GPUDirect RDMA per HCA (IB-08): perftest ib_write_bw in loopback on each node, GPU and host memory."""

import pytest

from burnin.evaluate.verdict import Verdict
from burnin.suite import assert_passed, not_applicable
from burnin.topology.model import Topology


@pytest.fixture
def compute_hcas(topology: Topology) -> None:
    """IB-08 applies where the topology declares compute HCAs."""
    if not topology.compute_hcas:
        not_applicable(f"topology {topology.name} declares no compute HCA")


@pytest.mark.check("IB-08")
def test_gpudirect_rdma_bandwidth_per_hca(compute_hcas: None, verdict: Verdict) -> None:
    """Every compute HCA writes at its reference from its paired GPU's memory and from host memory."""
    assert_passed(verdict)
