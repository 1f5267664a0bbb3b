"""HCAs of the node: firmware and PSID (INV-09), PCIe link (IB-06), MTU and partition keys (IB-09)."""

import pytest

from burnin.evaluate.verdict import Verdict
from burnin.suite import assert_passed


@pytest.mark.check("INV-09")
def test_hca_firmware(verdict: Verdict) -> None:
    """Every HCA sits at its bus id; the compute HCAs run the qualified firmware, all with one PSID."""
    assert_passed(verdict)


@pytest.mark.check("IB-06")
def test_hca_pcie_link(verdict: Verdict) -> None:
    """Every compute HCA's PCIe link trained at Gen5 x16."""
    assert_passed(verdict)


@pytest.mark.check("IB-09")
def test_ib_mtu_and_partitions(verdict: Verdict) -> None:
    """Every compute port runs MTU 4096 and holds the site's partition keys."""
    assert_passed(verdict)
