"""INV-11 fleet consistency: a node's inventory against the mode of the run's nodes of its type.

Each test builds a fleet from copies of a healthy simulated node's facts (conftest.py), changes some
nodes' inventory, counts the fleet as the node suite's phase does, and judges INV-11 on every node.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from checks_support import FAIL, INCOMPLETE, PASS, TOPOLOGY, assert_status, gpu

from burnin.checks import load_all
from burnin.checks.fleet import FIELDS, MIN_FLEET, NAMED_NODES, Reading, fleet_sections, judge_field, read_inventory
from burnin.evaluate.verdict import Status, Verdict
from burnin.facts import Facts
from burnin.phases import PhaseContext, load_phase
from burnin.topology.model import Topology

Doc = dict[str, Any]
DRIVER = "535.183.01"  # the simulated node's (the topology's)
OTHER_DRIVER = "550.54.15"
EXPECTED_8 = "(expected as on most of the run's 8 hgx-h100-8gpu nodes)"


def names(count: int) -> list[str]:
    return [f"sim{i:02d}" for i in range(1, count + 1)]


def judge_fleet(docs: dict[str, Doc], topologies: dict[str, Topology] | None = None) -> dict[str, Verdict]:
    """Count the fleet as the phase does, then judge INV-11 on every node."""
    facts = {node: Facts(node, doc) for node, doc in docs.items()}
    types = topologies or dict.fromkeys(docs, TOPOLOGY)
    for node, section in fleet_sections(facts, types).items():
        facts[node].data["fleet"] = section
    check = load_all()["INV-11"].func
    return {node: check(node_facts, types[node]) for node, node_facts in facts.items()}


def fleet(healthy: Doc, count: int, change: dict[str, Callable[[Doc], None]] | None = None) -> dict[str, Doc]:
    docs = {node: copy.deepcopy(healthy) for node in names(count)}
    for node, mutate in (change or {}).items():
        mutate(docs[node])
    return docs


def driver(value: str) -> Callable[[Doc], None]:
    def mutate(doc: Doc) -> None:
        doc["nvml"]["driver_version"] = value
    return mutate


def statuses(verdicts: dict[str, Verdict]) -> dict[str, Status]:
    return {node: v.status for node, v in verdicts.items()}


# ---------------------------------------------------------------- the mode


def test_a_healthy_fleet_passes_whole_and_says_what_it_runs(healthy_facts: Doc) -> None:
    verdicts = judge_fleet(fleet(healthy_facts, 8))
    assert set(statuses(verdicts).values()) == {PASS}
    assert verdicts["sim01"].reason == (
        "INV-11 ok: driver 535.183.01, CUDA 12.2, kernel module 535.183.01, GPU model NVIDIA H100 80GB HBM3, "
        "VBIOS 96.00.74.00.01, InfoROM G520.0200.00.05, compute HCA firmware 28.41.1000, compute HCA PSID "
        "MT_0000000838, storage HCA firmware 32.38.3056, storage HCA PSID MT_0000000884, kernel 5.15.0-112-generic, "
        "OFED MLNX_OFED_LINUX-24.04-0.6.6.0, NCCL 2.21.5, DCGM 3.3.5 + hostengine 3.3.5; the fleet's on every field "
        "(8 hgx-h100-8gpu nodes in the run)")


def test_the_node_off_the_mode_fails_naming_field_value_and_fleet(healthy_facts: Doc) -> None:
    verdicts = judge_fleet(fleet(healthy_facts, 8, {"sim03": driver(OTHER_DRIVER)}))
    assert verdicts["sim03"].status is FAIL
    assert verdicts["sim03"].reason == f"INV-11 driver {OTHER_DRIVER} (fleet: {DRIVER} on 7 of 8 nodes) {EXPECTED_8}"
    assert {n for n, s in statuses(verdicts).items() if s is not PASS} == {"sim03"}


def _set_gpu(path: tuple[str, ...], value: str) -> Callable[[Doc], None]:
    def mutate(doc: Doc) -> None:
        for index in range(TOPOLOGY.gpus.count):
            target = gpu(doc, index)
            for key in path[:-1]:
                target = target[key]
            target[path[-1]] = value
    return mutate


def _set_hcas(role: str, key: str, value: str) -> Callable[[Doc], None]:
    def mutate(doc: Doc) -> None:
        for hca in TOPOLOGY.hcas:
            if hca.role == role:
                doc["infiniband"]["hcas"][hca.name][key] = value
    return mutate


def _all(*changes: Callable[[Doc], None]) -> Callable[[Doc], None]:
    def mutate(doc: Doc) -> None:
        for change in changes:
            change(doc)
    return mutate


def _tool(key: str, stdout: str) -> Callable[[Doc], None]:
    def mutate(doc: Doc) -> None:
        doc["software"][key]["stdout"] = stdout
    return mutate


def _nccl(*files: str) -> Callable[[Doc], None]:
    def mutate(doc: Doc) -> None:
        doc["software"]["nccl"]["libraries"] = [{"path": f"/usr/lib/x86_64-linux-gnu/{f}", "file": f,
                                                 "real_path": f"/usr/lib/x86_64-linux-gnu/{f}"} for f in files]
    return mutate


def _not_found(key: str) -> Callable[[Doc], None]:
    def mutate(doc: Doc) -> None:
        doc["software"][key] = {"argv": [key], "exit_status": None, "stdout": "", "stderr": "",
                                "error": f"{key}: command not found"}
    return mutate


def _set(section: str, key: str, value: object) -> Callable[[Doc], None]:
    def mutate(doc: Doc) -> None:
        doc[section][key] = value
    return mutate


# field key -> (how one node differs, what INV-11 says about it)
EVERY_FIELD: dict[str, tuple[Callable[[Doc], None], str]] = {
    "driver": (driver(OTHER_DRIVER), f"driver {OTHER_DRIVER} (fleet: {DRIVER} on 5 of 6 nodes)"),
    "cuda": (_set("nvml", "cuda_driver_version", 12040), "CUDA 12.4 (fleet: 12.2 on 5 of 6 nodes)"),
    "nvidia_module": (_set("kernel", "nvidia_module_version", "535.161.08"),
                      f"kernel module 535.161.08 (fleet: {DRIVER} on 5 of 6 nodes)"),
    "gpu_model": (_set_gpu(("name",), "NVIDIA H800"), "GPU model NVIDIA H800 (fleet: NVIDIA H100 80GB HBM3 on 5 "),
    "vbios": (_set_gpu(("vbios",), "96.00.89.00.01"), "VBIOS 96.00.89.00.01 (fleet: 96.00.74.00.01 on 5 of 6"),
    "inforom": (_set_gpu(("inforom", "image"), "G520.0200.00.04"),
                "InfoROM G520.0200.00.04 (fleet: G520.0200.00.05 on 5 of 6 nodes)"),
    "compute_hca_firmware": (_set_hcas("compute", "fw_ver", "28.39.4082"),
                             "compute HCA firmware 28.39.4082 (fleet: 28.41.1000 on 5 of 6 nodes)"),
    "compute_hca_psid": (_set_hcas("compute", "board_id", "MT_0000000970"),
                         "compute HCA PSID MT_0000000970 (fleet: MT_0000000838 on 5 of 6 nodes)"),
    "storage_hca_firmware": (_set_hcas("storage", "fw_ver", "32.41.1000"),  # held to the topology's, not the fleet's
                             "storage HCA firmware 32.41.1000 (not the topology's)"),
    "storage_hca_psid": (_set_hcas("storage", "board_id", "MT_0000000999"),
                         "storage HCA PSID MT_0000000999 (fleet: MT_0000000884 on 5 of 6 nodes)"),
    "kernel": (_set("software", "kernel_release", "5.15.0-91-generic"),
               "kernel 5.15.0-91-generic (fleet: 5.15.0-112-generic on 5 of 6 nodes)"),
    "ofed": (_tool("ofed_info", "MLNX_OFED_LINUX-23.10-1.1.9.0:\n"),
             "OFED MLNX_OFED_LINUX-23.10-1.1.9.0 (fleet: MLNX_OFED_LINUX-24.04-0.6.6.0 on 5 of 6 nodes)"),
    "nccl": (_nccl("libnccl.so.2.18.5"), "NCCL 2.18.5 (fleet: 2.21.5 on 5 of 6 nodes)"),
    "dcgm": (_tool("dcgmi", "Version : 3.3.1\n"), "DCGM 3.3.1 (fleet: 3.3.5 + hostengine 3.3.5 on 5 of 6 nodes)"),
}


def test_every_field_is_covered_here() -> None:
    assert set(EVERY_FIELD) == {field.key for field in FIELDS}


@pytest.mark.parametrize("key", list(EVERY_FIELD))
def test_every_field_off_the_mode_fails_that_node_only(healthy_facts: Doc, key: str) -> None:
    mutate, needle = EVERY_FIELD[key]
    verdicts = judge_fleet(fleet(healthy_facts, 6, {"sim05": mutate}))
    assert_status(verdicts["sim05"], FAIL, f"INV-11 {needle}")
    measured = verdicts["sim05"].measured
    assert measured.count("(fleet:") + measured.count("(not the topology's)") == 1, verdicts["sim05"].reason
    assert {n for n, s in statuses(verdicts).items() if s is not PASS} == {"sim05"}


# ---------------------------------------------------------------- the storage HCAs' golden firmware


def test_a_drifted_majority_of_storage_firmware_fails_and_the_golden_minority_passes(healthy_facts: Doc) -> None:
    """No per-node check holds the storage HCAs to the topology's firmware: INV-11 does, whatever most run."""
    drifted = _set_hcas("storage", "fw_ver", "32.41.1000")
    verdicts = judge_fleet(fleet(healthy_facts, 3, {"sim01": drifted, "sim02": drifted}))
    assert statuses(verdicts) == {"sim01": FAIL, "sim02": FAIL, "sim03": PASS}
    assert verdicts["sim01"].reason == ("INV-11 storage HCA firmware 32.41.1000 (not the topology's) (expected "
                                        "storage HCA firmware 32.38.3056 as topology hgx-h100-8gpu names it)")


def test_a_lone_node_off_the_golden_storage_firmware_fails(healthy_facts: Doc) -> None:
    verdicts = judge_fleet(fleet(healthy_facts, 1, {"sim01": _set_hcas("storage", "fw_ver", "32.41.1000")}))
    assert_status(verdicts["sim01"], FAIL, "INV-11 storage HCA firmware 32.41.1000 (not the topology's)")


def test_without_a_golden_storage_firmware_the_majority_is_the_reference(healthy_facts: Doc) -> None:
    unnamed = replace(TOPOLOGY, storage_hca_firmware=None)
    drifted = _set_hcas("storage", "fw_ver", "32.41.1000")
    verdicts = judge_fleet(fleet(healthy_facts, 3, {"sim01": drifted, "sim02": drifted}),
                           dict.fromkeys(names(3), unnamed))
    assert statuses(verdicts) == {"sim01": PASS, "sim02": PASS, "sim03": FAIL}  # what the topology must name
    assert "storage HCA firmware 32.38.3056 (fleet: 32.41.1000 on 2 of 3 nodes)" in verdicts["sim03"].reason


def test_a_node_off_both_the_fleet_and_the_golden_storage_firmware_is_told_both(healthy_facts: Doc) -> None:
    both = _all(driver(OTHER_DRIVER), _set_hcas("storage", "fw_ver", "32.41.1000"))
    verdict = judge_fleet(fleet(healthy_facts, 4, {"sim02": both}))["sim02"]
    assert verdict.reason == (f"INV-11 driver {OTHER_DRIVER} (fleet: {DRIVER} on 3 of 4 nodes); storage HCA firmware "
                              "32.41.1000 (not the topology's) (expected as on most of the run's 4 hgx-h100-8gpu "
                              "nodes; storage HCA firmware 32.38.3056 as topology hgx-h100-8gpu names it)")


def test_two_fields_off_are_both_named(healthy_facts: Doc) -> None:
    both = _all(driver(OTHER_DRIVER), _set_hcas("compute", "fw_ver", "28.39.4082"))
    verdict = judge_fleet(fleet(healthy_facts, 4, {"sim02": both}))["sim02"]
    assert verdict.measured == (f"driver {OTHER_DRIVER} (fleet: {DRIVER} on 3 of 4 nodes); compute HCA firmware "
                                "28.39.4082 (fleet: 28.41.1000 on 3 of 4 nodes)")


def test_a_node_with_mixed_gpus_is_one_value_of_both_versions(healthy_facts: Doc) -> None:
    def one_gpu(doc: Doc) -> None:
        gpu(doc, 3)["vbios"] = "96.00.74.00.0D"

    verdicts = judge_fleet(fleet(healthy_facts, 3, {"sim01": one_gpu}))
    assert_status(verdicts["sim01"], FAIL, "VBIOS 96.00.74.00.01 + 96.00.74.00.0D (fleet: 96.00.74.00.01 on 2 of 3")


# ---------------------------------------------------------------- no mode


def test_three_nodes_have_a_mode_two_do_not(healthy_facts: Doc) -> None:
    assert MIN_FLEET == 3
    three = judge_fleet(fleet(healthy_facts, 3, {"sim03": driver(OTHER_DRIVER)}))
    assert statuses(three) == {"sim01": PASS, "sim02": PASS, "sim03": FAIL}
    assert "(fleet: 535.183.01 on 2 of 3 nodes)" in three["sim03"].reason


def test_two_nodes_that_differ_are_both_incomplete_naming_the_other(healthy_facts: Doc) -> None:
    verdicts = judge_fleet(fleet(healthy_facts, 2, {"sim02": driver(OTHER_DRIVER)}))
    assert_status(verdicts["sim01"], INCOMPLETE, f"driver: {DRIVER} here, {OTHER_DRIVER} on sim02: 2 "
                                                 "hgx-h100-8gpu nodes differ and no majority says which is wrong")
    assert_status(verdicts["sim02"], INCOMPLETE, f"driver: {OTHER_DRIVER} here, {DRIVER} on sim01: 2")
    assert "could not be measured" in verdicts["sim01"].reason


def test_two_nodes_that_agree_pass(healthy_facts: Doc) -> None:
    verdicts = judge_fleet(fleet(healthy_facts, 2))
    assert statuses(verdicts) == {"sim01": PASS, "sim02": PASS}
    assert verdicts["sim01"].reason.endswith("(2 hgx-h100-8gpu nodes in the run)")


def test_a_lone_node_passes_and_says_there_was_nothing_to_compare(healthy_facts: Doc) -> None:
    verdict = judge_fleet(fleet(healthy_facts, 1))["sim01"]
    assert verdict.status is PASS
    assert verdict.reason.endswith("; the only hgx-h100-8gpu node of the run: nothing to compare with")


@pytest.mark.parametrize(("split", "wanted"), [
    ([4, 4], "(535.183.01 on 4, 550.54.15 on 4)"),  # exactly half is no majority
    ([3, 3, 2], "(535.183.01 on 3, 550.54.15 on 3, 550.90.07 on 2)"),
    ([3, 2, 2], "(535.183.01 on 3, 550.54.15 on 2, 550.90.07 on 2)"),  # a plurality is no majority either
])
def test_without_a_strict_majority_every_node_is_incomplete(healthy_facts: Doc, split: list[int],
                                                            wanted: str) -> None:
    versions = [DRIVER, OTHER_DRIVER, "550.90.07"]
    plan = [v for version, n in zip(versions, split, strict=False) for v in [version] * n]
    nodes = names(len(plan))
    verdicts = judge_fleet(fleet(healthy_facts, len(plan), {node: driver(v) for node, v in zip(nodes, plan,
                                                                                              strict=True)}))
    assert set(statuses(verdicts).values()) == {INCOMPLETE}
    assert_status(verdicts["sim01"], INCOMPLETE, f"driver: {DRIVER} here; no driver runs on most of the "
                                                 f"{len(plan)} hgx-h100-8gpu nodes {wanted}")


def test_a_strict_majority_of_five_is_a_mode(healthy_facts: Doc) -> None:
    verdicts = judge_fleet(fleet(healthy_facts, 5, {"sim04": driver(OTHER_DRIVER), "sim05": driver(OTHER_DRIVER)}))
    assert statuses(verdicts) == {"sim01": PASS, "sim02": PASS, "sim03": PASS, "sim04": FAIL, "sim05": FAIL}
    assert "(fleet: 535.183.01 on 3 of 5 nodes)" in verdicts["sim05"].reason


# ---------------------------------------------------------------- missing facts


def test_a_lost_gpu_leaves_its_fields_unmeasured_and_out_of_the_count(healthy_facts: Doc) -> None:
    def lose(doc: Doc) -> None:
        entry = gpu(doc, 3)
        entry.update(lost=True)

    verdicts = judge_fleet(fleet(healthy_facts, 4, {"sim02": lose, "sim03": driver(OTHER_DRIVER)}))
    assert_status(verdicts["sim02"], INCOMPLETE, "GPU model: gpu3 NVML_ERROR_GPU_IS_LOST",
                  "VBIOS: gpu3 NVML_ERROR_GPU_IS_LOST")
    # the node still counts for the fields it did report
    assert_status(verdicts["sim03"], FAIL, "(fleet: 535.183.01 on 3 of 4 nodes)")
    fleet_doc = fleet_sections({n: Facts(n, d) for n, d in fleet(healthy_facts, 4, {"sim02": lose}).items()},
                               dict.fromkeys(names(4), TOPOLOGY))["sim01"]
    assert fleet_doc["values"]["vbios"] == {"96.00.74.00.01": {"count": 3, "nodes": "sim[01,03-04]"}}
    assert fleet_doc["values"]["driver"] == {DRIVER: {"count": 4}}


def test_a_gpu_nvml_does_not_list_leaves_the_gpu_fields_unmeasured(healthy_facts: Doc) -> None:
    doc = copy.deepcopy(healthy_facts)
    doc["nvml"]["gpus"] = [g for g in doc["nvml"]["gpus"] if g["bus_id"] != TOPOLOGY.gpus.devices[5].bus_id]
    readings = read_inventory(Facts("n", doc), TOPOLOGY)
    assert readings["vbios"] == Reading(None, "gpu5 not listed by NVML (" + TOPOLOGY.gpus.devices[5].bus_id + ")")
    assert readings["driver"].value == DRIVER


def test_a_field_nvml_could_not_read_is_unmeasured_with_its_error(healthy_facts: Doc) -> None:
    doc = copy.deepcopy(healthy_facts)
    gpu(doc, 2)["vbios"] = None
    gpu(doc, 2)["errors"]["vbios"] = "NVML_ERROR_TIMEOUT"
    doc["nvml"]["cuda_driver_version"] = None
    doc["nvml"]["cuda_driver_version_error"] = "NVML_ERROR_FUNCTION_NOT_FOUND"
    readings = read_inventory(Facts("n", doc), TOPOLOGY)
    assert readings["vbios"] == Reading(None, "gpu2 vbios: NVML_ERROR_TIMEOUT")
    assert readings["cuda"] == Reading(None, "CUDA driver version: NVML_ERROR_FUNCTION_NOT_FOUND")


@pytest.mark.parametrize(("value", "why"), [
    (None, "CUDA driver version: not reported"),
    (5, "NVML CUDA driver version 5 outside its physical range 1000..99999"),
    ("12.2", "NVML CUDA driver version '12.2' is not a number"),
])
def test_an_unreadable_cuda_version_is_unmeasured(healthy_facts: Doc, value: object, why: str) -> None:
    doc = copy.deepcopy(healthy_facts)
    doc["nvml"]["cuda_driver_version"] = value
    assert read_inventory(Facts("n", doc), TOPOLOGY)["cuda"] == Reading(None, why)


@pytest.mark.parametrize(("number", "shown"), [(12020, "12.2"), (12040, "12.4"), (11080, "11.8"), (1000, "1.0"),
                                               (99999, "99.99")])
def test_the_cuda_version_reads_as_nvidia_smi_prints_it(healthy_facts: Doc, number: int, shown: str) -> None:
    doc = copy.deepcopy(healthy_facts)
    doc["nvml"]["cuda_driver_version"] = number
    assert read_inventory(Facts("n", doc), TOPOLOGY)["cuda"] == Reading(shown)


@pytest.mark.parametrize(("value", "why"), [
    (None, "/sys/module/nvidia/version not reported"),
    ("", "/sys/module/nvidia/version ''"),
    ("  ", "/sys/module/nvidia/version '  '"),
    (535, "/sys/module/nvidia/version 535"),
])
def test_an_unreadable_kernel_module_version_is_unmeasured(healthy_facts: Doc, value: object, why: str) -> None:
    doc = copy.deepcopy(healthy_facts)
    doc["kernel"]["nvidia_module_version"] = value
    assert read_inventory(Facts("n", doc), TOPOLOGY)["nvidia_module"] == Reading(None, why)


def test_values_are_read_without_surrounding_space(healthy_facts: Doc) -> None:
    doc = copy.deepcopy(healthy_facts)
    doc["nvml"]["driver_version"] = f" {DRIVER}\n"
    assert read_inventory(Facts("n", doc), TOPOLOGY)["driver"] == Reading(DRIVER)


def test_an_absent_or_unreadable_hca_leaves_its_role_unmeasured(healthy_facts: Doc) -> None:
    doc = copy.deepcopy(healthy_facts)
    storage = TOPOLOGY.storage_hcas[0].name
    compute = TOPOLOGY.compute_hcas[3].name
    del doc["infiniband"]["hcas"][compute]
    doc["infiniband"]["hcas"][storage]["board_id"] = ""
    readings = read_inventory(Facts("n", doc), TOPOLOGY)
    assert readings["compute_hca_firmware"] == Reading(None, f"{compute} absent: its firmware is not known")
    assert readings["compute_hca_psid"] == Reading(None, f"{compute} absent: its PSID is not known")
    assert readings["storage_hca_psid"] == Reading(None, f"{storage} board_id ''")
    assert readings["storage_hca_firmware"].value == "32.38.3056"


def test_a_failed_source_leaves_its_fields_unmeasured_with_the_cause(healthy_facts: Doc) -> None:
    doc = copy.deepcopy(healthy_facts)
    doc["sources"]["infiniband"] = {"ok": False, "error": "infiniband timed out after 5 s"}
    readings = read_inventory(Facts("n", doc), TOPOLOGY)
    assert readings["compute_hca_firmware"] == Reading(None, "infiniband: infiniband timed out after 5 s")
    assert readings["driver"].value == DRIVER


def test_a_node_type_without_storage_hcas_has_no_storage_fields(healthy_facts: Doc) -> None:
    compute_only = replace(TOPOLOGY, hcas=TOPOLOGY.compute_hcas)
    readings = read_inventory(Facts("n", copy.deepcopy(healthy_facts)), compute_only)
    assert "storage_hca_firmware" not in readings and "storage_hca_psid" not in readings
    assert readings["compute_hca_psid"].value == "MT_0000000838"
    verdicts = judge_fleet(fleet(healthy_facts, 3), dict.fromkeys(names(3), compute_only))
    assert set(statuses(verdicts).values()) == {PASS}
    assert "storage" not in verdicts["sim01"].reason


def test_an_unreachable_node_counts_for_nobody(healthy_facts: Doc) -> None:
    docs = fleet(healthy_facts, 4, {"sim04": driver(OTHER_DRIVER)})
    docs["sim02"] = {"unreachable": "ssh: connect to 127.0.1.3:22: connection refused"}
    verdicts = judge_fleet(docs)
    assert_status(verdicts["sim02"], INCOMPLETE, "connection refused")
    assert_status(verdicts["sim04"], FAIL, "(fleet: 535.183.01 on 2 of 3 nodes)")


def test_a_node_without_the_fleet_section_is_incomplete(healthy_facts: Doc) -> None:
    verdict = load_all()["INV-11"].func(Facts("n", copy.deepcopy(healthy_facts)), TOPOLOGY)
    assert_status(verdict, INCOMPLETE, "fleet comparison not collected: the node suite's fleet phase did not run")


def _judged_with(healthy: Doc, section: object) -> Verdict:
    doc = copy.deepcopy(healthy)
    doc["fleet"] = section
    return load_all()["INV-11"].func(Facts("n", doc), TOPOLOGY)


def _section_of(healthy: Doc) -> Doc:
    return fleet_sections({"n": Facts("n", copy.deepcopy(healthy))}, {"n": TOPOLOGY})["n"]


@pytest.mark.parametrize(("change", "needle"), [
    (lambda s: "garbage", "fleet section unreadable: 'garbage'"),
    (lambda s: {**s, "values": []}, "fleet section unreadable"),
    (lambda s: {**s, "node_type": "gb200"}, "fleet section counts gb200 nodes, not hgx-h100-8gpu"),
    (lambda s: {**s, "nodes": 0}, "fleet node count 0 outside its physical range"),
    (lambda s: {**s, "nodes": "8"}, "fleet node count '8' is not a number"),
])
def test_an_unreadable_fleet_section_is_incomplete(healthy_facts: Doc, change: Callable[[Doc], object],
                                                   needle: str) -> None:
    assert_status(_judged_with(healthy_facts, change(_section_of(healthy_facts))), INCOMPLETE, needle)


@pytest.mark.parametrize(("table", "needle"), [
    (None, "driver: the fleet section has no driver counts"),
    ({}, "driver: the fleet section has no driver counts"),
    ("x", "driver: the fleet section has no driver counts"),
    ({DRIVER: {"count": 0}}, "fleet count of driver 535.183.01 0 outside its physical range"),
    ({DRIVER: {"count": 1.5}}, "is not a whole number"),
    ({DRIVER: 3}, "fleet count of driver 535.183.01 not reported"),
    ({OTHER_DRIVER: {"count": 7}}, f"driver: {DRIVER} is not among the fleet's counts"),
])
def test_unreadable_counts_leave_the_field_unmeasured(healthy_facts: Doc, table: object, needle: str) -> None:
    section = _section_of(healthy_facts)
    section["values"]["driver"] = table
    if table is None:
        del section["values"]["driver"]
    assert_status(_judged_with(healthy_facts, section), INCOMPLETE, needle)


def test_judge_field_names_the_unmeasured_reading_before_the_counts() -> None:
    finding = judge_field("VBIOS", Reading(None, "gpu3 NVML_ERROR_GPU_IS_LOST"), "garbage", "t")
    assert (finding.status, finding.note) == (INCOMPLETE, "gpu3 NVML_ERROR_GPU_IS_LOST")


def test_node_names_are_kept_for_rare_values_only(healthy_facts: Doc) -> None:
    assert NAMED_NODES == 3
    docs = fleet(healthy_facts, 8, {n: driver(OTHER_DRIVER) for n in ("sim02", "sim05", "sim06")})
    docs["sim07"]["nvml"]["driver_version"] = "550.90.07"
    facts = {n: Facts(n, d) for n, d in docs.items()}
    section = fleet_sections(facts, dict.fromkeys(docs, TOPOLOGY))["sim01"]
    assert section["values"]["driver"] == {DRIVER: {"count": 4}, OTHER_DRIVER: {"count": 3, "nodes": "sim[02,05-06]"},
                                           "550.90.07": {"count": 1, "nodes": "sim07"}}
    assert section["nodes"] == 8 and section["node_type"] == TOPOLOGY.name


def test_a_value_shown_in_a_reason_is_printable(healthy_facts: Doc) -> None:
    verdicts = judge_fleet(fleet(healthy_facts, 3, {"sim03": driver("535\x1b[31m.1")}))
    assert verdicts["sim03"].status is FAIL
    assert "\x1b" not in verdicts["sim03"].reason


# ---------------------------------------------------------------- node types and the phase


def test_each_node_type_is_its_own_fleet(healthy_facts: Doc) -> None:
    other = replace(TOPOLOGY, name="h100-other")
    docs = fleet(healthy_facts, 6, {n: driver(OTHER_DRIVER) for n in ("sim04", "sim05", "sim06")})
    types = {n: (TOPOLOGY if n in ("sim01", "sim02", "sim03") else other) for n in docs}
    verdicts = judge_fleet(docs, types)
    assert set(statuses(verdicts).values()) == {PASS}
    assert verdicts["sim04"].reason.endswith("(3 h100-other nodes in the run)")


class _Dispatcher:
    def __init__(self, topology_by_node: dict[str, str]) -> None:
        self.topology_by_node = topology_by_node


@pytest.mark.parametrize("dispatcher", [_Dispatcher({}), object()], ids=["no-types", "no-attribute"])
def test_the_node_suites_phase_records_the_fleet_into_every_reachable_node(healthy_facts: Doc, tmp_path: Path,
                                                                            dispatcher: object) -> None:
    docs = fleet(healthy_facts, 3, {"sim03": driver(OTHER_DRIVER)})
    docs["sim02"] = {"unreachable": "timed out"}
    facts = {n: Facts(n, d) for n, d in docs.items()}
    phase = load_phase("node")
    assert phase is not None and phase.suite == "node"
    phase.run(PhaseContext(dispatcher, facts, TOPOLOGY, tmp_path), None)
    assert "fleet" not in facts["sim02"].data
    assert facts["sim01"].data["fleet"]["values"]["driver"] == {DRIVER: {"count": 1, "nodes": "sim01"},
                                                               OTHER_DRIVER: {"count": 1, "nodes": "sim03"}}


def test_the_phase_groups_nodes_by_the_dispatchers_node_types(healthy_facts: Doc, tmp_path: Path) -> None:
    import yaml

    doc = yaml.safe_load((Path(__file__).resolve().parents[3] / "topologies" / "hgx-h100-8gpu.yaml").read_text())
    doc["name"] = "h100-site"
    site = tmp_path / "h100-site.yaml"
    site.write_text(yaml.safe_dump(doc))
    docs = fleet(healthy_facts, 4)
    facts = {n: Facts(n, d) for n, d in docs.items()}
    dispatcher = _Dispatcher({"sim03": str(site), "sim04": str(site)})
    phase = load_phase("node")
    assert phase is not None
    phase.run(PhaseContext(dispatcher, facts, TOPOLOGY, tmp_path), None)
    assert [facts[n].data["fleet"]["node_type"] for n in names(4)] == ["hgx-h100-8gpu"] * 2 + ["h100-site"] * 2
    assert facts["sim03"].data["fleet"]["nodes"] == 2


# ---------------------------------------------------------------- the software stack (INV-10's facts)


@pytest.mark.parametrize(("key", "record"), [("ofed", "ofed_info"), ("dcgm", "dcgmi")])
def test_a_tool_not_installed_is_a_value_the_fleet_compares(healthy_facts: Doc, key: str, record: str) -> None:
    verdicts = judge_fleet(fleet(healthy_facts, 4, {"sim04": _not_found(record)}))
    label = {"ofed": "OFED", "dcgm": "DCGM"}[key]
    assert_status(verdicts["sim04"], FAIL, f"INV-11 {label} not installed (fleet: ")
    assert {n for n, s in statuses(verdicts).items() if s is not PASS} == {"sim04"}
    nowhere = judge_fleet(fleet(healthy_facts, 3, dict.fromkeys(names(3), _not_found(record))))
    assert set(statuses(nowhere).values()) == {PASS}
    assert f"{label} not installed" in nowhere["sim01"].reason


def test_no_nccl_library_is_a_value_the_fleet_compares(healthy_facts: Doc) -> None:
    verdicts = judge_fleet(fleet(healthy_facts, 3, {"sim02": _nccl()}))
    assert_status(verdicts["sim02"], FAIL, "INV-11 NCCL not installed (fleet: 2.21.5 on 2 of 3 nodes)")


def test_two_nccl_installs_are_named_by_place(healthy_facts: Doc) -> None:
    doc = copy.deepcopy(healthy_facts)
    doc["software"]["nccl"]["libraries"].append({"path": "/usr/local/lib/libnccl.so.2", "file": "libnccl.so.2.18.5",
                                                 "real_path": "/usr/local/lib/libnccl.so.2.18.5"})
    assert read_inventory(Facts("n", doc), TOPOLOGY)["nccl"] == Reading(
        "in /usr/lib/x86_64-linux-gnu 2.21.5 + in /usr/local/lib 2.18.5")


@pytest.mark.parametrize(("change", "why"), [
    (lambda d: d["software"]["ofed_info"].update(exit_status=1, stdout="", stderr="broken"),
     "ofed_info -s exited 1: broken"),
    (lambda d: d["software"]["ofed_info"].update(error="ofed_info timed out after 5 s"), "ofed_info timed out"),
    (lambda d: d["software"]["dcgmi"].update(stdout="garbage"), "dcgmi --version output unreadable"),
    (lambda d: d["software"].update(kernel_release=None), "/proc/sys/kernel/osrelease unreadable"),
    (lambda d: d["software"]["nccl"].update(libraries=[{"file": "libnccl.so"}]), "names no version"),
])
def test_a_software_reading_that_failed_is_unmeasured(healthy_facts: Doc, change: Callable[[Doc], object],
                                                      why: str) -> None:
    doc = copy.deepcopy(healthy_facts)
    change(doc)
    readings = read_inventory(Facts("n", doc), TOPOLOGY)
    unread = [r.why for r in readings.values() if r.value is None]
    assert len(unread) == 1 and why in unread[0], unread


def test_software_facts_not_collected_or_unreadable_are_unmeasured(healthy_facts: Doc) -> None:
    doc = copy.deepcopy(healthy_facts)
    doc["software"] = ["garbage"]
    readings = read_inventory(Facts("n", doc), TOPOLOGY)
    assert readings["kernel"] == Reading(None, "software facts unreadable: ['garbage']")
    del doc["sources"]["software"]
    readings = read_inventory(Facts("n", doc), TOPOLOGY)
    assert readings["ofed"] == Reading(None, "source 'software' was not collected")
    assert readings["driver"].value == DRIVER


def test_a_long_value_is_cut_in_the_reason(healthy_facts: Doc) -> None:
    from burnin.text import printable

    long = "550.54.15-" + "x" * 60
    verdicts = judge_fleet(fleet(healthy_facts, 3, {"sim03": driver(long)}))
    shown = printable(long, limit=48)
    assert shown != long and f"INV-11 driver {shown} (fleet: " in verdicts["sim03"].reason
