"""MEG-01..04 at their edges: exact boundaries, garbage in a record, the texts a reason is made of."""

from __future__ import annotations

from typing import Any

import pytest
from megatron_support import iterations, members, run, section

from burnin.checks import load_all
from burnin.evaluate.verdict import Status, Unmeasurable, Verdict
from burnin.facts import Facts
from burnin.megatron import judge
from burnin.topology.model import Reference, Topology

TOL = 0.10


def verdict(check_id: str, data: dict[str, Any], topology: Topology) -> Verdict:
    return load_all()[check_id].func(Facts("n1", {"megatron": data}), topology)


def exact(rate: float, *, gpus: int = 8, logged: float | None = None, n: int = 50) -> dict[str, Any]:
    """A run record whose throughput is exactly ``rate`` TFLOP/s/GPU: 1 s iterations, FLOPs to match."""
    its = [{"iteration": i, "total": n, "elapsed_ms": 1000.0, "tflops_per_gpu": rate if logged is None else logged,
            "lm_loss": 12.0 - 4.0 * i / n, "grad_norm": 1.0, "skipped": 0, "nan": 0} for i in range(1, n + 1)]
    return run(iterations=its, flops_per_iteration=rate * 1e12 * gpus, world_size=gpus)


@pytest.mark.parametrize(("ref", "shown"), [
    (Reference(0.4, "t", 0.3, 1.0), ">= 30%"),
    (Reference(0.4, "t", 0.3, None), ">= 30%"),
    (Reference(0.4, "t", 0.3, 1.5), ">= 30%"),
    (Reference(0.4, "t", 0.3, 0.9), "30%..90%"),
    (Reference(0.4, "t", None, 0.5), "<= 50%"),
    (Reference(0.4, "t"), "40%"),
])
def test_share(ref: Reference, shown: str) -> None:
    assert judge.share(ref) == shown


def test_the_loss_window_is_ten_iterations(h100_topology: Topology) -> None:
    its = iterations()
    for it in its:
        it["lm_loss"] = 12.0 if it["iteration"] <= 10 else 8.0
    found = judge.loss_findings("single-node", run(iterations=its), judge.reference(h100_topology,
                                                                                  judge.LOSS_DROP_REF))
    assert [f.measured for f in found] == ["lm loss 12.00 -> 8.00 (fell by 4.00)"]


@pytest.mark.parametrize(("count", "status"), [(1, Status.INCOMPLETE), (2, Status.PASS), (3, Status.PASS)])
def test_two_losses_are_enough_to_see_a_fall(h100_topology: Topology, count: int, status: Status) -> None:
    its = [dict(it, lm_loss=12.0 - 2.0 * it["iteration"]) for it in iterations(count)]
    found = judge.loss_findings("single-node", run(iterations=its), judge.reference(h100_topology,
                                                                                  judge.LOSS_DROP_REF))
    assert [f.status for f in found] == [status]


def test_an_iteration_entry_that_is_not_one_is_ignored(h100_topology: Topology) -> None:
    its: list[Any] = iterations()
    its += ["garbage", {"iteration": "7", "elapsed_ms": 1.0}, {"total": 50}]
    result = verdict("MEG-02", section(run(iterations=its)), h100_topology)
    assert result.status is Status.PASS and "50/50 iterations parsed" in result.reason


@pytest.mark.parametrize(("nodes", "where"), [(("n1",), "the run hung"), (("n1", "n2"), "the run on n1,n2 hung")])
def test_a_hang_says_where_only_for_several_nodes(nodes: tuple[str, ...], where: str) -> None:
    assert judge.hang_note(run(nodes=nodes, timed_out=True)).startswith(where)


@pytest.mark.parametrize(("ranks", "more"), [(8, None), (9, "; +1 more")])
def test_a_hang_shows_eight_ranks(ranks: int, more: str | None) -> None:
    note = judge.hang_note(run(timed_out=True, tails={str(r): [f"line of {r}"] for r in range(ranks)}))
    assert "rank 7: line of 7" in note and ("more" not in note if more is None else note.endswith(more))


@pytest.mark.parametrize("check_id", ["MEG-01", "MEG-02", "MEG-04"])
def test_no_exit_status_is_not_a_failure(h100_topology: Topology, check_id: str) -> None:
    """An exit status of None with no error is a record that says nothing about the node (incomplete)."""
    data = section(run(exit_status=None, error=None, iterations=iterations()[:5], parse_error="no lines"))
    result = verdict(check_id, data, h100_topology)
    assert result.status is Status.INCOMPLETE and "no exit status recorded" in result.reason, result.reason


def test_a_failed_run_names_its_nccl_error_first(h100_topology: Topology) -> None:
    data = section(run(exit_status=1, nccl_errors=[{"rank": 3, "line": "NCCL error: unhandled system error"}],
                       tails={"-1": ["ChildFailedError"], "3": ["NCCL error: unhandled system error"]}))
    result = verdict("MEG-01", data, h100_topology)
    assert result.status is Status.FAIL and "exited 1 (rank 3: NCCL error: unhandled system error)" in result.reason


def test_the_log_interval_sets_the_iterations_expected(h100_topology: Topology) -> None:
    its = [it for it in iterations() if it["iteration"] % 5 == 0]
    result = verdict("MEG-02", section(run(iterations=its, log_interval=5)), h100_topology)
    assert result.status is Status.PASS and "10/10 iterations parsed" in result.reason


@pytest.mark.parametrize(("overrides", "ok"), [
    ({"flops_per_iteration": None}, False), ({"flops_per_iteration": 0}, False), ({"flops_per_iteration": -1.0}, False),
    ({"flops_per_iteration": 0.5}, True), ({"world_size": 0}, False), ({"world_size": "8"}, False),
    ({"world_size": 1}, True),
])
def test_throughput_needs_a_flop_count_and_a_world(overrides: dict[str, Any], ok: bool) -> None:
    record = run(**overrides)
    if ok:
        assert judge.throughput(record).computed > 0
    else:
        with pytest.raises(Unmeasurable, match="no FLOP count or world size"):
            judge.throughput(record)


def test_throughput_keeps_only_real_times_and_values() -> None:
    record = exact(400.0)
    for it in record["iterations"][10:20]:
        it.update(elapsed_ms=0.0, tflops_per_gpu=0.0)
    for it in record["iterations"][20:25]:
        it.update(elapsed_ms="NAN", tflops_per_gpu=None)
    rate = judge.throughput(record)
    assert (rate.computed, rate.logged, rate.iterations, rate.iteration_ms) == (400.0, 400.0, 25, 1000.0)
    fast = exact(400.0)
    for it in fast["iterations"]:
        it.update(elapsed_ms=0.5, tflops_per_gpu=0.5)
    assert judge.throughput(fast).logged == 0.5 and judge.throughput(fast).computed == pytest.approx(800000.0)
    for it in fast["iterations"]:
        it.update(tflops_per_gpu=0.0)
    assert judge.throughput(fast).logged is None  # a logged 0 is no throughput
    for it in fast["iterations"]:
        it.update(elapsed_ms=0.0)
    with pytest.raises(Unmeasurable, match="no iteration after the 10 warm-up iterations has a time"):
        judge.throughput(fast)


@pytest.mark.parametrize(("logged", "status"), [(400.0, Status.PASS), (399.0, Status.INCOMPLETE)])
def test_the_log_may_differ_by_exactly_the_agreement(h100_topology: Topology, logged: float, status: Status) -> None:
    assert verdict("MEG-03", section(exact(420.0, logged=logged)), h100_topology).status is status


def test_attach_fleet_skips_what_has_no_run() -> None:
    sections: dict[str, dict[str, Any]] = {"a": {"single": exact(400.0)}, "b": {"single": None}, "c": {},
                                           "d": {"single": dict(exact(300.0), timed_out=True)},
                                           "e": {"single": exact(420.0)}}
    assert judge.attach_fleet(sections) == {"median": 410.0, "count": 2.0}


@pytest.mark.parametrize(("value", "fleet", "typical", "words"), [
    (0.4, {"median": 0.5, "count": 8}, None, "below the run's median 0.5"),
    (-1.0, {"median": 0.0, "count": 8}, None, None),  # a median of 0 is no median
    (0.4, {}, 0.5, "below the topology's reference 0.5"),
    (-1.0, {}, 0.0, None),  # a reference of 0 is no reference
])
def test_the_norm_at_its_edges(value: float, fleet: dict[str, Any], typical: float | None,
                               words: str | None) -> None:
    found = judge.straggler(value, {judge.FLEET_KEY: fleet}, TOL, typical)
    assert (found is None) if words is None else (found is not None and words in found), found


@pytest.mark.parametrize(("rate", "stats", "status", "words"), [
    (360.0, members(400.0), Status.PASS, "360.0 TFLOP/s/GPU vs 400.0 single-node"),  # exactly at the line
    (359.0, members(400.0), Status.INCOMPLETE, "(10% below)"),
    (0.5, members(0.5, 1), Status.PASS, "vs 0.5 single-node (median of its 1 members)"),
    (360.0, members(0.0), Status.INCOMPLETE, "no single-node value of its members"),
    (360.0, members(400.0, 0), Status.INCOMPLETE, "no single-node value of its members"),
])
def test_the_multi_node_run_against_its_members_at_the_edges(h100_topology: Topology, rate: float,
                                                            stats: dict[str, float], status: Status,
                                                            words: str) -> None:
    data = section(exact(430.0))
    data["multi"]["run"] = dict(exact(rate, gpus=24), kind="multi", nodes=["n1", "n2", "n3"])
    data["multi"][judge.MEMBERS_KEY] = stats
    found = [f for f in judge.meg04(data, h100_topology) if f.subject == "multi-node" and "TFLOP" in f.expected]
    assert [f.status for f in found] == [status] and words in (found[0].measured + found[0].note), found
