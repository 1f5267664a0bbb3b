"""Fabric checks as evaluation tables: facts section in, verdict out (pure)."""

from __future__ import annotations

from typing import Any

import pytest
from fabric_support import fleet, nccl, nvb, section

from burnin.checks.base import evaluate
from burnin.checks.fabric import multi_node_applicable
from burnin.evaluate.verdict import Status, Verdict
from burnin.fabric import judge
from burnin.fabric.measure import NcclMeasurement
from burnin.facts import Facts
from burnin.topology import Topology


def run(check_id: str, topology: Topology, node: str = "sim01", **kwargs: Any) -> Verdict:
    return evaluate(check_id, Facts(node, {"fabric": section(node, **kwargs)}), topology)


@pytest.mark.parametrize(("busbw", "nvls", "fleet_median", "status", "words"), [
    (479.5, True, 480.0, Status.PASS, "479.5 GB/s at 8 GiB"),
    (346.9, True, 480.0, Status.FAIL, ">= 440 GB/s"),          # nvlink-down: NVLS lost, ring rate
    (441.0, True, 500.0, Status.FAIL, "straggler"),            # clears 440 but 12% below the run's median
    (445.0, True, 480.0, Status.PASS, "445.0"),                # 7% below: within tolerance
    (360.0, False, 365.0, Status.PASS, "NVLS off"),            # ring reference 340 with NVLS off
    (330.0, False, 365.0, Status.FAIL, ">= 340 GB/s"),
])
def test_nccl_01_table(h100_topology: Topology, busbw: float, nvls: bool, fleet_median: float, status: Status,
                       words: str) -> None:
    verdict = run("NCCL-01", h100_topology, single=nccl(["sim01"], busbw, nvls=nvls),
                  fleet_stats=fleet(single=fleet_median))
    assert verdict.status is status, verdict.reason
    assert words in verdict.reason


def test_nccl_01_hang_is_incomplete_with_the_last_lines(h100_topology: Topology) -> None:
    hung = nccl(["sim01"], None, status="unmeasured",
                reason="all_reduce_perf hung on sim01: no result within 60 s; last output: 4096 1024 float sum")
    verdict = run("NCCL-01", h100_topology, single=hung)
    assert verdict.status is Status.INCOMPLETE and "hung" in verdict.reason and "4096 1024" in verdict.reason


def test_a_fleet_of_two_has_no_stragglers(h100_topology: Topology) -> None:
    verdict = run("NCCL-01", h100_topology, single=nccl(["sim01"], 441.0),
                  fleet_stats=fleet(single=500.0, count=2))
    assert verdict.status is Status.PASS


def test_no_fabric_section_is_incomplete(h100_topology: Topology) -> None:
    for check_id in ("NCCL-01", "NCCL-03", "NCCL-04", "NCCL-05", "NVL-01", "NVL-02", "IB-08"):
        verdict = evaluate(check_id, Facts("sim01", {"sources": {}}), h100_topology)
        assert verdict.status is Status.INCOMPLETE and "fabric phase did not run" in verdict.reason
        down = evaluate(check_id, Facts.unreachable_node("sim01", "ssh: no route to host"), h100_topology)
        assert down.status is Status.INCOMPLETE and "no route" in down.reason


def test_unavailable_allocation_is_incomplete(h100_topology: Topology) -> None:
    facts = Facts("sim01", {"fabric": {**section(), "unavailable": "no Slurm allocation: nodes busy"}})
    assert evaluate("NCCL-01", facts, h100_topology).status is Status.INCOMPLETE


def _multi(group: NcclMeasurement, passed: bool, loc: dict[str, Any] | None = None,
           regroup: NcclMeasurement | None = None, regroup_passed: bool = False) -> dict[str, Any]:
    multi: dict[str, Any] = {"applicable": True, "group": group.to_json(), "group_passed": passed,
                             "floor_gbps": 300.0}
    if loc is not None:
        multi["localization"] = loc
    if regroup is not None:
        multi["regroup"] = regroup.to_json()
        multi["regroup_passed"] = regroup_passed
    return multi


def _loc(status: str, tests: list[tuple[str, tuple[str, ...], bool, float, int]], *, named: list[str] | None = None,
         slow: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"status": status, "rounds": 3, "named": named or [], "floor_gbps": 330.0, "median_gbps": 367.0,
            "reason": "the group failed",
            "tests": [{"round": r, "kind": kind, "nodes": list(nodes), "suspect": nodes[0] if kind != "pair" else None,
                       "passed": ok, "measurement": nccl(nodes, bw).to_json()}
                      for kind, nodes, ok, bw, r in tests],
            "rails": {}, "rail_partner": None, "slow_hcas": slow or []}


GROUP = ["sim01", "sim02", "sim03", "sim04"]
NAMED = _loc("named", [("pair", ("sim04", "sim01"), False, 182.0, 1), ("partner", ("sim04", "sim02"), False, 181.0, 2),
                       ("confirm", ("sim04", "sim03"), False, 183.0, 3)], named=["sim04"],
             slow=[{"hca": "mlx5_2", "busbw_gbps": 22.9, "median_gbps": 45.6,
                    "reason": "22.9 GB/s vs 45.6 GB/s median of the rails"}])


def test_named_node_fails_nccl_03_and_04_with_the_slow_hca(h100_topology: Topology) -> None:
    multi = _multi(nccl(GROUP, 180.0), False, NAMED)
    for check_id in ("NCCL-03", "NCCL-04"):
        verdict = run(check_id, h100_topology, "sim04", multi=multi)
        assert verdict.status is Status.FAIL
        assert "mlx5_2" in verdict.reason and "sim04+sim01 182.0 GB/s" in verdict.reason
    assert run("NCCL-04", h100_topology, "sim04", multi=multi).reason.startswith("NCCL-04 sim04 slow HCA mlx5_2")


def test_cleared_node_passes_when_the_group_without_the_named_passes(h100_topology: Topology) -> None:
    loc = _loc("cleared", [("pair", ("sim01", "sim04"), False, 182.0, 1), ("partner", ("sim01", "sim02"), True, 367.0,
                                                                             2)], named=["sim04"])
    multi = _multi(nccl(GROUP, 180.0), False, loc, nccl(["sim01", "sim02", "sim03"], 362.0), True)
    assert run("NCCL-03", h100_topology, multi=multi).status is Status.PASS
    verdict = run("NCCL-04", h100_topology, multi=multi)
    assert verdict.status is Status.PASS and "sim01+sim02 367.0 GB/s" in verdict.reason
    # the cleared nodes still slow together: not one node's fault, so nobody is failed for it
    still_slow = _multi(nccl(GROUP, 180.0), False, loc, nccl(["sim01", "sim02", "sim03"], 250.0), False)
    verdict = run("NCCL-03", h100_topology, multi=still_slow)
    assert verdict.status is Status.INCOMPLETE and "not one node's fault" in verdict.reason
    assert "sim[01-03] 250.0 GB/s" in verdict.reason


def test_group_failure_nobody_explains_is_incomplete_for_everyone(h100_topology: Topology) -> None:
    loc = _loc("cleared", [("pair", ("sim01", "sim02"), True, 367.0, 1)])
    verdict = run("NCCL-03", h100_topology, multi=_multi(nccl(GROUP, 250.0), False, loc))
    assert verdict.status is Status.INCOMPLETE and "every pair passed" in verdict.reason
    assert "sim01+sim02 367.0 GB/s" in verdict.reason


def test_unresolved_is_incomplete_never_failed(h100_topology: Topology) -> None:
    """Two nodes, one failing pair, no per-node test that separates them: both incomplete."""
    loc = _loc("unresolved", [("pair", ("sim01", "sim02"), False, 180.0, 1)])
    multi = _multi(nccl(["sim01", "sim02"], 180.0), False, loc)
    for node in ("sim01", "sim02"):
        for check_id in ("NCCL-03", "NCCL-04"):
            verdict = run(check_id, h100_topology, node, multi=multi)
            assert verdict.status is Status.INCOMPLETE, verdict.reason
    assert "neither clear nor name sim02" in run("NCCL-03", h100_topology, "sim02", multi=multi).reason


def test_unlocalised_failing_group_is_incomplete(h100_topology: Topology) -> None:
    """localize: never: a failing group cannot be pinned on anyone."""
    multi = _multi(nccl(GROUP, 180.0), False)
    for check_id in ("NCCL-03", "NCCL-04"):
        verdict = run(check_id, h100_topology, multi=multi)
        assert verdict.status is Status.INCOMPLETE and "localize: never" in verdict.reason
    hung = _multi(nccl(GROUP, None, status="unmeasured", reason="all_reduce_perf hung"), False)
    assert "did not complete" in run("NCCL-03", h100_topology, multi=hung).reason


def test_passing_group_without_localisation(h100_topology: Topology) -> None:
    multi = _multi(nccl(GROUP, 355.0), True)
    assert run("NCCL-03", h100_topology, multi=multi).status is Status.PASS
    verdict = run("NCCL-04", h100_topology, multi=multi)
    assert verdict.status is Status.PASS and "not needed" in verdict.reason


def test_excluded_node_and_single_node_runs(h100_topology: Topology) -> None:
    excluded = {"applicable": True, "excluded": "left out of multi-node runs: single-node all_reduce incomplete"}
    assert run("NCCL-03", h100_topology, multi=excluded).status is Status.INCOMPLETE
    alone = {"applicable": False, "reason": "a single node: no multi-node run"}
    assert multi_node_applicable(Facts("sim01", {"fabric": section(multi=alone)})) == (False, alone["reason"])
    assert multi_node_applicable(Facts("sim01", {})) == (True, "")


def test_nccl_05_wrong_values(h100_topology: Topology) -> None:
    assert run("NCCL-05", h100_topology).status is Status.PASS
    corrupt = run("NCCL-05", h100_topology, single=nccl(["sim01"], 480.0, wrong=12))
    assert corrupt.status is Status.FAIL and "12 wrong" in corrupt.reason
    # a corrupt group run is pinned on the suspect that failed with known-good partners, not on the others
    loc = _loc("named", [("partner", ("sim04", "sim01"), False, 367.0, 2)], named=["sim04"])
    loc["tests"][0]["measurement"] = nccl(["sim04", "sim01"], 367.0, wrong=5).to_json()
    multi = _multi(nccl(GROUP, 367.0, wrong=5), False, loc)
    assert run("NCCL-05", h100_topology, "sim04", multi=multi).status is Status.FAIL
    cleared = {**loc, "status": "cleared", "tests": []}
    assert run("NCCL-05", h100_topology, "sim02", multi=_multi(nccl(GROUP, 367.0, wrong=5), False, cleared)
               ).status is Status.PASS
    # not localised: wrong values in the group are nobody's in particular (incomplete, not failed)
    unpinned = run("NCCL-05", h100_topology, "sim02", multi=_multi(nccl(GROUP, 367.0, wrong=5), False))
    assert unpinned.status is Status.INCOMPLETE and "not pinned on one node" in unpinned.reason


def test_nvl_01_pairs_node_median_and_fleet(h100_topology: Topology) -> None:
    assert run("NVL-01", h100_topology).status is Status.PASS
    slow_gpu = {(r, 3): 235.0 for r in range(8) if r != 3} | {(3, c): 235.0 for c in range(8) if c != 3}
    verdict = run("NVL-01", h100_topology, nvbw=nvb(low=slow_gpu))
    assert verdict.status is Status.FAIL and "gpu0->gpu3 235.0 GB/s" in verdict.reason
    dipped = run("NVL-01", h100_topology, nvbw=nvb(low={(0, 1): 345.0}))  # above 335, 12% below the node median
    assert dipped.status is Status.FAIL and "below the node's pair median" in dipped.reason
    one_link = {(r, 3): 370.0 for r in range(8) if r != 3}  # 17/18 of 392: within tolerance
    assert run("NVL-01", h100_topology, nvbw=nvb(low=one_link)).status is Status.PASS
    fleet_slow = run("NVL-01", h100_topology, nvbw=nvb(d2d=340.0), fleet_stats=fleet(d2d=392.0))
    assert fleet_slow.status is Status.FAIL and "straggler" in fleet_slow.reason


def test_nvl_02_host_device(h100_topology: Topology) -> None:
    verdict = run("NVL-02", h100_topology)
    assert verdict.status is Status.PASS and "H2D min 55.3" in verdict.reason
    gen4 = run("NVL-02", h100_topology, nvbw=nvb(h2d=27.6, d2h=27.5))
    assert gen4.status is Status.FAIL and "gpu0 H2D 27.6 GB/s" in gen4.reason


def test_slow_rails_name_one_hca_not_a_uniformly_slow_node(h100_topology: Topology) -> None:
    rails = {f"mlx5_{i}": nccl(["a", "b"], 45.6) for i in range(8)}
    assert judge.slow_rails(rails, h100_topology) == []
    rails["mlx5_2"] = nccl(["a", "b"], 22.9)
    slow = judge.slow_rails(rails, h100_topology)
    assert [s.hca for s in slow] == ["mlx5_2"] and "median of the rails" in slow[0].reason
    uniform = {f"mlx5_{i}": nccl(["a", "b"], 20.0) for i in range(8)}
    assert judge.slow_rails(uniform, h100_topology) == []


def test_pair_floor_and_fleet_stats(h100_topology: Topology) -> None:
    assert judge.pair_floor(h100_topology, 367.0) == pytest.approx(330.3)
    assert judge.pair_floor(h100_topology, 200.0) == 300.0  # the reference floor wins
    assert judge.fleet_stats({"a": 1.0, "b": None, "c": 3.0}) == {"median": 2.0, "count": 2.0}
    assert judge.straggler(80.0, {"median": 100.0, "count": 5}, 0.1) is not None
    assert judge.straggler(95.0, {"median": 100.0, "count": 5}, 0.1) is None


def test_nccl_02_other_collectives(h100_topology: Topology) -> None:
    doc = section()
    doc["single"]["all_gather"] = NcclMeasurement("all_gather", ("sim01",), "ok", busbw_gbps=361.0).to_json()
    doc["single"]["alltoall"] = NcclMeasurement("alltoall", ("sim01",), "ok", busbw_gbps=250.0).to_json()
    doc["fleet"]["single.alltoall"] = {"median": 340.0, "count": 8}
    verdict = evaluate("NCCL-02", Facts("sim01", {"fabric": doc}), h100_topology)
    assert verdict.status is Status.FAIL and "alltoall straggler" in verdict.reason  # no absolute floor for it
    doc["single"]["alltoall"] = NcclMeasurement("alltoall", ("sim01",), "ok", busbw_gbps=335.0).to_json()
    verdict = evaluate("NCCL-02", Facts("sim01", {"fabric": doc}), h100_topology)
    assert verdict.status is Status.PASS and "all_gather 361.0 GB/s" in verdict.reason
    doc["single"]["all_gather"] = NcclMeasurement("all_gather", ("sim01",), "ok", busbw_gbps=300.0).to_json()
    assert evaluate("NCCL-02", Facts("sim01", {"fabric": doc}), h100_topology).status is Status.FAIL
    only = evaluate("NCCL-02", Facts("sim01", {"fabric": section()}), h100_topology)
    assert only.status is Status.INCOMPLETE
