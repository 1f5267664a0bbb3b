"""The soak's bounds (issue 19): a duration, an interval and a stage too coarse to judge, a node held back by
acceptance, and a slow majority that cannot make itself the norm."""

from __future__ import annotations

import math

import pytest

from burnin.errors import UsageError
from burnin.gate.decide import FAIL, INCOMPLETE, NOT_APPLICABLE, PASS, CheckOutcome, NodeDecision
from burnin.soak import drift, plan
from burnin.soak.acceptance import held_reason
from burnin.soak.plan import SoakSettings
from burnin.soak.state import DONE, HELD, NodeProgress, SoakState
from burnin.soak.verdicts import Judge, write_outputs
from burnin.topology.model import Topology

from .test_verdicts import DURATION, HOUR, SETTINGS, records, samples


@pytest.mark.parametrize("text", ["99999999999999999999h", "31d", f"{30 * 24 + 1}h", "9" * 400 + "s"])
def test_a_duration_past_a_month_is_refused(text: str) -> None:
    with pytest.raises(UsageError, match="a soak lasts at most 30 days"):
        plan.parse_duration(text)
    assert plan.parse_duration("30d") == plan.MAX_DURATION_S


def test_an_interval_that_would_never_end_a_simulated_soak_is_refused() -> None:
    with pytest.raises(UsageError, match=r"samples at most 600 times \(--interval 6 or more\)"):
        plan.check_interval(0.001, HOUR, simulated=True)
    with pytest.raises(UsageError, match="at most once every 1 s"):
        plan.check_interval(0.5, HOUR, simulated=False)
    with pytest.raises(UsageError):
        plan.check_interval(math.nan, HOUR, simulated=False)
    with pytest.raises(UsageError):
        plan.check_interval(math.nan, HOUR, simulated=True)
    plan.check_interval(0.5, 60.0, simulated=True)  # a simulated minute: its clock is no wall clock
    plan.check_interval(6.0, HOUR, simulated=True)  # exactly 600 rounds
    plan.check_interval(1.0, 30 * 86400.0, simulated=False)  # real time: the wall clock bounds it
    with pytest.raises(UsageError):
        plan.check_interval(5.9, HOUR, simulated=True)
    with pytest.raises(ValueError, match="interval_s"):
        SoakSettings.model_validate({"interval_s": 0.001})


def _judge(h100_topology: Topology, interval: float, *, settings: SoakSettings = SETTINGS,
           nodes: dict[str, float] | None = None, progress: dict[str, NodeProgress] | None = None,
           ) -> dict[tuple[str, str], tuple[str, str]]:
    rates = nodes or {"a": 400000.0, "b": 400000.0}
    progress = progress or {n: NodeProgress(n, status=DONE, end_t=DURATION) for n in rates}
    state = SoakState(command={}, duration_s=DURATION, interval_s=interval, nodes=progress, now=DURATION)
    outcomes = Judge(state, {n: samples(n) for n in rates}, {n: records(n, rate=r) for n, r in rates.items()},
                     settings, h100_topology, "site.yaml").outcomes()
    return {(o.node, o.check): (o.status, o.reason) for o in outcomes}


def test_brn07_is_incomplete_when_sampled_too_coarsely_to_judge(h100_topology: Topology) -> None:
    fine = _judge(h100_topology, 1800.0)  # two samples an hour: the finest that still judges per hour
    assert fine[("a", "BRN-07")] == (PASS, "")
    coarse = _judge(h100_topology, 2 * HOUR)
    status, reason = coarse[("a", "BRN-07")]
    assert status == INCOMPLETE and "sampled every 02:00:00: too coarse to judge growth within an hour" in reason
    assert "every 00:30:00 or more often" in reason
    assert _judge(h100_topology, 1801.0)[("a", "BRN-07")][0] == INCOMPLETE


def test_a_node_held_back_by_acceptance_is_judged_on_nothing(h100_topology: Topology) -> None:
    why = held_reason(NodeDecision("b", False, ("IB-01",), ("IB-02",)))
    assert why == "the node was not soaked: acceptance rejected it (failed IB-01; incomplete IB-02)"
    assert held_reason(None) == "the node was not soaked: the node suite did not judge it"
    progress = {"a": NodeProgress("a", status=DONE, end_t=DURATION), "b": NodeProgress("b", status=HELD, held=why)}
    out = _judge(h100_topology, 600.0, progress=progress)
    held = {check: value for (node, check), value in out.items() if node == "b"}
    # even the samples handed over for it judge nothing: every check incomplete, but a stage switched off
    assert {s for s, _ in held.values()} == {INCOMPLETE, NOT_APPLICABLE}
    assert held["BRN-02"] == (INCOMPLETE, f"BRN-02 not judged: {why}")
    assert held["BRN-01"][0] == NOT_APPLICABLE
    assert out[("a", "BRN-02")][0] == PASS


def test_a_slow_majority_cannot_make_itself_the_norm(h100_topology: Topology) -> None:
    slow = {"a": 400000.0, "b": 360000.0, "c": 360000.0}
    assert _judge(h100_topology, 600.0, nodes=slow)[("b", "BRN-02")][0] == PASS  # the median is slow itself
    settings = SETTINGS.model_copy(update={"gpu": SETTINGS.gpu.model_copy(update={"reference_gflops": 400000.0})})
    out = _judge(h100_topology, 600.0, nodes=slow, settings=settings)
    assert out[("b", "BRN-02")][0] == FAIL
    assert "is 10.0% below the reference 400000 (gpu.reference_gflops in site.yaml)" in out[("b", "BRN-02")][1]
    assert out[("a", "BRN-02")][0] == PASS
    lone = _judge(h100_topology, 600.0, nodes={"b": 360000.0}, settings=settings)
    assert lone[("b", "BRN-02")][0] == FAIL  # one node alone is held to the reference too
    lower = SETTINGS.model_copy(update={"gpu": SETTINGS.gpu.model_copy(update={"reference_gflops": 390000.0})})
    fast = _judge(h100_topology, 600.0, nodes={"a": 400000.0, "b": 400000.0, "c": 379000.0}, settings=lower)
    assert "below the fleet median 400000" in fast[("c", "BRN-02")][1]


def test_stragglers_against_a_reference() -> None:
    assert drift.stragglers({"a": 90.0, "b": 90.0, "c": 100.0}, 0.05) == {}
    slow = drift.stragglers({"a": 90.0, "b": 90.0, "c": 100.0}, 0.05, reference=100.0)
    assert sorted(slow) == ["a", "b"] and slow["a"][1] == 100.0
    assert drift.stragglers({"a": 90.0}, 0.05, reference=100.0)["a"][2] == pytest.approx(0.1)
    assert drift.stragglers({"a": 96.0, "b": 110.0, "c": 100.0}, 0.05, reference=90.0) == {}  # the median rules


def test_the_gate_decision_takes_acceptance_and_soak_verdicts_together(tmp_path: object, h100_topology: Topology
                                                                       ) -> None:
    from pathlib import Path

    out = Path(str(tmp_path))
    state = SoakState(command={}, duration_s=DURATION, interval_s=600.0,
                      nodes={n: NodeProgress(n, status=DONE, end_t=DURATION) for n in ("a", "b")}, now=DURATION)
    soaked = [CheckOutcome(n, "BRN-06", PASS) for n in ("a", "b")]
    accepted = [CheckOutcome("a", "IB-01", PASS), CheckOutcome("b", "IB-01", FAIL, "IB-01 mlx5_2 DOWN")]
    decisions = write_outputs(out, state, soaked, {}, meta={}, acceptance=accepted)
    assert decisions["a"].admitted and decisions["a"].passed == ("IB-01", "BRN-06")
    assert not decisions["b"].admitted and decisions["b"].failed == ("IB-01",)
    assert (out / "verdicts.json").read_text().count('"check"') == 2  # the soak's own verdicts only
