"""NVLink and PCIe bandwidth (NVL) from nvbandwidth, per GPU pair and per GPU."""

import pytest

from burnin.evaluate.verdict import Verdict
from burnin.suite import assert_passed


@pytest.mark.check("NVL-01")
def test_nvlink_pair_bandwidth(verdict: Verdict) -> None:
    """Device-to-device read bandwidth of every GPU pair meets the reference; no slow pair or node."""
    assert_passed(verdict)


@pytest.mark.check("NVL-02")
def test_host_device_bandwidth(verdict: Verdict) -> None:
    """Host-to-device and device-to-host bandwidth of every GPU meets the reference."""
    assert_passed(verdict)
