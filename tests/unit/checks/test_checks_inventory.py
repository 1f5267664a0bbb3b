"""INV-01..INV-08, table-driven: counts and memory at their bounds, each setting on every GPU."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from checks_support import (
    FAIL,
    GPU_INDEXES,
    INCOMPLETE,
    PASS,
    TOPOLOGY,
    assert_status,
    failing_subjects,
    gpu,
    judge,
    unmeasured_subjects,
)

from burnin.evaluate.verdict import Status

Facts = dict[str, Any]


def _set(*path: str, value: object) -> Callable[[dict[str, Any]], None]:
    def change(g: dict[str, Any]) -> None:
        target = g
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return change


PER_GPU: list[tuple[str, str, Callable[[dict[str, Any]], None], Status]] = [
    # INV-01: model and memory (>= 81000 MiB)
    ("INV-01", "memory 81000", _set("memory_total_mib", value=81000), PASS),
    ("INV-01", "memory 81001", _set("memory_total_mib", value=81001), PASS),
    ("INV-01", "memory 80999", _set("memory_total_mib", value=80999), FAIL),
    ("INV-01", "model H800", _set("name", value="NVIDIA H800 80GB HBM3"), FAIL),
    ("INV-01", "lost", _set("lost", value=True), FAIL),
    # INV-04: fabric registration Completed (3) with status 0
    ("INV-04", "fabric in progress", _set("fabric", "state", value=2), FAIL),
    ("INV-04", "fabric not started", _set("fabric", "state", value=1), FAIL),
    ("INV-04", "fabric status error", _set("fabric", "status", value=1), FAIL),
    # INV-06..08: settings, current and pending
    ("INV-06", "persistence off", _set("persistence_mode", value=False), FAIL),
    ("INV-07", "MIG on", _set("mig_mode", "current", value=1), FAIL),
    ("INV-07", "MIG pending", _set("mig_mode", "pending", value=1), FAIL),
    ("INV-08", "ECC off", _set("ecc_mode", "current", value=False), FAIL),
    ("INV-08", "ECC off pending", _set("ecc_mode", "pending", value=False), FAIL),
]


@pytest.mark.parametrize(("check_id", "what", "change", "status"), PER_GPU,
                         ids=[f"{c}-{w}" for c, w, _, _ in PER_GPU])
@pytest.mark.parametrize("index", GPU_INDEXES)
def test_setting_on_every_gpu(facts: Facts, check_id: str, what: str, change: Callable[[dict[str, Any]], None],
                              status: Status, index: int) -> None:
    change(gpu(facts, index))
    verdict = judge(check_id, facts)
    assert verdict.status is status, (what, verdict.reason)
    if status is FAIL:
        assert failing_subjects(verdict) == {f"gpu{index}"}, verdict.reason


@pytest.mark.parametrize(("count", "status"), [(7, FAIL), (8, PASS), (9, FAIL), (0, FAIL)])
def test_gpu_count_at_and_around_the_topology(facts: Facts, count: int, status: Status) -> None:
    gpus = facts["nvml"]["gpus"]
    while len(gpus) > count:
        gpus.pop()
    while len(gpus) < count:
        gpus.append({**gpus[0], "index": len(gpus), "bus_id": f"0000:e{len(gpus)}:00.0"})
    facts["nvml"]["device_count"] = count
    verdict = judge("INV-01", facts)
    assert verdict.status is status, verdict.reason
    if status is FAIL:
        assert f"{count} GPUs" in verdict.reason


@pytest.mark.parametrize("index", GPU_INDEXES)
def test_missing_gpu_is_named_by_its_slot(facts: Facts, index: int) -> None:
    del facts["nvml"]["gpus"][index]
    for number, entry in enumerate(facts["nvml"]["gpus"]):
        entry["index"] = number  # NVML renumbers the GPUs it still sees
    facts["nvml"]["device_count"] = 7
    bus = TOPOLOGY.gpus.devices[index].bus_id
    assert_status(judge("INV-01", facts), FAIL, f"7 GPUs, missing gpu{index} ({bus})")
    for check_id in ("GPU-01", "INV-06"):
        verdict = judge(check_id, facts)
        assert verdict.status is INCOMPLETE and unmeasured_subjects(verdict) == {f"gpu{index}"}, verdict.reason


def test_gpu_in_a_slot_the_topology_does_not_have_fails(facts: Facts) -> None:
    gpu(facts, 2)["bus_id"] = "0000:e0:00.0"
    assert_status(judge("INV-01", facts), FAIL, "at 0000:e0:00.0, not a GPU slot")


@pytest.mark.parametrize(("change", "status", "needle"), [
    (lambda f: f["nvml"].update(driver_version="535.161.08"), FAIL, "NVML driver 535.161.08"),
    (lambda f: f["kernel"].update(nvidia_module_version="535.161.08"), FAIL, "kernel module 535.161.08"),
    (lambda f: f["kernel"].update(nvidia_module_version=None), INCOMPLETE, "/sys/module/nvidia/version"),
    (lambda f: f["nvml"].update(driver_version=None), INCOMPLETE, "NVML reported no driver version"),
    (lambda f: (f["nvml"].update(driver_version=None), f["kernel"].update(nvidia_module_version="1.0")),
     FAIL, "kernel module 1.0"),
])
def test_driver_versions(facts: Facts, change: Callable[[Facts], object], status: Status, needle: str) -> None:
    change(facts)
    assert_status(judge("INV-03", facts), status, needle)


@pytest.mark.parametrize(("stdout", "exit_status", "status"), [
    ("active\n", 0, PASS), ("inactive\n", 3, FAIL), ("failed\n", 3, FAIL), ("", 3, FAIL), ("activating\n", 3, FAIL),
])
def test_fabric_manager_service(facts: Facts, stdout: str, exit_status: int, status: Status) -> None:
    facts["commands"]["fabricmanager"].update(stdout=stdout, exit_status=exit_status)
    verdict = judge("INV-04", facts)
    assert verdict.status is status, verdict.reason
    if status is FAIL:
        assert failing_subjects(verdict) == {"fabricmanager"}


def test_fabric_manager_not_collected_is_unmeasured(facts: Facts) -> None:
    del facts["commands"]["fabricmanager"]
    assert_status(judge("INV-04", facts), INCOMPLETE, "not collected")


@pytest.mark.parametrize(("modules", "status"), [
    ({"nvidia_peermem": True, "nv_peer_mem": False}, PASS),
    ({"nvidia_peermem": False, "nv_peer_mem": True}, PASS),
    ({"nvidia_peermem": False, "nv_peer_mem": False}, FAIL),
    ({"nvidia": True}, INCOMPLETE),
    ({}, INCOMPLETE),
])
def test_peermem(facts: Facts, modules: dict[str, bool], status: Status) -> None:
    facts["kernel"]["modules"] = modules
    assert judge("INV-05", facts).status is status


def test_peermem_module_list_absent_is_unmeasured(facts: Facts) -> None:
    del facts["kernel"]["modules"]
    assert_status(judge("INV-05", facts), INCOMPLETE, "nvidia_peermem")


@pytest.mark.parametrize("missing", [0, 3])
def test_gpus_are_named_by_their_slot_when_nvml_renumbers(facts: Facts, missing: int) -> None:
    """With a GPU missing NVML renumbers the rest; findings keep the topology's slot names."""
    del facts["nvml"]["gpus"][missing]
    for number, entry in enumerate(facts["nvml"]["gpus"]):
        entry["index"] = number
    facts["nvml"]["device_count"] = 7
    gpu(facts, 5)["power"]["enforced_limit_mw"] = 450_000  # NVML index 4 now
    verdict = judge("GPU-07", facts)
    assert failing_subjects(verdict) == {"gpu5"}
    assert unmeasured_subjects(verdict) == {f"gpu{missing}"}


def test_gpu_in_a_foreign_slot_is_still_judged_by_the_per_gpu_checks(facts: Facts) -> None:
    """INV-01 fails the slot; the other checks judge the GPU NVML answered for, by its NVML index."""
    gpu(facts, 6)["bus_id"] = "0000:e0:00.0"
    assert judge("INV-01", facts).status is FAIL
    for check_id in ("GPU-01", "GPU-07", "INV-06"):
        verdict = judge(check_id, facts)
        assert verdict.status is PASS and len(verdict.findings) == 8, verdict.reason


@pytest.mark.parametrize("bus_id", [["0000:18:00.0"], {"bus": 1}, 24, None])
def test_a_gpu_whose_bus_id_is_no_text_is_named_by_its_nvml_index(facts: Facts, bus_id: object) -> None:
    """An unreadable bus id matches no slot (never an error): the GPU is judged under its NVML index."""
    entry = gpu(facts, 6)
    entry["bus_id"] = bus_id
    entry["power"]["enforced_limit_mw"] = 450_000
    verdict = judge("GPU-07", facts)
    assert verdict.status is FAIL and failing_subjects(verdict) == {"gpu6"}, verdict.reason


def test_more_gpus_than_the_topology_are_all_judged(facts: Facts) -> None:
    gpus = facts["nvml"]["gpus"]
    gpus.append({**copy.deepcopy(gpus[0]), "index": 8, "bus_id": "0000:e8:00.0"})
    gpus[8]["ecc_errors"]["volatile_uncorrected"] = 1
    facts["nvml"]["device_count"] = 9
    verdict = judge("GPU-01", facts)
    assert verdict.status is FAIL and failing_subjects(verdict) == {"gpu8"}


def test_gpu_whose_handle_nvml_refused_is_unmeasured_with_the_error(facts: Facts) -> None:
    g = gpu(facts, 2)
    for key in list(g):
        if key not in ("index", "errors", "lost", "bus_id"):
            del g[key]
    g["errors"] = {"handle": "NVML_ERROR_UNKNOWN"}
    for check_id in ("GPU-05", "INV-06", "INV-01"):
        verdict = judge(check_id, facts)
        assert_status(verdict, INCOMPLETE, "gpu2", "NVML_ERROR_UNKNOWN")
