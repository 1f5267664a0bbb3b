"""NVLink beyond nvbandwidth (NVL): the CUDA sample p2pBandwidthLatencyTest, and NVLink after the traffic."""

import pytest

from burnin.evaluate.verdict import Verdict
from burnin.suite import assert_passed


@pytest.mark.check("NVL-03")
def test_p2p_bandwidth_latency(verdict: Verdict) -> None:
    """Every GPU pair has P2P access, and its P2P write bandwidth and latency meet the references."""
    assert_passed(verdict)


@pytest.mark.check("NVL-04")
def test_nvlink_after_traffic(verdict: Verdict) -> None:
    """After the single-node traffic every NVLink is still up and no error counter grew beyond its limit."""
    assert_passed(verdict)
