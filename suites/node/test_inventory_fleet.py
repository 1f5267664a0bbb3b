"""Fleet consistency (INV-11): the node's inventory as on most of the run's nodes of its type."""

import pytest

from burnin.evaluate.verdict import Verdict
from burnin.suite import assert_passed


@pytest.mark.check("INV-11")
def test_fleet_consistency(verdict: Verdict) -> None:
    """Driver, CUDA, kernel module, GPU model, VBIOS, InfoROM and HCA firmware/PSID as on the fleet's mode."""
    assert_passed(verdict)
