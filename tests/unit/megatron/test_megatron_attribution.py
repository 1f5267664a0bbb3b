"""Attribution never blames by majority (issue 19): slow majorities, disagreeing members, a missing launcher."""

from __future__ import annotations

import math
from typing import Any

import pytest
from megatron_support import FLOPS_TP8, iterations, run, section

from burnin.checks import load_all
from burnin.evaluate.verdict import Status, Verdict
from burnin.facts import Facts
from burnin.megatron import judge
from burnin.megatron.alone import passed_alone
from burnin.megatron.record import MEMBERS_KEY, multi_section
from burnin.topology.model import Topology

HEALTHY, SLOW = 430.0, 344.0  # the simulator's rates; 344 clears the 330 floor


def _rack(total: int, slow: int) -> dict[str, dict[str, Any]]:
    """Each node's section after its single-node run, the run's median attached as the phase does."""
    sections = {f"n{i}": {"single": run(nodes=(f"n{i}",), iterations=iterations(tflops=SLOW if i <= slow
                                                                                 else HEALTHY))}
                for i in range(1, total + 1)}
    judge.attach_fleet(sections)
    return sections


@pytest.mark.parametrize(("slow", "total"), [(1, 2), (2, 3), (3, 4), (5, 8)],
                         ids=["1-of-2", "2-of-3", "3-of-4", "5-of-8"])
def test_a_slow_majority_cannot_make_itself_the_norm(h100_topology: Topology, slow: int, total: int) -> None:
    sections = _rack(total, slow)
    outcomes = {node: passed_alone(Facts(node, {"megatron": data}), h100_topology) for node, data in sections.items()}
    for i in range(1, total + 1):
        ok, why = outcomes[f"n{i}"]
        if i <= slow:
            assert not ok and why.startswith("MEG-04") and "straggler: 344.0 TFLOP/s/GPU" in why, why
            assert "the topology's reference 400 TFLOP/s/GPU" in why, why
        else:
            assert ok, why


@pytest.mark.parametrize("total", [2, 3, 8])
def test_a_healthy_rack_passes_alone(h100_topology: Topology, total: int) -> None:
    sections = _rack(total, 0)
    assert all(passed_alone(Facts(n, {"megatron": d}), h100_topology) == (True, "") for n, d in sections.items())


def _meg04(node: str, data: dict[str, Any], topology: Topology) -> Verdict:
    return load_all()["MEG-04"].func(Facts(node, {"megatron": data}), topology)


def test_two_members_that_disagree_are_both_incomplete(h100_topology: Topology) -> None:
    """n1 passes alone at 365, n2 at 430; their run reaches 355: short of n2's run, not of n1's. Judged
    against each node's own run, n1 would be admitted and n2 held; judged as the group, both are held."""
    sections = {"n1": {"single": run(iterations=iterations(tflops=365.0))},
                "n2": {"single": run(nodes=("n2",), iterations=iterations(tflops=430.0))}}
    judge.attach_fleet(sections)
    record = run("multi", ("n1", "n2"), iterations=iterations(gpus=16, tflops=355.0, flops=FLOPS_TP8))
    for node in sections:
        sections[node]["multi"] = multi_section(["n1", "n2"], record)
    stats = judge.attach_group(sections, ["n1", "n2"])
    assert stats == {"median": pytest.approx(397.5, rel=1e-3), "count": 2.0}
    assert all(data["multi"][MEMBERS_KEY] == stats for data in sections.values())
    verdicts = {node: _meg04(node, data, h100_topology) for node, data in sections.items()}
    assert {v.status for v in verdicts.values()} == {Status.INCOMPLETE}, verdicts
    assert verdicts["n1"].reason == verdicts["n2"].reason  # one finding for the run, not one per member
    assert "355.0 TFLOP/s/GPU vs 397.5 single-node (median of its 2 members)" in verdicts["n1"].reason
    assert "not attributable to one node" in verdicts["n1"].reason


def test_a_healthy_group_passes_together(h100_topology: Topology) -> None:
    sections = {f"n{i}": {"single": run(nodes=(f"n{i}",))} for i in (1, 2, 3)}
    judge.attach_fleet(sections)
    record = run("multi", ("n1", "n2", "n3"), iterations=iterations(gpus=24, tflops=417.0, flops=FLOPS_TP8))
    for node in sections:
        sections[node]["multi"] = multi_section(["n1", "n2", "n3"], record)
    judge.attach_group(sections, ["n1", "n2", "n3"])
    assert all(_meg04(n, d, h100_topology).status is Status.PASS for n, d in sections.items())


def test_attach_group_counts_the_members_with_a_throughput() -> None:
    sections = {"a": {"single": run(), "multi": {}}, "b": {"single": run(timed_out=True), "multi": {}},
                "c": {"single": run(iterations=[]), "multi": {}},
                "d": {"single": run(iterations=iterations(tflops=400.0))}, "e": {"single": run()}}
    stats = judge.attach_group(sections, ["a", "b", "c", "d"])
    assert stats == {"median": pytest.approx(415.0, rel=1e-3), "count": 2.0}
    assert sections["a"]["multi"][MEMBERS_KEY] == stats and sections["b"]["multi"][MEMBERS_KEY] == stats
    assert "multi" not in sections["d"] and "multi" not in sections["e"]  # no entry to write into, or no member
    assert judge.attach_group(sections, ["c"]) == {} and sections["c"]["multi"][MEMBERS_KEY] == {}


# ------------------------------------------------------------------ the norm


@pytest.mark.parametrize(("value", "median", "count", "typical", "words"), [
    (344.0, 344.0, 8, 400.0, "is 14% below the topology's reference 400 TFLOP/s/GPU (megatron_tflops_per_gpu)"),
    (344.0, 430.0, 8, 400.0, "is 20% below the run's median 430.0 TFLOP/s/GPU of 8 nodes (tolerance 10%)"),
    (344.0, 430.0, 2, 400.0, "below the topology's reference 400"),  # two nodes: no median
    (344.0, 430.0, 3, None, "below the run's median 430.0 TFLOP/s/GPU of 3 nodes"),
    (344.0, 430.0, 3, math.nan, "below the run's median"),
    (350.0, 400.0, 8, 400.0, "below the run's median 400.0"),  # equal norms: the run's median is named
    (359.9, None, 0, 400.0, "below the topology's reference"),
    (360.0, None, 0, 400.0, None),  # exactly at the line
    (344.0, None, 0, None, None),
    (344.0, None, 0, 0.0, None),
    (344.0, 344.0, 8, -400.0, None),
    (430.0, 430.0, 8, 400.0, None),
])
def test_the_norm_is_the_median_but_never_below_the_reference(value: float, median: float | None, count: int,
                                                             typical: float | None, words: str | None) -> None:
    fleet = {"single.tflops_per_gpu": {"median": median, "count": float(count)} if median is not None else {}}
    found = judge.straggler(value, fleet, 0.10, typical)
    if words is None:
        assert found is None
    else:
        assert found is not None and found.startswith(f"straggler: {value:.1f} TFLOP/s/GPU") and words in found, found


# ------------------------------------------------------------------ a launcher that is not there

MISSING = "torchrun not found: /nonexistent/torchrun"


def _not_started(kind: str = "single", nodes: tuple[str, ...] = ("n1",)) -> dict[str, Any]:
    return run(kind, nodes, exit_status=127, iterations=[], parse_error="megatron-log: no iteration lines",
               tails={"-1": ["env: \u2018/nonexistent/torchrun\u2019: No such file or directory"]}, unavailable=MISSING)


@pytest.mark.parametrize("check_id", ["MEG-01", "MEG-02", "MEG-03", "MEG-04"])
def test_a_missing_launcher_is_incomplete_naming_it(h100_topology: Topology, check_id: str) -> None:
    result = load_all()[check_id].func(Facts("n1", {"megatron": section(_not_started(), multi=None)}),
                                       h100_topology)
    assert result.status is Status.INCOMPLETE and result.reason == f"{check_id} could not be measured: {MISSING}"


@pytest.mark.parametrize("check_id", ["MEG-01", "MEG-02", "MEG-04"])
def test_a_multi_node_run_whose_launcher_is_missing_is_incomplete(h100_topology: Topology, check_id: str) -> None:
    multi = multi_section(["n1", "n2"], _not_started("multi", ("n1", "n2")))
    result = load_all()[check_id].func(Facts("n1", {"megatron": section(multi=multi)}), h100_topology)
    assert result.status is Status.INCOMPLETE and "multi-node" in result.reason and MISSING in result.reason
    assert "exited 127" not in result.reason
