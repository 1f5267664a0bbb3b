"""Host configuration and population (TOP-06, 07, 09, 10): CPU governors, hugepages, memory and CPUs, PCI census."""

import pytest

from burnin.evaluate.verdict import Verdict
from burnin.suite import assert_passed


@pytest.mark.check("TOP-06")
def test_cpu_governor(verdict: Verdict) -> None:
    """Every online CPU runs the designed cpufreq governor."""
    assert_passed(verdict)


@pytest.mark.check("TOP-07")
def test_hugepages(verdict: Verdict) -> None:
    """Transparent hugepages and static hugepage pools are as designed."""
    assert_passed(verdict)


@pytest.mark.check("TOP-09")
def test_host_population(verdict: Verdict) -> None:
    """Host memory and online CPUs are as designed, and memory is balanced across NUMA nodes."""
    assert_passed(verdict)


@pytest.mark.check("TOP-10")
def test_pci_census(verdict: Verdict) -> None:
    """The GPUs, NVSwitches, HCAs, storage NICs and NVMe drives of the design are on the PCI bus."""
    assert_passed(verdict)
