"""The host software stack (INV-10): kernel, OFED, NCCL and DCGM at the topology's golden versions."""

import pytest

from burnin.evaluate.verdict import Verdict
from burnin.suite import assert_passed


@pytest.mark.check("INV-10")
def test_software_manifest(declared_applicable: None, verdict: Verdict) -> None:
    """Every component the topology's software manifest names runs at its version on the node."""
    assert_passed(verdict)
