"""Storage-fabric isolation (STO): storage rides the BlueField fabric, NCCL the compute HCAs, nothing leaks.

A node type whose topology has no storage fabric declares these checks not
applicable (gate.json ``not_applicable`` with the topology's reason); they are
never skipped.
"""

import pytest

from burnin.evaluate.verdict import Verdict
from burnin.suite import assert_passed


@pytest.mark.check("STO-01")
def test_storage_routes_via_bluefield(declared_applicable: None, verdict: Verdict) -> None:
    """Every storage target is routed through a BlueField netdev (in the storage VRF or table when designed)."""
    assert_passed(verdict)


@pytest.mark.check("STO-02")
def test_nccl_uses_compute_hcas_only(declared_applicable: None, verdict: Verdict) -> None:
    """/etc/nccl.conf and the environment select exactly the compute HCAs, never a storage device."""
    assert_passed(verdict)


@pytest.mark.check("STO-04")
def test_storage_mtu(declared_applicable: None, verdict: Verdict) -> None:
    """Every BlueField netdev runs the designed MTU (9000)."""
    assert_passed(verdict)


@pytest.mark.check("STO-05")
def test_storage_roce_qos(declared_applicable: None, verdict: Verdict) -> None:
    """Trust mode, PFC and ECN of the BlueField netdevs match the topology's RoCE QoS profile."""
    assert_passed(verdict)


@pytest.mark.check("STO-06")
def test_bluefield_mode(declared_applicable: None, verdict: Verdict) -> None:
    """Each BlueField runs in the designed operating mode (DPU or NIC)."""
    assert_passed(verdict)


@pytest.mark.check("STO-07")
def test_no_cross_fabric_leaks(declared_applicable: None, verdict: Verdict) -> None:
    """rp_filter/arp_ignore/arp_announce as designed; compute and storage subnets disjoint."""
    assert_passed(verdict)
