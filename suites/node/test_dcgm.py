"""NVIDIA DCGM (GPU-12, GPU-13): the passive health watches and the level-1 deployment diag.

A node type whose topology declares no DCGM (``dcgm: {required: false}``) stands aside with that reason
(gate.json ``not_applicable``); where DCGM is expected, a missing ``dcgmi`` or a silent ``nv-hostengine``
is incomplete, never a pass.
"""

import pytest

from burnin.checks import load_all
from burnin.checks.base import not_applicable_reason
from burnin.evaluate.verdict import Verdict
from burnin.suite import assert_passed, not_applicable
from burnin.topology.model import Topology


@pytest.fixture
def dcgm_declared(request: pytest.FixtureRequest, topology: Topology) -> None:
    """Stand aside, with the topology's reason, where the node type declares it runs no DCGM.

    Requested before ``verdict``, so such a node is never judged on DCGM's answers.
    """
    load_all()  # the checks declare their applicability when imported; this module's tests may run first
    marker = request.node.get_closest_marker("check")
    reason = not_applicable_reason(str(marker.args[0]), topology) if marker and marker.args else None
    if reason is not None:
        not_applicable(reason)


@pytest.mark.check("GPU-12")
def test_dcgm_health(dcgm_declared: None, verdict: Verdict) -> None:
    """`dcgmi health -c`: Overall Health Healthy (no PCIe, memory, InfoROM, thermal, power or NVLink incident)."""
    assert_passed(verdict)


@pytest.mark.check("GPU-13")
def test_dcgm_quick_diag(dcgm_declared: None, verdict: Verdict) -> None:
    """`dcgmi diag -r 1`: every DCGM deployment test passes."""
    assert_passed(verdict)
