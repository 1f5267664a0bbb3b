"""Inventory and configuration (INV): what is installed on the node and how it is set."""

import pytest

from burnin.evaluate.verdict import Verdict
from burnin.suite import assert_passed


@pytest.mark.check("INV-01")
def test_gpu_inventory(verdict: Verdict) -> None:
    """All GPUs enumerate with the expected model and full memory; none is lost."""
    assert_passed(verdict)


@pytest.mark.check("INV-02")
def test_gpu_firmware(verdict: Verdict) -> None:
    """Every GPU runs the same VBIOS and InfoROM, the topology's qualified versions where it names them."""
    assert_passed(verdict)


@pytest.mark.check("INV-03")
def test_driver_version(verdict: Verdict) -> None:
    """NVML and the kernel module run the topology's driver version."""
    assert_passed(verdict)


@pytest.mark.check("INV-04")
def test_fabric_manager(verdict: Verdict) -> None:
    """nvidia-fabricmanager is active and every GPU finished fabric registration."""
    assert_passed(verdict)


@pytest.mark.check("INV-05")
def test_peermem_module(verdict: Verdict) -> None:
    """nvidia_peermem is loaded (GPUDirect RDMA)."""
    assert_passed(verdict)


@pytest.mark.check("INV-06")
def test_persistence_mode(verdict: Verdict) -> None:
    """Persistence mode is on for every GPU."""
    assert_passed(verdict)


@pytest.mark.check("INV-07")
def test_mig_disabled(verdict: Verdict) -> None:
    """MIG is off now and after the next reset."""
    assert_passed(verdict)


@pytest.mark.check("INV-08")
def test_ecc_enabled(verdict: Verdict) -> None:
    """ECC is on now and after the next reset."""
    assert_passed(verdict)
