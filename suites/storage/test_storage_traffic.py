"""Storage traffic (STO-03): the storage suite's phase wrote and read each storage mount; the bytes rode the
BlueField netdevs, and the compute HCAs moved less than 1% of them."""

import pytest

from burnin.evaluate.verdict import Verdict
from burnin.suite import assert_passed


@pytest.mark.check("STO-03")
def test_storage_io_rides_the_bluefield_fabric(verdict: Verdict) -> None:
    """Compute HCAs moved < 1% of the bytes written; the BlueField netdevs transmitted them."""
    assert_passed(verdict)
