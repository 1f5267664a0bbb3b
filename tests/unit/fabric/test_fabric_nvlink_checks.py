"""NVL-03 (p2pBandwidthLatencyTest per GPU pair) and NVL-04 (NVLink after the traffic) as evaluation tables."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from fabric_support import AFTER, fabric_facts, nvlink_after, nvml_gpus, p2p_run, section

from burnin.checks.base import evaluate
from burnin.checks.fabric import SINGLE_NODE_CHECKS
from burnin.evaluate.verdict import Status, Verdict
from burnin.fabric.p2p import P2pMeasurement
from burnin.facts import Facts
from burnin.topology import Topology
from burnin.topology.model import Reference

ALL_AFTER = ", ".join(AFTER)


def nvl03(topology: Topology, p2p: P2pMeasurement | None = None, **kwargs: Any) -> Verdict:
    return evaluate("NVL-03", fabric_facts(p2p=p2p or p2p_run(**kwargs)), topology)


def nvl04(topology: Topology, before: list[dict[str, Any]] | None = None,
          after: list[dict[str, Any]] | None = None, snap: dict[str, Any] | None = None) -> Verdict:
    return evaluate("NVL-04", fabric_facts(before=before, after=snap or nvlink_after(after)), topology)


def with_matrix(name: str, matrix: object, base: P2pMeasurement | None = None) -> P2pMeasurement:
    run = base or p2p_run()
    return dataclasses.replace(run, matrices={**run.matrices, name: matrix})  # type: ignore[dict-item]


def without_matrix(name: str) -> P2pMeasurement:
    run = p2p_run()
    return dataclasses.replace(run, matrices={k: v for k, v in run.matrices.items() if k != name})


# ---------------------------------------------------------------- NVL-03


def test_both_are_single_node_checks() -> None:
    assert {"NVL-03", "NVL-04"} <= set(SINGLE_NODE_CHECKS)


def test_a_healthy_node_passes_with_its_numbers(h100_topology: Topology) -> None:
    verdict = nvl03(h100_topology)
    assert verdict.status is Status.PASS, verdict.reason
    assert verdict.measured == ("P2P access on 56 pairs, P2P writes min 376.00 GB/s (median 376.00), "
                                "latency max 2.50 us")
    assert verdict.expected == "P2P access on all 56 ordered pairs, P2P writes >= 330 GB/s, latency <= 5 us per pair"


@pytest.mark.parametrize(("value", "status"), [(330.0, Status.PASS), (329.99, Status.FAIL)])
def test_the_bandwidth_floor_is_inclusive(h100_topology: Topology, value: float, status: Status) -> None:
    verdict = nvl03(h100_topology, low={(2, 6): value})
    assert verdict.status is status, verdict.reason
    if status is Status.FAIL:
        assert verdict.reason == ("NVL-03 gpu2->gpu6 329.99 GB/s P2P writes (expected P2P access on all 56 ordered "
                                  "pairs, P2P writes >= 330 GB/s, latency <= 5 us per pair)")


def test_a_slow_pair_is_named_alone(h100_topology: Topology) -> None:
    verdict = nvl03(h100_topology, low={(2, 6): 250.0, (6, 2): 251.5})
    assert verdict.status is Status.FAIL
    assert verdict.measured == "gpu2->gpu6 250.00 GB/s P2P writes; gpu6->gpu2 251.50 GB/s P2P writes"


@pytest.mark.parametrize(("latency", "status"), [(5.0, Status.PASS), (5.01, Status.FAIL)])
def test_the_latency_ceiling_is_inclusive(h100_topology: Topology, latency: float, status: Status) -> None:
    verdict = nvl03(h100_topology, latency=latency)
    assert verdict.status is status, verdict.reason
    if status is Status.FAIL:
        assert verdict.measured.startswith("gpu0 fails with all 14 pairs it is in: 5.01 us P2P write latency at worst")


def test_a_gpu_without_peer_access_is_named_once_with_what_its_pairs_show(h100_topology: Topology) -> None:
    verdict = nvl03(h100_topology, refused={3})
    assert verdict.status is Status.FAIL
    assert verdict.measured == ("gpu3 fails with all 14 pairs it is in: no P2P access (connectivity 0), "
                                "38.00 GB/s P2P writes, 14.50 us P2P write latency at worst")
    assert "gpu0->gpu1" not in verdict.reason and "gpu3->" not in verdict.reason


def test_one_refused_pair_names_the_pair(h100_topology: Topology) -> None:
    run = p2p_run()
    access = [row[:] for row in run.matrices["connectivity"]]
    access[1][5] = 0.0
    verdict = nvl03(h100_topology, with_matrix("connectivity", access, run))
    assert verdict.status is Status.FAIL
    assert verdict.measured == "gpu1->gpu5 no P2P access (connectivity 0)"


def test_two_gpus_of_three_share_every_failing_pair(h100_topology: Topology) -> None:
    three = dataclasses.replace(h100_topology, gpus=dataclasses.replace(
        h100_topology.gpus, count=3, devices=h100_topology.gpus.devices[:3]))
    verdict = nvl03(three, p2p_run(3, refused={1}))
    assert verdict.status is Status.FAIL
    assert verdict.measured.startswith("gpu1 fails with all 4 pairs it is in: no P2P access")
    two = dataclasses.replace(three, gpus=dataclasses.replace(three.gpus, count=2, devices=three.gpus.devices[:2]))
    pairwise = nvl03(two, p2p_run(2, refused={1}))  # two GPUs: no GPU is common to "every" pair worth naming
    assert pairwise.measured.startswith("gpu0->gpu1 no P2P access")


@pytest.mark.parametrize(("cell", "words"), [
    (None, "P2P access None is neither 0 nor 1"),
    (2.0, "P2P access 2.0 is neither 0 nor 1"),
    (True, "P2P access True is neither 0 nor 1"),
])
def test_an_access_cell_that_is_not_0_or_1_is_incomplete(h100_topology: Topology, cell: object, words: str) -> None:
    run = p2p_run()
    access: list[list[object]] = [list(row) for row in run.matrices["connectivity"]]
    access[4][0] = cell
    verdict = nvl03(h100_topology, with_matrix("connectivity", access, run))
    assert verdict.status is Status.INCOMPLETE and f"gpu4->gpu0: {words}" in verdict.reason


@pytest.mark.parametrize(("value", "words"), [
    (None, "P2P writes: no bandwidth reported"),
    (float("nan"), "nan GB/s is not a bandwidth"),
    (-1.0, "-1.0 GB/s is not a bandwidth"),
    ("fast", "'fast' GB/s is not a bandwidth"),
])
def test_a_bandwidth_that_is_not_one_is_incomplete(h100_topology: Topology, value: object, words: str) -> None:
    run = p2p_run()
    uni: list[list[object]] = [list(row) for row in run.matrices["unidirectional_p2p_enabled"]]
    uni[0][7] = value
    verdict = nvl03(h100_topology, with_matrix("unidirectional_p2p_enabled", uni, run))
    assert verdict.status is Status.INCOMPLETE and words in verdict.reason and "gpu0->gpu7" in verdict.reason


@pytest.mark.parametrize(("value", "words"), [
    (None, "P2P write latency not reported"),
    (float("inf"), "inf is not a finite number"),
    (-0.5, "-0.5 outside its physical range"),
])
def test_a_latency_that_is_not_one_is_incomplete(h100_topology: Topology, value: object, words: str) -> None:
    run = p2p_run()
    lat: list[list[object]] = [list(row) for row in run.matrices["latency_p2p_enabled_gpu"]]
    lat[5][1] = value
    verdict = nvl03(h100_topology, with_matrix("latency_p2p_enabled_gpu", lat, run))
    assert verdict.status is Status.INCOMPLETE and words in verdict.reason and "gpu5->gpu1" in verdict.reason


def test_a_failure_beats_what_could_not_be_read(h100_topology: Topology) -> None:
    run = p2p_run(low={(0, 1): 100.0})
    lat: list[list[object]] = [list(row) for row in run.matrices["latency_p2p_enabled_gpu"]]
    lat[0][1] = None
    verdict = nvl03(h100_topology, with_matrix("latency_p2p_enabled_gpu", lat, run))
    assert verdict.status is Status.FAIL and verdict.measured == "gpu0->gpu1 100.00 GB/s P2P writes"


def test_without_a_latency_table_latency_is_not_judged(h100_topology: Topology) -> None:
    verdict = nvl03(h100_topology, without_matrix("latency_p2p_enabled_gpu"))
    assert verdict.status is Status.PASS, verdict.reason
    assert verdict.measured.endswith("no latency table from p2pBandwidthLatencyTest")
    assert verdict.expected == "P2P access on all 56 ordered pairs, P2P writes >= 330 GB/s per pair"


@pytest.mark.parametrize("name", ["connectivity", "unidirectional_p2p_enabled"])
def test_a_missing_matrix_is_incomplete(h100_topology: Topology, name: str) -> None:
    verdict = nvl03(h100_topology, without_matrix(name))
    assert verdict.status is Status.INCOMPLETE
    assert verdict.reason == f"NVL-03 could not be measured: p2pBandwidthLatencyTest printed no {name} matrix"
    broken = nvl03(h100_topology, with_matrix(name, [[1.0], "row"]))
    assert broken.status is Status.INCOMPLETE and f"printed no {name} matrix" in broken.reason


def test_a_smaller_matrix_leaves_the_missing_pairs_unmeasured(h100_topology: Topology) -> None:
    verdict = nvl03(h100_topology, p2p_run(7))  # a GPU missing from CUDA: 7x7
    assert verdict.status is Status.INCOMPLETE
    assert "gpu0->gpu7: P2P access None is neither 0 nor 1; P2P writes: no bandwidth reported" in verdict.reason


def test_more_gpus_than_the_topology_fails(h100_topology: Topology) -> None:
    verdict = nvl03(h100_topology, p2p_run(9))
    assert verdict.status is Status.FAIL and verdict.measured == "gpus 9 GPUs measured"


def test_an_unmeasured_run_is_incomplete_with_its_reason(h100_topology: Topology) -> None:
    hung = P2pMeasurement("unmeasured", reason="p2pBandwidthLatencyTest hung on sim01: no result within 60 s")
    verdict = nvl03(h100_topology, hung)
    assert verdict.status is Status.INCOMPLETE and verdict.reason.endswith("no result within 60 s")
    assert "did not complete" in nvl03(h100_topology, P2pMeasurement("unmeasured")).reason


@pytest.mark.parametrize(("data", "words"), [
    (None, "no p2pBandwidthLatencyTest run"),
    ({}, "no p2pBandwidthLatencyTest run"),
    ("text", "no readable measurement ('text')"),
    ({"status": "ok", "refused": [[1]]}, "unreadable measurement"),
    ({"status": "ok", "devices": "many"}, "unreadable measurement"),
])
def test_an_unreadable_record_is_incomplete(h100_topology: Topology, data: object, words: str) -> None:
    facts = fabric_facts()
    facts.data["fabric"]["p2p"] = data
    verdict = evaluate("NVL-03", facts, h100_topology)
    assert verdict.status is Status.INCOMPLETE and words in verdict.reason


def test_a_topology_without_the_references_cannot_judge(h100_topology: Topology) -> None:
    for key in ("nvl_p2p_unidir_gbps", "nvl_p2p_latency_us"):
        refs = {k: v for k, v in h100_topology.references.items() if k != key}
        verdict = nvl03(dataclasses.replace(h100_topology, references=refs))
        assert verdict.status is Status.INCOMPLETE and f"defines no {key}" in verdict.reason
    refs = {**h100_topology.references, "nvl_p2p_unidir_gbps": Reference(376, "a value, no floor")}
    floorless = nvl03(dataclasses.replace(h100_topology, references=refs))
    assert floorless.status is Status.INCOMPLETE and "no nvl_p2p_unidir_gbps with a lower bound" in floorless.reason


def test_the_shipped_references_say_where_they_come_from(h100_topology: Topology) -> None:
    floor = h100_topology.references["nvl_p2p_unidir_gbps"]
    assert floor.lower == 330 and "p2p-unidir-writes-matrix-h100-8gpu.txt" in floor.source
    assert h100_topology.references["nvl_p2p_latency_us"].upper == 5


# ---------------------------------------------------------------- NVL-04


def test_clean_links_and_counters_pass(h100_topology: Topology) -> None:
    verdict = nvl04(h100_topology)
    assert verdict.status is Status.PASS, verdict.reason
    assert verdict.measured == f"after {ALL_AFTER}: every NVLink up, no error counter grew beyond its limit"
    assert verdict.expected == ("18 links up after the traffic; counter growth during it: recovery <= 0 errors, "
                                "replay <= 100 errors, crc_flit <= 100 errors per GPU")


def test_counters_that_grew_during_the_traffic_fail_with_the_links(h100_topology: Topology) -> None:
    after = nvml_gpus(counters={(3, 7): {"recovery": 3, "replay": 450}})
    verdict = nvl04(h100_topology, after=after)
    assert verdict.status is Status.FAIL
    assert verdict.measured == f"gpu3 grew during {ALL_AFTER}: recovery +3 (link 7), replay +450 (link 7)"


@pytest.mark.parametrize(("name", "grown", "status"), [
    ("recovery", 1, Status.FAIL), ("replay", 100, Status.PASS), ("replay", 101, Status.FAIL),
    ("crc_flit", 100, Status.PASS), ("crc_flit", 101, Status.FAIL),
])
def test_growth_limits_are_gpu_11s(h100_topology: Topology, name: str, grown: int, status: Status) -> None:
    before = nvml_gpus(counters={(0, 2): {name: 1000}, (0, 5): {name: 7}})
    after = nvml_gpus(counters={(0, 2): {name: 1000 + grown - 1}, (0, 5): {name: 8}})
    verdict = nvl04(h100_topology, before, after)
    assert verdict.status is status, verdict.reason
    if status is Status.FAIL:
        links = "5" if grown == 1 else "2,5"
        assert verdict.measured == f"gpu0 grew during {ALL_AFTER}: {name} +{grown} (link {links})"


def test_growth_within_the_limits_is_shown(h100_topology: Topology) -> None:
    verdict = nvl04(h100_topology, after=nvml_gpus(counters={(6, 1): {"replay": 40}}))
    assert verdict.status is Status.PASS
    gpu6 = next(f for f in verdict.findings if f.subject == "gpu6")
    assert gpu6.measured == "18/18 links up, counters grew within limits (replay +40)"
    gpu5 = next(f for f in verdict.findings if f.subject == "gpu5")
    assert gpu5.measured == "18/18 links up, no NVLink error counter grew"


def test_old_counts_at_rest_are_gpu_11s_business(h100_topology: Topology) -> None:
    dirty = nvml_gpus(counters={(3, 7): {"recovery": 3, "replay": 250}})
    assert nvl04(h100_topology, dirty, dirty).status is Status.PASS


def test_a_link_that_went_down_during_the_traffic_fails(h100_topology: Topology) -> None:
    verdict = nvl04(h100_topology, after=nvml_gpus(down={2: {4, 9}}))
    assert verdict.status is Status.FAIL
    assert verdict.measured == (f"gpu2 16/18 NVLink links up after {ALL_AFTER} (down: 4,9; went down during the "
                                "traffic: 4,9)")


def test_a_link_down_before_and_after_fails_too(h100_topology: Topology) -> None:
    down = nvml_gpus(down={3: {7}})
    verdict = nvl04(h100_topology, down, down)
    assert verdict.status is Status.FAIL
    assert verdict.measured == f"gpu3 17/18 NVLink links up after {ALL_AFTER} (down: 7, already down before it)"


def test_links_and_counters_together(h100_topology: Topology) -> None:
    verdict = nvl04(h100_topology, nvml_gpus(down={1: {0}}), nvml_gpus(down={1: {0, 1}},
                                                                      counters={(1, 1): {"recovery": 2}}))
    assert verdict.measured == (f"gpu1 16/18 NVLink links up after {ALL_AFTER} (down: 0,1; went down during the "
                                f"traffic: 1); grew during {ALL_AFTER}: recovery +2 (link 1)")


def test_a_counter_that_went_down_is_not_a_measurement(h100_topology: Topology) -> None:
    verdict = nvl04(h100_topology, nvml_gpus(counters={(4, 3): {"replay": 90}}),
                    nvml_gpus(counters={(4, 3): {"replay": 2}}))
    assert verdict.status is Status.INCOMPLETE
    assert "gpu4: NVLink 3 replay counter went down from 90 to 2 during the traffic (reset?)" in verdict.reason


def test_a_counter_not_read_is_incomplete_with_nvmls_error(h100_topology: Topology) -> None:
    after = nvml_gpus()
    after[2]["nvlink"][5]["crc_flit"] = None
    after[2]["errors"]["nvlink_5_crc_flit"] = "NVML_ERROR_NOT_SUPPORTED"
    verdict = nvl04(h100_topology, after=after)
    assert verdict.status is Status.INCOMPLETE
    assert f"gpu2: NVLink 5 crc_flit counter after {ALL_AFTER}: NVML_ERROR_NOT_SUPPORTED" in verdict.reason
    before = nvml_gpus()
    del before[2]["nvlink"][5]["replay"]
    assert "NVLink 5 replay counter before the traffic: not reported" in nvl04(h100_topology, before).reason
    nan = nvml_gpus()
    nan[2]["nvlink"][5]["replay"] = float("nan")
    assert "is not a finite number" in nvl04(h100_topology, after=nan).reason


def test_an_unreadable_link_state_is_incomplete(h100_topology: Topology) -> None:
    after = nvml_gpus()
    after[0]["errors"]["nvlink_3_state"] = "NVML_ERROR_UNKNOWN"
    verdict = nvl04(h100_topology, after=after)
    assert verdict.status is Status.INCOMPLETE
    assert f"gpu0: NVLink state unreadable after {ALL_AFTER}: nvlink_3: NVML_ERROR_UNKNOWN" in verdict.reason
    flag = nvml_gpus()
    flag[0]["nvlink"][3]["active"] = "yes"
    assert "NVLink 3 active after" in nvl04(h100_topology, after=flag).reason
    listing = nvml_gpus()
    listing[0]["nvlink"] = "links"
    assert f"gpu0: NVLink list unreadable after {ALL_AFTER}" in nvl04(h100_topology, after=listing).reason
    numbered = nvml_gpus()
    numbered[0]["nvlink"][0]["link"] = 99
    assert "NVLink number after" in nvl04(h100_topology, after=numbered).reason


def test_links_listed_differently_before_and_after_are_incomplete(h100_topology: Topology) -> None:
    verdict = nvl04(h100_topology, after=nvml_gpus(links=17))
    assert verdict.status is Status.INCOMPLETE
    assert "NVML listed links [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17] before" in verdict.reason


def test_a_gpu_lost_or_missing_on_either_side_is_incomplete(h100_topology: Topology) -> None:
    lost = nvml_gpus()
    lost[6]["lost"] = True
    verdict = nvl04(h100_topology, after=lost)
    assert verdict.status is Status.INCOMPLETE
    assert f"gpu6: after {ALL_AFTER}: NVML_ERROR_GPU_IS_LOST" in verdict.reason
    assert "gpu6: before the traffic: NVML_ERROR_GPU_IS_LOST" in nvl04(h100_topology, before=lost).reason
    seven = nvml_gpus(7)
    assert f"gpu7: after {ALL_AFTER}: not listed by NVML" in nvl04(h100_topology, after=seven).reason
    assert "gpu7: before the traffic: not listed by NVML" in nvl04(h100_topology, before=seven).reason
    nine = nvml_gpus(9)
    extra = nvl04(h100_topology, nine, nine)
    assert extra.status is Status.PASS and any(f.subject == "gpu8" for f in extra.findings)


def test_a_gpu_that_fails_is_reported_over_another_not_read(h100_topology: Topology) -> None:
    after = nvml_gpus(down={1: {3}})
    after[6]["lost"] = True
    verdict = nvl04(h100_topology, after=after)
    assert verdict.status is Status.FAIL and verdict.measured.startswith("gpu1 17/18")
    assert "not measured: gpu6" in verdict.reason


def test_no_snapshot_or_an_unreachable_one_is_incomplete(h100_topology: Topology) -> None:
    facts = fabric_facts()
    facts.data["fabric"]["nvlink_after"] = None
    verdict = evaluate("NVL-04", facts, h100_topology)
    assert verdict.reason == ("NVL-04 could not be measured: NVLink was not read again after the fabric traffic "
                              "(no post-traffic snapshot)")
    snap = {"unreachable": "sim01: collector timed out", "after": AFTER}
    assert nvl04(h100_topology, snap=snap).reason == (
        f"NVL-04 could not be measured: NVML after {ALL_AFTER}: sim01: collector timed out")
    nameless = nvl04(h100_topology, snap={"unreachable": "gather failed", "after": []})
    assert nameless.reason.endswith("NVML after the fabric traffic: gather failed")


def test_nvml_missing_on_either_side_is_incomplete(h100_topology: Topology) -> None:
    facts = Facts("sim01", {"sources": {}, "fabric": section()})
    verdict = evaluate("NVL-04", facts, h100_topology)
    assert verdict.status is Status.INCOMPLETE
    assert verdict.reason == ("NVL-04 could not be measured: NVML before the traffic: source 'nvml' was not "
                              "collected")
    failed = {"sources": {"nvml": {"ok": False, "error": "nvmlInit failed: NVML_ERROR_DRIVER_NOT_LOADED"}},
              "after": AFTER}
    assert nvl04(h100_topology, snap=failed).reason.endswith(
        f"NVML after {ALL_AFTER}: nvml: nvmlInit failed: NVML_ERROR_DRIVER_NOT_LOADED")
    unreadable = {"sources": {"nvml": {"ok": True}}, "nvml": {"gpus": "many"}, "after": AFTER}
    assert f"NVML after {ALL_AFTER}: NVML GPU list unreadable" in nvl04(h100_topology, snap=unreadable).reason


def test_no_fabric_phase_is_incomplete_for_both(h100_topology: Topology) -> None:
    for check_id in ("NVL-03", "NVL-04"):
        verdict = evaluate(check_id, Facts("sim01", {"sources": {}}), h100_topology)
        assert verdict.status is Status.INCOMPLETE and "fabric phase did not run" in verdict.reason


def test_a_topology_without_gpu_11s_references_cannot_judge_nvl_04(h100_topology: Topology) -> None:
    for key in ("nvlink_links_active", "nvlink_recovery_errors", "nvlink_replay_errors", "nvlink_crc_errors"):
        refs = {k: v for k, v in h100_topology.references.items() if k != key}
        verdict = nvl04(dataclasses.replace(h100_topology, references=refs))
        assert verdict.status is Status.INCOMPLETE and f"defines no {key}" in verdict.reason


def test_a_common_gpu_says_what_any_of_its_pairs_showed(h100_topology: Topology) -> None:
    """gpu1 of three fails all its 4 pairs: two without access and slow to answer, two only without access."""
    three = dataclasses.replace(h100_topology, gpus=dataclasses.replace(
        h100_topology.gpus, count=3, devices=h100_topology.gpus.devices[:3]))
    run = p2p_run(3, refused={1})
    latency = [list(row) for row in run.matrices["latency_p2p_enabled_gpu"]]
    latency[1][0] = latency[1][2] = 2.4  # within the ceiling: two pairs fail on access alone
    verdict = nvl03(three, with_matrix("latency_p2p_enabled_gpu", latency, run))
    assert verdict.measured == ("gpu1 fails with all 4 pairs it is in: no P2P access (connectivity 0), "
                                "38.00 GB/s P2P writes, 14.50 us P2P write latency at worst")
    uni = [list(row) for row in run.matrices["unidirectional_p2p_enabled"]]
    uni[0][1] = uni[1][0] = uni[1][2] = uni[2][1] = 100.0
    access = [[1.0] * 3 for _ in range(3)]
    access[1][2] = 0.0  # one pair without access among four slow ones: "any", not "all"
    mixed = with_matrix("connectivity", access, with_matrix("unidirectional_p2p_enabled", uni,
                                                            with_matrix("latency_p2p_enabled_gpu", latency, run)))
    assert nvl03(three, mixed).measured == ("gpu1 fails with all 4 pairs it is in: no P2P access (connectivity 0), "
                                            "100.00 GB/s P2P writes, 14.50 us P2P write latency at worst")


def test_one_slow_answer_has_no_worst(h100_topology: Topology) -> None:
    run = p2p_run()
    latency = [list(row) for row in run.matrices["latency_p2p_enabled_gpu"]]
    latency[2][5] = 6.25
    verdict = nvl03(h100_topology, with_matrix("latency_p2p_enabled_gpu", latency, run))
    assert verdict.measured == "gpu2->gpu5 6.25 us P2P write latency"


def test_a_link_entry_that_is_not_a_mapping_is_unreadable(h100_topology: Topology) -> None:
    after = nvml_gpus()
    after[4]["nvlink"][9] = "link 9"
    verdict = nvl04(h100_topology, after=after)
    assert verdict.status is Status.INCOMPLETE and f"gpu4: NVLink list unreadable after {ALL_AFTER}" in verdict.reason
    mixed = nvml_gpus()
    mixed[4]["nvlink"] = [*mixed[4]["nvlink"][:17], None]
    assert "gpu4: NVLink list unreadable" in nvl04(h100_topology, after=mixed).reason


def test_unreadable_link_states_show_the_first_four(h100_topology: Topology) -> None:
    after = nvml_gpus()
    after[0]["errors"].update({f"nvlink_{n}_state": "NVML_ERROR_UNKNOWN" for n in (1, 2, 3, 4, 5)})
    reason = nvl04(h100_topology, after=after).reason
    assert "nvlink_4: NVML_ERROR_UNKNOWN" in reason and "nvlink_5" not in reason
