"""Topology and host configuration (TOP): NUMA, affinity, PCIe paths, ACS, IOMMU."""

import pytest

from burnin.evaluate.verdict import Verdict
from burnin.suite import assert_passed


@pytest.mark.check("TOP-01")
def test_numa_nodes(verdict: Verdict) -> None:
    """Every GPU and HCA sits on the NUMA node the topology says."""
    assert_passed(verdict)


@pytest.mark.check("TOP-02")
def test_cpu_affinity(verdict: Verdict) -> None:
    """Each GPU's local CPUs are its NUMA node's CPUs."""
    assert_passed(verdict)


@pytest.mark.check("TOP-03")
def test_gpu_nic_pairing(verdict: Verdict) -> None:
    """Each GPU shares a PCIe switch with its compute HCA (PIX)."""
    assert_passed(verdict)


@pytest.mark.check("TOP-04")
def test_acs_disabled(verdict: Verdict) -> None:
    """ACS is off on the switch ports in GPU and HCA paths."""
    assert_passed(verdict)


@pytest.mark.check("TOP-05")
def test_iommu_mode(verdict: Verdict) -> None:
    """The IOMMU is off or in passthrough."""
    assert_passed(verdict)


@pytest.mark.check("TOP-08")
def test_numa_balancing(verdict: Verdict) -> None:
    """Automatic NUMA balancing is off."""
    assert_passed(verdict)
