"""Values that cannot be true, anywhere on the fabric judging path: NaN, infinite, negative or missing
numbers never pass; the verdict is incomplete and quotes the value (issue 9 item 4)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from fabric_support import fleet, nccl, nvb, perf_output, result, section

from burnin.checks.base import evaluate
from burnin.evaluate.verdict import Status, Verdict
from burnin.fabric import judge
from burnin.fabric.measure import NcclMeasurement, bandwidth_ok, nccl_measurement
from burnin.fabric.results import nvb_minimum
from burnin.facts import Facts
from burnin.topology import Topology

BAD = [(math.nan, "nan"), (math.inf, "inf"), (-math.inf, "-inf"), (-1.0, "-1.0"), (1e12, "1000000000000.0"),
       ("480", "'480'"), (True, "True"), ([480.0], "[480.0]")]


def judged(check_id: str, topology: Topology, doc: dict[str, Any], node: str = "sim01") -> Verdict:
    return evaluate(check_id, Facts(node, {"fabric": doc}), topology)


@pytest.mark.parametrize(("value", "quoted"), BAD)
def test_nccl_01_busbw(h100_topology: Topology, value: object, quoted: str) -> None:
    doc = section()
    doc["single"]["all_reduce"]["busbw_gbps"] = value
    verdict = judged("NCCL-01", h100_topology, doc)
    assert verdict.status is Status.INCOMPLETE
    assert f"single-node all_reduce busbw at 8 GiB: {quoted} GB/s is not a bandwidth" in verdict.reason


def test_nccl_01_missing_busbw(h100_topology: Topology) -> None:
    doc = section()
    doc["single"]["all_reduce"]["busbw_gbps"] = None
    assert "no bandwidth reported" in judged("NCCL-01", h100_topology, doc).reason
    doc["single"]["all_reduce"] = {"busbw_gbps": 480.0}  # not a measurement record
    verdict = judged("NCCL-01", h100_topology, doc)
    assert verdict.status is Status.INCOMPLETE and "unreadable measurement" in verdict.reason
    doc["single"]["all_reduce"] = [480.0]
    assert judged("NCCL-01", h100_topology, doc).status is Status.INCOMPLETE


@pytest.mark.parametrize(("value", "quoted"), BAD[:4])
def test_nccl_02_busbw(h100_topology: Topology, value: object, quoted: str) -> None:
    doc = section()
    doc["single"]["all_gather"] = NcclMeasurement("all_gather", ("sim01",), "ok", busbw_gbps=361.0).to_json()
    doc["single"]["all_gather"]["busbw_gbps"] = value
    verdict = judged("NCCL-02", h100_topology, doc)
    assert verdict.status is Status.INCOMPLETE and f"busbw: {quoted} GB/s is not a bandwidth" in verdict.reason


@pytest.mark.parametrize(("value", "quoted"), BAD[:5])
def test_nvl_01_pair(h100_topology: Topology, value: object, quoted: str) -> None:
    doc = section()
    doc["nvbandwidth"]["testcases"]["device_to_device_memcpy_read_ce"][5][2] = value
    verdict = judged("NVL-01", h100_topology, doc)
    assert verdict.status is Status.INCOMPLETE
    assert f"gpu5->gpu2: device_to_device_memcpy_read_ce gpu5->gpu2: {quoted} GB/s" in verdict.reason


def test_nvl_01_missing_pairs_and_matrix(h100_topology: Topology) -> None:
    doc = section()
    doc["nvbandwidth"]["testcases"]["device_to_device_memcpy_read_ce"] = \
        doc["nvbandwidth"]["testcases"]["device_to_device_memcpy_read_ce"][:7]  # gpu7's row is missing
    verdict = judged("NVL-01", h100_topology, doc)
    assert verdict.status is Status.INCOMPLETE and "gpu7->gpu0" in verdict.reason
    del doc["nvbandwidth"]["testcases"]["device_to_device_memcpy_read_ce"]
    assert "printed no device_to_device_memcpy_read_ce matrix" in judged("NVL-01", h100_topology, doc).reason
    doc["nvbandwidth"] = {"status": "ok", "testcases": "x", "duration_s": "slow"}
    assert judged("NVL-01", h100_topology, doc).status is Status.INCOMPLETE


@pytest.mark.parametrize(("value", "quoted"), BAD[:5])
def test_nvl_02_gpu(h100_topology: Topology, value: object, quoted: str) -> None:
    doc = section()
    doc["nvbandwidth"]["testcases"]["device_to_host_memcpy_ce"][0][6] = value
    verdict = judged("NVL-02", h100_topology, doc)
    assert verdict.status is Status.INCOMPLETE and f"gpu6 D2H: device_to_host_memcpy_ce gpu6: {quoted}" in \
        verdict.reason


def test_nvl_02_an_empty_or_short_matrix_is_not_a_pass(h100_topology: Topology) -> None:
    doc = section()
    doc["nvbandwidth"]["testcases"]["host_to_device_memcpy_ce"] = [[]]
    verdict = judged("NVL-02", h100_topology, doc)
    assert verdict.status is Status.INCOMPLETE and "gpu0 H2D" in verdict.reason and "+4 more" in verdict.reason
    assert len([f for f in verdict.findings if f.status is Status.INCOMPLETE]) == 8
    doc["nvbandwidth"]["testcases"]["host_to_device_memcpy_ce"] = [[55.0] * 7]
    assert "gpu7 H2D" in judged("NVL-02", h100_topology, doc).reason


@pytest.mark.parametrize("median", [math.nan, math.inf, -480.0, None, "x"])
def test_a_fleet_median_that_cannot_be_true_is_no_fleet(h100_topology: Topology, median: object) -> None:
    stats = fleet()
    stats["single.all_reduce"] = {"median": median, "count": 8}
    verdict = judged("NCCL-01", h100_topology, section(fleet_stats=stats))
    assert verdict.status is Status.PASS  # judged on its own reference, not a straggler of nonsense
    stats["single.all_reduce"] = "garbage"
    assert judged("NCCL-01", h100_topology, section(fleet_stats=stats)).status is Status.PASS
    assert judge.straggler(400.0, {"median": 480.0, "count": math.nan}, 0.1) is None


@pytest.mark.parametrize("wrong", [math.nan, -1, None])
def test_nccl_05_a_wrong_count_that_is_not_a_count(h100_topology: Topology, wrong: object) -> None:
    text = perf_output(480.0).replace("      0  ", "    N/A  " if wrong is None else f"  {wrong!s:>5}  ", 1)
    m = nccl_measurement(result("sim01", text), "all_reduce", ("sim01",), timeout_s=60, judge_min_bytes=1 << 30)
    assert m.unchecked >= 1 and not m.corrupt
    doc = section(single=m)
    verdict = judged("NCCL-05", h100_topology, doc)
    assert verdict.status is Status.INCOMPLETE and "#wrong cells are not counts" in verdict.reason


@pytest.mark.parametrize("busbw", ["nan", "inf", "-12.00"])
def test_nccl_measurement_refuses_a_busbw_that_is_not_one(busbw: str) -> None:
    text = perf_output(480.0).replace("480.00", busbw)
    m = nccl_measurement(result("sim01", text), "all_reduce", ("sim01",), timeout_s=60, judge_min_bytes=1 << 30)
    assert m.status == "unmeasured" and m.busbw_gbps is None and "is not a bandwidth" in m.reason
    assert not judge.passed(m, 0.0)


def test_the_judge_ignores_impossible_values() -> None:
    assert judge.median([math.nan, 2.0, math.inf, None, -1.0, 4.0]) == 3.0
    assert judge.fleet_stats({"a": math.nan, "b": 1.0, "c": 3.0}) == {"median": 2.0, "count": 2.0}
    assert not judge.passed(nccl(["a", "b"], math.nan), 0.0)
    assert not judge.passed(nccl(["a", "b"], -1.0), -5.0)
    assert "not a bandwidth" in judge.describe(nccl(["a", "b"], math.nan))
    assert nvb_minimum(nvb(low={(0, 1): math.nan}), "device_to_device_memcpy_read_ce") == 392.0
    assert [bandwidth_ok(v) for v in (0.0, 400.0, math.nan, -0.1, True, "1")] == [True, True, False, False,
                                                                                 False, False]


def test_slow_rails_ignore_a_rail_that_cannot_be_true(h100_topology: Topology) -> None:
    rails = {f"mlx5_{i}": nccl(["a", "b"], 45.6) for i in range(8)}
    rails["mlx5_3"] = nccl(["a", "b"], math.nan)
    assert judge.slow_rails(rails, h100_topology) == []


def test_multi_node_records_that_are_not_records(h100_topology: Topology) -> None:
    multi = {"applicable": True, "group": {"busbw_gbps": 300.0}, "group_passed": True}
    verdict = judged("NCCL-03", h100_topology, section(multi=multi))
    assert verdict.status is Status.INCOMPLETE and "the multi-node run: unreadable measurement" in verdict.reason
    group = nccl(["sim01", "sim02"], math.nan).to_json()
    loc = {"status": "named", "rounds": 2, "floor_gbps": math.nan, "tests": [], "named": ["sim01"]}
    verdict = judged("NCCL-03", h100_topology, section(multi={"applicable": True, "group": group,
                                                              "group_passed": False, "localization": loc}))
    assert verdict.status is Status.FAIL and "pairs >= the pair floor (nan)" in verdict.reason
    assert "busbw nan (not a bandwidth)" in verdict.reason


@pytest.mark.parametrize("key", ["single", "multi"])
@pytest.mark.parametrize("value", [[1, 2], "x", 3])
def test_fabric_facts_parts_of_the_wrong_shape(h100_topology: Topology, key: str, value: object) -> None:
    doc = section()
    doc[key] = value
    for check_id in ("NCCL-01", "NCCL-03", "NCCL-04", "NCCL-05") if key == "multi" else ("NCCL-01", "NCCL-05"):
        if key == "multi" and check_id in ("NCCL-01",):
            continue
        verdict = judged(check_id, h100_topology, doc)
        assert verdict.status is Status.INCOMPLETE and f"{key} is not a mapping" in verdict.reason, check_id
