"""GPU health (GPU): memory errors, Xids, clocks, temperature, power, PCIe and NVLink."""

import pytest

from burnin.evaluate.verdict import Verdict
from burnin.suite import assert_passed


@pytest.mark.check("GPU-01")
def test_ecc_uncorrectable(verdict: Verdict) -> None:
    """No volatile uncorrectable ECC error; SRAM aggregate within the RMA limit."""
    assert_passed(verdict)


@pytest.mark.check("GPU-03")
def test_row_remapping(verdict: Verdict) -> None:
    """No row remap pending and no remap failure."""
    assert_passed(verdict)


@pytest.mark.check("GPU-04")
def test_xid_scan(verdict: Verdict) -> None:
    """No fatal Xid in the kernel log."""
    assert_passed(verdict)


@pytest.mark.check("GPU-05")
def test_clock_events(verdict: Verdict) -> None:
    """No hardware slowdown, hardware thermal slowdown or power brake."""
    assert_passed(verdict)


@pytest.mark.check("GPU-06")
def test_temperature(verdict: Verdict) -> None:
    """Every GPU has headroom below its max operating temperature."""
    assert_passed(verdict)


@pytest.mark.check("GPU-07")
def test_power_limit(verdict: Verdict) -> None:
    """The enforced power limit is the default (nobody capped the GPU)."""
    assert_passed(verdict)


@pytest.mark.check("GPU-08")
def test_pcie_link(verdict: Verdict) -> None:
    """Every GPU links at Gen5 x16."""
    assert_passed(verdict)


@pytest.mark.check("GPU-10")
def test_nvlink_links(verdict: Verdict) -> None:
    """18/18 NVLink links active on every GPU."""
    assert_passed(verdict)


@pytest.mark.check("GPU-11")
def test_nvlink_errors(verdict: Verdict) -> None:
    """NVLink replay/recovery/CRC counters within limits."""
    assert_passed(verdict)


@pytest.mark.check("GPU-14")
def test_no_silent_data_corruption(verdict: Verdict) -> None:
    """Every GPU's deterministic kernels (matmuls, elementwise, reductions) return the run's majority digest."""
    assert_passed(verdict)
