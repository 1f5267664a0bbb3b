"""Helpers for the node-check tables: reach into a facts document and judge it.

The facts come from a healthy simulated node read by the real collector (see
conftest.py); each test deep-copies them and changes exactly what it is about.
"""

from __future__ import annotations

from typing import Any

from burnin.checks import load_all
from burnin.evaluate.verdict import Status, Verdict
from burnin.facts import Facts
from burnin.topology.load import find_topology
from burnin.topology.model import Topology

TOPOLOGY: Topology = find_topology("hgx-h100-8gpu")
GPU_INDEXES = tuple(d.index for d in TOPOLOGY.gpus.devices)
COMPUTE_HCAS = tuple(h.name for h in TOPOLOGY.compute_hcas)
STORAGE_HCAS = tuple(h.name for h in TOPOLOGY.storage_hcas)
NODE = "sim01"

PASS, FAIL, INCOMPLETE = Status.PASS, Status.FAIL, Status.INCOMPLETE


def judge(check_id: str, data: dict[str, Any], topology: Topology = TOPOLOGY) -> Verdict:
    """The verdict of one registered check on ``data``."""
    return load_all()[check_id].func(Facts(NODE, data), topology)


def gpu(data: dict[str, Any], index: int) -> dict[str, Any]:
    """The NVML facts of the GPU in the topology's slot ``index`` (found by bus id)."""
    bus = TOPOLOGY.gpus.devices[index].bus_id
    found: dict[str, Any] = next(g for g in data["nvml"]["gpus"] if g.get("bus_id") == bus)
    return found


def port(data: dict[str, Any], hca: str) -> dict[str, Any]:
    """Port 1 of ``hca`` in the infiniband facts."""
    found: dict[str, Any] = data["infiniband"]["hcas"][hca]["ports"]["1"]
    return found


def pci(data: dict[str, Any], bus_id: str) -> dict[str, Any]:
    found: dict[str, Any] = data["pci"]["devices"][bus_id]
    return found


def gpu_bus(index: int) -> str:
    return TOPOLOGY.gpus.devices[index].bus_id


def hca_bus(name: str) -> str:
    return next(h.bus_id for h in TOPOLOGY.hcas if h.name == name)


def assert_status(verdict: Verdict, status: Status, *needles: str) -> None:
    """``verdict`` has ``status`` and its reason mentions every needle."""
    assert verdict.status is status, verdict
    for needle in needles:
        assert needle in verdict.reason, (needle, verdict.reason)


def failing_subjects(verdict: Verdict) -> set[str]:
    return {f.subject for f in verdict.findings if f.status is FAIL}


def unmeasured_subjects(verdict: Verdict) -> set[str]:
    return {f.subject for f in verdict.findings if f.status is INCOMPLETE}
