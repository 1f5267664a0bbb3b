"""Edges of the fabric thresholds (burnin.fabric.judge): each bound at, just below and just above."""

from __future__ import annotations

import dataclasses
import math

import pytest

from burnin.fabric import judge
from burnin.fabric.measure import NcclMeasurement
from burnin.topology import Topology
from burnin.topology.model import Reference


def measured(busbw: float | None, *, status: str = "ok", wrong: int = 0, out_of_bounds: int = 0,
             reason: str = "", nodes: tuple[str, ...] = ("sim01", "sim02")) -> NcclMeasurement:
    return NcclMeasurement("all_reduce", nodes, status, busbw_gbps=busbw, wrong=wrong, out_of_bounds=out_of_bounds,
                           reason=reason)


def below(value: float) -> float:
    return math.nextafter(value, -math.inf)


def with_refs(topology: Topology, **refs: Reference | None) -> Topology:
    references = dict(topology.references)
    for key, ref in refs.items():
        if ref is None:
            references.pop(key, None)
        else:
            references[key] = ref
    return dataclasses.replace(topology, references=references)


def test_tolerance_comes_from_the_topology_or_defaults_to_ten_percent(h100_topology: Topology) -> None:
    custom = with_refs(h100_topology, **{judge.TOLERANCE_REF: Reference(0.2, "test", 0.0, 0.5)})
    assert judge.tolerance(custom) == 0.2
    assert judge.tolerance(with_refs(h100_topology, **{judge.TOLERANCE_REF: None})) == judge.DEFAULT_TOLERANCE


@pytest.mark.parametrize(("nvls", "key"), [(True, judge.SINGLE_REF), (None, judge.SINGLE_REF),
                                           (False, judge.SINGLE_RING_REF)])
def test_single_reference_is_the_ring_one_only_when_nvls_is_off(h100_topology: Topology, nvls: bool | None,
                                                                key: str) -> None:
    found, ref = judge.single_reference(h100_topology, nvls)
    assert found == key
    assert ref is h100_topology.ref(key)


def test_floor_is_the_lower_bound_or_zero() -> None:
    assert judge.floor(Reference(480.0, "t", lower=440.0)) == 440.0
    assert judge.floor(Reference(480.0, "t")) == 0.0
    assert judge.floor(None) == 0.0


@pytest.mark.parametrize(("values", "expected"), [
    ([], None), ([None], None), ([5.0], 5.0), ([3.0, 1.0], 2.0), ([3.0, None, 1.0, 2.0], 2.0),
    ([4.0, 1.0, 3.0, 2.0], 2.5), ([9.0, 1.0, 5.0, 7.0, 3.0], 5.0),
])
def test_median_of_odd_and_even_counts_skips_unmeasured(values: list[float | None], expected: float | None) -> None:
    assert judge.median(values) == expected


def test_relative_floor_without_a_median_is_zero() -> None:
    assert judge.relative_floor(None, 0.1) == 0.0
    assert judge.relative_floor(400.0, 0.25) == 300.0


def test_pair_floor_is_the_higher_of_the_reference_and_the_run(h100_topology: Topology) -> None:
    reference = judge.floor(h100_topology.ref(judge.MULTI_REF))
    assert reference > 0
    assert judge.pair_floor(h100_topology, None) == reference
    assert judge.pair_floor(h100_topology, 1000.0) == pytest.approx(900.0)
    assert judge.pair_floor(h100_topology, reference / 0.9 - 10) == reference


def test_passed_at_the_minimum_and_not_just_below() -> None:
    assert judge.passed(measured(300.0), 300.0)
    assert not judge.passed(measured(below(300.0)), 300.0)


@pytest.mark.parametrize("measurement", [
    measured(400.0, wrong=1), measured(400.0, out_of_bounds=1), measured(400.0, status="unmeasured"),
    measured(None),
])
def test_a_wrong_unfinished_or_unmeasured_run_never_passes(measurement: NcclMeasurement) -> None:
    assert not judge.passed(measurement, 0.0)


def test_describe_says_wrong_values_hung_or_the_bandwidth() -> None:
    assert judge.describe(measured(400.0, wrong=12)) == "sim01+sim02 12 wrong values"
    assert judge.describe(measured(None, status="unmeasured", reason="hung; no output for 60 s")) == \
        "sim01+sim02 hung"
    assert judge.describe(measured(184.24)) == "sim01+sim02 184.2 GB/s"


def fleet(median: float, count: int) -> dict[str, float]:
    return {"median": median, "count": float(count)}


def test_straggler_just_below_the_tolerance_of_a_three_node_fleet() -> None:
    edge = (1.0 - 0.1) * 400.0
    found = judge.straggler(below(edge), fleet(400.0, judge.MIN_FLEET), 0.1)
    assert found is not None
    assert (found.median, found.count, found.tolerance) == (400.0, 3, 0.1)
    assert judge.straggler(edge, fleet(400.0, 3), 0.1) is None


def test_min_fleet_is_three() -> None:
    assert judge.MIN_FLEET == 3
    assert judge.straggler(100.0, fleet(400.0, 2), 0.1) is None
    assert judge.straggler(100.0, fleet(400.0, 3), 0.1) is not None


@pytest.mark.parametrize("stats", [None, {}, {"count": 8.0}])
def test_no_fleet_no_straggler(stats: dict[str, float] | None) -> None:
    assert judge.straggler(1.0, stats, 0.1) is None


def test_no_value_no_straggler() -> None:
    assert judge.straggler(None, fleet(400.0, 8), 0.1) is None


def test_straggler_description_quotes_value_median_and_tolerance() -> None:
    found = judge.Straggler(300.0, 400.0, 0.1, 8)
    assert found.below == pytest.approx(0.25)
    assert found.describe() == "straggler: 300.0 GB/s is 25% below the run's median 400.0 GB/s of 8 (tolerance 10%)"
    assert judge.Straggler(300.0, 0.0, 0.1, 8).below == 0.0


def test_fleet_stats_counts_only_measured_values() -> None:
    assert judge.fleet_stats({"a": None}) == {}
    assert judge.fleet_stats({}) == {}
    assert judge.fleet_stats({"a": 1.0, "b": None, "c": 3.0, "d": 2.0}) == {"median": 2.0, "count": 3.0}


def rails(**busbw: float | None) -> dict[str, NcclMeasurement]:
    return {hca: measured(value, status="ok" if value is not None else "unmeasured") for hca, value in busbw.items()}


def test_one_slow_rail_is_named_against_the_median(h100_topology: Topology) -> None:
    slow = judge.slow_rails(rails(mlx5_0=46.0, mlx5_1=46.0, mlx5_2=30.0, mlx5_3=46.0), h100_topology)
    assert [(s.hca, s.busbw_gbps, s.median_gbps) for s in slow] == [("mlx5_2", 30.0, 46.0)]
    assert slow[0].reason == "30.0 GB/s vs 46.0 GB/s median of the rails"


def test_a_rail_at_the_tolerance_is_not_slow_just_below_is(h100_topology: Topology) -> None:
    no_floor = with_refs(h100_topology, **{judge.RAIL_REF: None})
    edge = (1.0 - judge.tolerance(no_floor)) * 100.0
    assert judge.slow_rails(rails(a=100.0, b=100.0, c=edge), no_floor) == []
    assert [s.hca for s in judge.slow_rails(rails(a=100.0, b=100.0, c=below(edge)), no_floor)] == ["c"]


def test_a_rail_near_the_median_but_under_the_reference_floor_is_named(h100_topology: Topology) -> None:
    floor = judge.floor(h100_topology.ref(judge.RAIL_REF))
    assert floor > 0
    slow = judge.slow_rails(rails(a=floor + 2, b=floor + 2, c=below(floor)), h100_topology)
    assert [s.hca for s in slow] == ["c"]
    assert slow[0].reason.endswith(f"below the rail floor {floor:g} GB/s")
    assert judge.slow_rails(rails(a=floor + 2, b=floor + 2, c=floor), h100_topology) == []


def test_every_rail_slow_is_not_one_hca(h100_topology: Topology) -> None:
    assert judge.slow_rails(rails(a=10.0, b=10.0), h100_topology) == []


def test_unmeasured_rails_are_left_out_and_none_measured_names_nothing(h100_topology: Topology) -> None:
    assert judge.slow_rails(rails(a=None, b=None), h100_topology) == []
    slow = judge.slow_rails(rails(a=46.0, b=46.0, c=20.0, d=None), h100_topology)
    assert [s.hca for s in slow] == ["c"]


def test_gdr_spread_comes_from_the_topology_or_defaults(h100_topology: Topology) -> None:
    custom = with_refs(h100_topology, **{judge.GDR_SPREAD_REF: Reference(0.07, "test", 0.0, 0.5)})
    assert judge.gdr_spread(custom) == 0.07
    assert judge.gdr_spread(with_refs(h100_topology, **{judge.GDR_SPREAD_REF: None})) == judge.DEFAULT_GDR_SPREAD


def test_a_rail_run_that_did_not_complete_is_left_out_even_with_a_number(h100_topology: Topology) -> None:
    hung = measured(5.0, status="unmeasured", reason="hung")
    assert judge.slow_rails({"a": measured(46.0), "b": measured(46.0), "c": hung}, h100_topology) == []
