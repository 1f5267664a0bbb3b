"""A check whose data is missing is incomplete, never pass."""

from __future__ import annotations

import pytest

from burnin.checks import load_all
from burnin.evaluate.verdict import Status
from burnin.facts import Facts
from burnin.topology.model import Topology

SOURCES = ("nvml", "pci", "infiniband", "numa", "kernel", "nvidia-smi-topo", "ibstat", "dmesg", "lspci",
           "fabricmanager")


def _all_sources_failed() -> Facts:
    return Facts("n1", {
        "schema": 1,
        "sources": {s: {"ok": False, "error": f"{s} timed out after 5 s", "duration_s": 5.0} for s in SOURCES},
        "commands": {},
    })


@pytest.mark.parametrize("check_id", sorted(load_all()))
def test_every_check_is_incomplete_without_data(check_id: str, h100_topology: Topology) -> None:
    verdict = load_all()[check_id].func(_all_sources_failed(), h100_topology)
    assert verdict.status is Status.INCOMPLETE, verdict
    assert "timed out" in verdict.reason or "not collected" in verdict.reason


@pytest.mark.parametrize("check_id", sorted(load_all()))
def test_every_check_is_incomplete_on_unreachable_node(check_id: str, h100_topology: Topology) -> None:
    facts = Facts.unreachable_node("n1", "ssh: connect to 127.0.1.6:22: connection refused")
    verdict = load_all()[check_id].func(facts, h100_topology)
    assert verdict.status is Status.INCOMPLETE
    assert "connection refused" in verdict.reason


def test_empty_gpu_list_is_not_a_pass(h100_topology: Topology) -> None:
    facts = Facts("n1", {"sources": {"nvml": {"ok": True, "error": None}},
                         "nvml": {"driver_version": "535.183.01", "device_count": 0, "gpus": []}})
    for check_id in ("INV-06", "INV-07", "INV-08", "GPU-01", "GPU-10"):
        assert load_all()[check_id].func(facts, h100_topology).status is not Status.PASS
    inventory = load_all()["INV-01"].func(facts, h100_topology)
    assert inventory.status is Status.FAIL and "0 GPUs" in inventory.reason


def test_garbage_kernel_log_is_incomplete_with_excerpt(h100_topology: Topology) -> None:
    facts = Facts("n1", {
        "sources": {"dmesg": {"ok": False, "error": "dmesg exited 1", "duration_s": 0.0}},
        "commands": {"dmesg": {"argv": ["dmesg"], "exit_status": 1, "stdout": "",
                               "stderr": "dmesg: read kernel buffer failed: Operation not permitted",
                               "error": None}},
    })
    verdict = load_all()["GPU-04"].func(facts, h100_topology)
    assert verdict.status is Status.INCOMPLETE
    assert "Operation not permitted" in verdict.reason
