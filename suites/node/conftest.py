"""Fixtures of the node suite."""

import pytest

from burnin.checks.base import not_applicable_reason
from burnin.suite import not_applicable
from burnin.topology.model import Topology


@pytest.fixture
def declared_applicable(request: pytest.FixtureRequest, topology: Topology) -> None:
    """Stand aside, with the topology's reason, where the node type declares the test's check not applicable.

    Requested before ``verdict``: a RoCE-only node type is never judged on a subnet manager (IB-05), a node
    type without a software manifest never on one (INV-10), one without a storage fabric never on it (STO),
    one that runs no DCGM never on DCGM's answers (GPU-12, GPU-13).
    """
    marker = request.node.get_closest_marker("check")
    reason = not_applicable_reason(str(marker.args[0]), topology) if marker and marker.args else None
    if reason is not None:
        not_applicable(reason)
