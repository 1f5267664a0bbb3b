"""Edges of the fabric judge: bounds exactly at their limit, defaults when a reference is absent, empty
reasons, stored records that are partly unreadable (each test here fails on a planted bug)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from fabric_support import gdr_section, nccl, nvb, section

from burnin.checks.base import evaluate
from burnin.checks.fabric import _quote, _size
from burnin.evaluate.verdict import Status, Verdict
from burnin.fabric import judge
from burnin.fabric.measure import NcclMeasurement, NvbMeasurement
from burnin.facts import Facts
from burnin.topology import Topology
from burnin.topology.model import Reference


def run(check_id: str, topology: Topology, doc: dict[str, Any], node: str = "sim01") -> Verdict:
    return evaluate(check_id, Facts(node, {"fabric": doc}), topology)


def with_ref(topology: Topology, key: str, ref: Reference | None) -> Topology:
    refs = {k: v for k, v in topology.references.items() if k != key}
    if ref is not None:
        refs[key] = ref
    return dataclasses.replace(topology, references=refs)


def test_quoting_keeps_forty_characters() -> None:
    assert _quote("a" * 38) == "'" + "a" * 38 + "'"  # 40 with its quotes: whole
    assert _quote("a" * 39) == "'" + "a" * 36 + "..."  # 41: cut to 40


def test_sizes_at_a_unit_boundary() -> None:
    assert (_size(1 << 30), _size((1 << 30) - 1), _size(1 << 10), _size(1023), _size(None)) == (
        "1 GiB", "1024 MiB", "1 KiB", "1023 B", "?")


# ---------------------------------------------------------------- judge.py


def test_stragglers_need_three_measured_nodes() -> None:
    assert judge.straggler(80.0, {"median": 100.0, "count": 3}, 0.1) is not None
    assert judge.straggler(80.0, {"median": 100.0, "count": 2}, 0.1) is None


def test_straggler_and_pass_bounds_are_inclusive() -> None:
    mid, tol = 400.0, 0.1
    assert judge.straggler((1.0 - tol) * mid, {"median": mid, "count": 8}, tol) is None
    assert judge.straggler((1.0 - tol) * mid - 0.01, {"median": mid, "count": 8}, tol) is not None
    assert judge.passed(nccl(["a", "b"], 300.0), 300.0) and not judge.passed(nccl(["a", "b"], 299.99), 300.0)


def test_defaults_when_the_topology_has_no_reference(h100_topology: Topology) -> None:
    assert judge.tolerance(with_ref(h100_topology, judge.TOLERANCE_REF, None)) == judge.DEFAULT_TOLERANCE
    wide = Reference(0.2, "site", lower=0.0, upper=0.5)
    assert judge.tolerance(with_ref(h100_topology, judge.TOLERANCE_REF, wide)) == 0.2
    assert judge.gdr_spread(with_ref(h100_topology, judge.GDR_SPREAD_REF, None)) == judge.DEFAULT_GDR_SPREAD
    assert judge.gdr_spread(with_ref(h100_topology, judge.GDR_SPREAD_REF, wide)) == 0.2
    assert judge.floor(None) == 0.0 and judge.floor(Reference(5.0, "no bounds")) == 0.0
    assert judge.floor(Reference(5.0, "x", lower=4.0)) == 4.0


def test_slow_rails_at_their_bounds(h100_topology: Topology) -> None:
    rails = {f"mlx5_{i}": nccl(["a", "b"], 45.0) for i in range(8)}
    rails["mlx5_3"] = nccl(["a", "b"], (1.0 - 0.10) * 45.0)  # exactly at the tolerance: not slow
    assert judge.slow_rails(rails, h100_topology) == []
    at_floor = {f"mlx5_{i}": nccl(["a", "b"], 42.0) for i in range(8)}
    at_floor["mlx5_5"] = nccl(["a", "b"], 40.0)  # exactly the rail floor, within tolerance
    assert judge.slow_rails(at_floor, h100_topology) == []
    at_floor["mlx5_5"] = nccl(["a", "b"], 39.9)
    assert [r.hca for r in judge.slow_rails(at_floor, h100_topology)] == ["mlx5_5"]


def test_an_unfinished_rail_run_is_not_a_rail(h100_topology: Topology) -> None:
    rails = {f"mlx5_{i}": nccl(["a", "b"], 45.0) for i in range(8)}
    rails["mlx5_6"] = nccl(["a", "b"], 10.0, status="unmeasured", reason="hung")
    assert judge.slow_rails(rails, h100_topology) == []


# ---------------------------------------------------------------- IB-08 with only two HCAs measured


def test_ib_08_spread_with_two_hcas_measured(h100_topology: Topology) -> None:
    runs = gdr_section()
    for i in range(2, 8):
        del runs[f"mlx5_{i}"]
    runs["mlx5_0"]["host"]["bw_average_gbps"] = 420.0
    runs["mlx5_1"]["host"]["bw_average_gbps"] = 370.0  # above the floor, 6% below the median 395
    doc = section()
    doc["ib_write_bw"] = runs
    verdict = run("IB-08", h100_topology, doc)
    assert verdict.status is Status.FAIL and "mlx5_1 host memory 370.00 Gb/s, 6.3% below" in verdict.reason


# ---------------------------------------------------------------- reasons when the tool said nothing


def test_empty_reasons_get_a_cause(h100_topology: Topology) -> None:
    doc = section()
    doc["single"]["all_gather"] = NcclMeasurement("all_gather", ("sim01",), "unmeasured").to_json()
    assert "the single-node all_gather did not complete" in run("NCCL-02", h100_topology, doc).reason
    empty = NcclMeasurement("all_reduce", ("sim01",), "unmeasured", rows=0)
    assert "all_reduce single-node: no result rows" in run("NCCL-05", h100_topology, section(single=empty)).reason
    assert "nvbandwidth did not complete" in run("NVL-01", h100_topology, section(nvbw=NvbMeasurement("x"))).reason


def test_a_matrix_with_a_row_that_is_not_a_row(h100_topology: Topology) -> None:
    doc = section()
    doc["nvbandwidth"]["testcases"]["device_to_device_memcpy_read_ce"][3] = "392 392"
    assert "printed no device_to_device_memcpy_read_ce matrix" in run("NVL-01", h100_topology, doc).reason


def test_nvl_01_pair_exactly_at_the_tolerance_passes(h100_topology: Topology) -> None:
    value = (1.0 - 0.10) * 392.0
    assert run("NVL-01", h100_topology, section(nvbw=nvb(low={(2, 6): value}))).status is Status.PASS
    failed = run("NVL-01", h100_topology, section(nvbw=nvb(low={(2, 6): value - 0.01})))
    assert failed.status is Status.FAIL and "gpu2->gpu6" in failed.reason


def test_nvl_02_straggler_above_the_reference(h100_topology: Topology) -> None:
    doc = section(nvbw=nvb(h2d=50.0, d2h=55.1))
    doc["fleet"]["nvl.h2d_min"] = {"median": 60.0, "count": 8}
    verdict = run("NVL-02", h100_topology, doc)
    assert verdict.status is Status.FAIL and "H2D straggler: 50.0 GB/s is 17% below" in verdict.reason


# ---------------------------------------------------------------- localisation records


def _multi(status: str, tests: list[Any], **loc: Any) -> dict[str, Any]:
    return {"applicable": True, "group": nccl(["sim01", "sim02", "sim03"], 180.0).to_json(), "group_passed": False,
            "localization": {"status": status, "rounds": 3, "floor_gbps": 330.0, "tests": tests, **loc}}


def _test(nodes: tuple[str, ...], passed: bool, bw: float, kind: str = "partner") -> dict[str, Any]:
    return {"round": 2, "kind": kind, "nodes": list(nodes), "suspect": nodes[0], "passed": passed,
            "measurement": nccl(nodes, bw).to_json()}


def test_evidence_shows_the_failed_tests_and_skips_unreadable_ones(h100_topology: Topology) -> None:
    tests = ["junk", {"round": 1, "passed": False}, _test(("sim01", "sim02"), True, 367.0),
             _test(("sim01", "sim03"), False, 181.0)]
    multi = _multi("named", tests, named=["sim01"], rails={f"mlx5_{i}": {} for i in range(8)}, slow_hcas=[])
    verdict = run("NCCL-04", h100_topology, section(multi=multi))
    assert verdict.status is Status.FAIL
    assert "no single slow HCA over 8 single-rail runs" in verdict.reason
    assert "sim01+sim03 181.0 GB/s (partner, round 2)" in verdict.reason and "367.0" not in verdict.reason


def test_cleared_beside_unresolved_nodes_passes(h100_topology: Topology) -> None:
    multi = _multi("cleared", [_test(("sim01", "sim02"), True, 367.0)], named=[], unresolved=["sim03"])
    verdict = run("NCCL-03", h100_topology, section(multi=multi))
    assert verdict.status is Status.PASS and "cleared by sim01+sim02 367.0 GB/s" in verdict.reason


@pytest.mark.parametrize("applicable", [False])
def test_not_applicable_needs_false_itself(h100_topology: Topology, applicable: bool) -> None:
    from burnin.checks.fabric import multi_node_applicable

    reason = "a single node: no multi-node run"
    doc = section(multi={"applicable": applicable, "reason": reason})
    assert multi_node_applicable(Facts("sim01", {"fabric": doc})) == (False, reason)
    doc = section(multi={"applicable": 0, "reason": reason, "group": nccl(["sim01", "sim02"]).to_json()})
    assert multi_node_applicable(Facts("sim01", {"fabric": doc}))[0] is True  # only False stands aside
