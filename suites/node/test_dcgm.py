"""NVIDIA DCGM (GPU-12, GPU-13): the passive health watches and the level-1 deployment diag.

A node type whose topology declares no DCGM (``dcgm: {required: false}``) stands aside with that reason
(gate.json ``not_applicable``); where DCGM is expected, a missing ``dcgmi`` or a silent ``nv-hostengine``
is incomplete, never a pass.
"""

import pytest

from burnin.evaluate.verdict import Verdict
from burnin.suite import assert_passed


@pytest.mark.check("GPU-12")
def test_dcgm_health(declared_applicable: None, verdict: Verdict) -> None:
    """`dcgmi health -c`: Overall Health Healthy (no PCIe, memory, InfoROM, thermal, power or NVLink incident)."""
    assert_passed(verdict)


@pytest.mark.check("GPU-13")
def test_dcgm_quick_diag(declared_applicable: None, verdict: Verdict) -> None:
    """`dcgmi diag -r 1`: every DCGM deployment test passes."""
    assert_passed(verdict)
