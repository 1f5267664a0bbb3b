"""InfiniBand compute fabric (IB): port state, rate, link layer, error counters and the subnet manager."""

import pytest

from burnin.evaluate.verdict import Verdict
from burnin.suite import assert_passed


@pytest.mark.check("IB-01")
def test_ib_port_state(verdict: Verdict) -> None:
    """Every compute port is ACTIVE and LinkUp."""
    assert_passed(verdict)


@pytest.mark.check("IB-02")
def test_ib_port_rate(verdict: Verdict) -> None:
    """Every compute port runs at NDR 400 Gb/s."""
    assert_passed(verdict)


@pytest.mark.check("IB-03")
def test_ib_link_layer(verdict: Verdict) -> None:
    """Compute HCAs are InfiniBand, storage HCAs Ethernet."""
    assert_passed(verdict)


@pytest.mark.check("IB-04")
def test_ib_error_counters(verdict: Verdict) -> None:
    """No link-down or integrity errors; symbol/recovery/receive errors within limits."""
    assert_passed(verdict)


@pytest.mark.check("IB-05")
def test_ib_subnet_manager(declared_applicable: None, verdict: Verdict) -> None:
    """Every compute InfiniBand port has a LID and an SM LID, the same SM LID on all of them."""
    assert_passed(verdict)
