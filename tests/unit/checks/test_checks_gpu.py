"""GPU-01..GPU-11, table-driven: every bound at, below and above; every GPU of the node."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from checks_support import FAIL, GPU_INDEXES, INCOMPLETE, PASS, assert_status, failing_subjects, gpu, judge

from burnin.evaluate.verdict import Status

Facts = dict[str, Any]


def _set(*path: str, value: object) -> Callable[[dict[str, Any]], None]:
    def change(g: dict[str, Any]) -> None:
        target = g
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return change


def _nvlink(counter: str, link: int, value: int) -> Callable[[dict[str, Any]], None]:
    def change(g: dict[str, Any]) -> None:
        g["nvlink"][link][counter] = value

    return change


def _links_down(*links: int) -> Callable[[dict[str, Any]], None]:
    def change(g: dict[str, Any]) -> None:
        for link in links:
            g["nvlink"][link]["active"] = False

    return change


def _unchanged(g: dict[str, Any]) -> None:
    pass


def _extra_link(g: dict[str, Any]) -> None:
    g["nvlink"].append({"link": 18, "active": True, "replay": 0, "recovery": 0, "crc_flit": 0})


def _temperature(offset_below_max: int) -> Callable[[dict[str, Any]], None]:
    def change(g: dict[str, Any]) -> None:
        g["temperature_c"] = g["temperature_thresholds"]["gpu_max"] - offset_below_max

    return change


# (check, what, change to one GPU, expected status). Bounds come from topologies/hgx-h100-8gpu.yaml.
BOUNDS: list[tuple[str, str, Callable[[dict[str, Any]], None], Status]] = [
    # GPU-01: volatile uncorrectable <= 0; SRAM aggregate uncorrectable <= 4
    ("GPU-01", "volatile 0", _set("ecc_errors", "volatile_uncorrected", value=0), PASS),
    ("GPU-01", "volatile 1", _set("ecc_errors", "volatile_uncorrected", value=1), FAIL),
    ("GPU-01", "sram 3", _set("ecc_errors", "sram_aggregate_uncorrected", value=3), PASS),
    ("GPU-01", "sram 4", _set("ecc_errors", "sram_aggregate_uncorrected", value=4), PASS),
    ("GPU-01", "sram 5", _set("ecc_errors", "sram_aggregate_uncorrected", value=5), FAIL),
    # GPU-03: row remapping
    ("GPU-03", "pending", _set("remapped_rows", "pending", value=True), FAIL),
    ("GPU-03", "failure", _set("remapped_rows", "failure", value=True), FAIL),
    ("GPU-03", "rows remapped, none pending", _set("remapped_rows", "correctable", value=3), PASS),
    # GPU-05: the three hardware slowdown bits fail; the others do not
    ("GPU-05", "HwSlowdown", _set("clock_event_reasons", value=0x8), FAIL),
    ("GPU-05", "HwThermalSlowdown", _set("clock_event_reasons", value=0x40), FAIL),
    ("GPU-05", "HwPowerBrakeSlowdown", _set("clock_event_reasons", value=0x80), FAIL),
    ("GPU-05", "idle + sw power cap + sw thermal", _set("clock_event_reasons", value=0x1 | 0x4 | 0x20), PASS),
    ("GPU-05", "every other bit", _set("clock_event_reasons", value=0xFFFF & ~(0x8 | 0x40 | 0x80)), PASS),
    ("GPU-05", "power brake among others", _set("clock_event_reasons", value=0x1 | 0x80 | 0x100), FAIL),
    # GPU-06: temperature <= GPU_MAX - 5
    ("GPU-06", "max - 6", _temperature(6), PASS),
    ("GPU-06", "max - 5", _temperature(5), PASS),
    ("GPU-06", "max - 4", _temperature(4), FAIL),
    ("GPU-06", "max", _temperature(0), FAIL),
    # GPU-07: enforced power limit == 700 W
    ("GPU-07", "700 W", _set("power", "enforced_limit_mw", value=700_000), PASS),
    ("GPU-07", "699.999 W", _set("power", "enforced_limit_mw", value=699_999), FAIL),
    ("GPU-07", "700.001 W", _set("power", "enforced_limit_mw", value=700_001), FAIL),
    ("GPU-07", "500 W", _set("power", "enforced_limit_mw", value=500_000), FAIL),
    # GPU-08: max generation >= 5, width == 16
    ("GPU-08", "Gen5", _set("pcie", "max_gen", value=5), PASS),
    ("GPU-08", "Gen4", _set("pcie", "max_gen", value=4), FAIL),
    ("GPU-08", "Gen6", _set("pcie", "max_gen", value=6), PASS),
    ("GPU-08", "x16", _set("pcie", "curr_width", value=16), PASS),
    ("GPU-08", "x15", _set("pcie", "curr_width", value=15), FAIL),
    ("GPU-08", "x8", _set("pcie", "curr_width", value=8), FAIL),
    ("GPU-08", "x32", _set("pcie", "curr_width", value=32), FAIL),
    ("GPU-08", "current Gen1 at idle", _set("pcie", "curr_gen", value=1), PASS),
    # GPU-10: exactly 18 links active
    ("GPU-10", "18/18", _unchanged, PASS),
    ("GPU-10", "17/18 (link 0)", _links_down(0), FAIL),
    ("GPU-10", "17/18 (link 17)", _links_down(17), FAIL),
    ("GPU-10", "16/18", _links_down(3, 9), FAIL),
    ("GPU-10", "19/19", _extra_link, FAIL),
    # GPU-11: recovery <= 0, replay <= 100, CRC <= 100 (summed over the links)
    ("GPU-11", "recovery 1", _nvlink("recovery", 5, 1), FAIL),
    ("GPU-11", "replay 100", _nvlink("replay", 5, 100), PASS),
    ("GPU-11", "replay 101", _nvlink("replay", 5, 101), FAIL),
    ("GPU-11", "replay 99", _nvlink("replay", 17, 99), PASS),
    ("GPU-11", "crc 100", _nvlink("crc_flit", 0, 100), PASS),
    ("GPU-11", "crc 101", _nvlink("crc_flit", 0, 101), FAIL),
]


@pytest.mark.parametrize(("check_id", "what", "change", "status"), BOUNDS,
                         ids=[f"{c}-{w}" for c, w, _, _ in BOUNDS])
@pytest.mark.parametrize("index", GPU_INDEXES)
def test_bound_on_every_gpu(facts: Facts, check_id: str, what: str, change: Callable[[dict[str, Any]], None],
                            status: Status, index: int) -> None:
    change(gpu(facts, index))
    verdict = judge(check_id, facts)
    assert verdict.status is status, (what, verdict.reason)
    if status is FAIL:
        assert failing_subjects(verdict) == {f"gpu{index}"}, verdict.reason
        assert f"gpu{index}" in verdict.reason and "expected" in verdict.reason


@pytest.mark.parametrize(("value", "status", "words"), [
    (7.0, PASS, ""), (2**64 - 1, FAIL, "replay 18446744073709551615"),
    (-1, INCOMPLETE, "NVLink 5 replay counter -1 outside"), (2**64, INCOMPLETE, "NVLink 5 replay counter"),
    (1.5, INCOMPLETE, "NVLink 5 replay counter 1.5 is not a whole number"),
    (True, INCOMPLETE, "NVLink 5 replay counter True is not a number"),
    ("3", INCOMPLETE, "NVLink 5 replay counter '3' is not a number"),
])
def test_an_nvlink_counter_is_measured_as_every_count_is(facts: Facts, value: object, status: Status,
                                                         words: str) -> None:
    gpu(facts, 2)["nvlink"][5]["replay"] = value
    verdict = judge("GPU-11", facts)
    assert verdict.status is status and words in verdict.reason, verdict.reason


def test_nvlink_counters_are_summed_over_links(facts: Facts) -> None:
    """51 + 50 replays on two links is 101: over the limit, though each link alone is under it."""
    g = gpu(facts, 7)
    g["nvlink"][0]["replay"] = 51
    g["nvlink"][17]["replay"] = 50
    assert_status(judge("GPU-11", facts), FAIL, "gpu7 replay 101")


@pytest.mark.parametrize("index", GPU_INDEXES)
def test_nvlink_down_names_the_link(facts: Facts, index: int) -> None:
    _links_down(7)(gpu(facts, index))
    assert_status(judge("GPU-10", facts), FAIL, f"gpu{index} 17/18 NVLink links active (down: 7)")


def test_temperature_uses_slowdown_when_gpu_max_is_not_reported(facts: Facts) -> None:
    g = gpu(facts, 2)
    g["temperature_thresholds"]["gpu_max"] = None
    g["temperature_thresholds"]["slowdown"] = 80
    g["temperature_c"] = 75
    assert judge("GPU-06", facts).status is PASS
    g["temperature_c"] = 76
    assert_status(judge("GPU-06", facts), FAIL, "gpu2 76 C (limit 80 C)")


def test_temperature_reason_says_measured_and_limit(facts: Facts) -> None:
    g = gpu(facts, 4)
    g["temperature_c"] = g["temperature_thresholds"]["gpu_max"] + 1
    verdict = judge("GPU-06", facts)
    assert_status(verdict, FAIL, f"gpu4 {g['temperature_c']} C (limit {g['temperature_thresholds']['gpu_max']} C)")


def test_several_gpus_fail_together(facts: Facts) -> None:
    for index in (0, 7):
        gpu(facts, index)["ecc_errors"]["volatile_uncorrected"] = 2
    verdict = judge("GPU-01", facts)
    assert verdict.status is FAIL and failing_subjects(verdict) == {"gpu0", "gpu7"}


def test_a_failed_gpu_outranks_an_unmeasured_one(facts: Facts) -> None:
    """A known fault is the more useful statement: the check fails and still says what was not measured."""
    gpu(facts, 1)["power"]["enforced_limit_mw"] = 400_000
    gpu(facts, 6)["power"]["enforced_limit_mw"] = None
    verdict = judge("GPU-07", facts)
    assert_status(verdict, FAIL, "gpu1 power limit 400 W", "not measured: gpu6")


def test_healthy_gpu_checks_pass(facts: Facts) -> None:
    for check_id in ("GPU-01", "GPU-03", "GPU-04", "GPU-05", "GPU-06", "GPU-07", "GPU-08", "GPU-10", "GPU-11"):
        verdict = judge(check_id, facts)
        assert verdict.status is PASS, verdict
        assert len(verdict.findings) == (1 if check_id == "GPU-04" else 8), verdict.findings


def test_counter_baseline_is_named_in_the_reason(facts: Facts) -> None:
    facts["counter_baseline"] = "2026-01-02T03:04:05Z"
    gpu(facts, 3)["nvlink"][1]["recovery"] = 2
    assert_status(judge("GPU-11", facts), FAIL, "recovery 2 since baseline 2026-01-02T03:04:05Z")


def test_lost_gpu_is_unmeasured_by_every_per_gpu_check(facts: Facts) -> None:
    g = gpu(facts, 5)
    for key in list(g):
        if key not in ("index", "errors", "lost"):
            del g[key]
    g["lost"] = True
    g["errors"] = {"handle": "NVML_ERROR_GPU_IS_LOST"}
    for check_id in ("GPU-01", "GPU-03", "GPU-05", "GPU-06", "GPU-07", "GPU-08", "GPU-10", "GPU-11"):
        assert_status(judge(check_id, facts), INCOMPLETE, "NVML_ERROR_GPU_IS_LOST")


def test_temperature_margin_comes_from_the_reference_bound(facts: Facts) -> None:
    """A site that wants 10 C of headroom gets it judged and shown."""
    from dataclasses import replace

    from checks_support import TOPOLOGY

    margin = replace(TOPOLOGY.references["gpu_temp_margin_c"], value=5, lower=10)
    strict = replace(TOPOLOGY, references={**TOPOLOGY.references, "gpu_temp_margin_c": margin})
    g = gpu(facts, 1)
    limit = g["temperature_thresholds"]["gpu_max"]
    g["temperature_c"] = limit - 10
    assert judge("GPU-06", facts, strict).status is PASS
    g["temperature_c"] = limit - 9
    verdict = judge("GPU-06", facts, strict)
    assert_status(verdict, FAIL, f"gpu1 {limit - 9} C (limit {limit} C)", "GPU max - 10 C")
