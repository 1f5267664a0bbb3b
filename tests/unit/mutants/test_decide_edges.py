"""Edges of the gate decision (burnin.gate.decide) that bench/mutants showed untested."""

from __future__ import annotations

import pytest

from burnin.gate.decide import (
    FAIL,
    INCOMPLETE,
    NOT_APPLICABLE,
    PASS,
    RUN_CHECK,
    CheckOutcome,
    NodeDecision,
    decide,
    effective_status,
    gate_document,
    hold_all,
)


def one(*outcomes: CheckOutcome) -> NodeDecision:
    return decide(["n"], outcomes)["n"]


@pytest.mark.parametrize(("status", "reason", "effective"), [
    (PASS, "", PASS), (FAIL, "", FAIL), (INCOMPLETE, "", INCOMPLETE),
    (NOT_APPLICABLE, "no IB on this node", NOT_APPLICABLE),
    (NOT_APPLICABLE, "", INCOMPLETE), (NOT_APPLICABLE, "   ", INCOMPLETE),
    ("skipped", "skipped by the site test", INCOMPLETE), ("xfailed", "", INCOMPLETE), ("", "", INCOMPLETE),
])
def test_effective_status_of_each_kind_of_outcome(status: str, reason: str, effective: str) -> None:
    assert effective_status(CheckOutcome("n", "X", status, reason)) == effective


def test_not_applicable_with_a_reason_stands_in_for_a_verdict() -> None:
    decision = one(CheckOutcome("n", "GPU-01", PASS), CheckOutcome("n", "IB-01", NOT_APPLICABLE, "no HCA"))
    assert decision.admitted
    assert decision.not_applicable == (("IB-01", "no HCA"),)
    assert decision.to_json()["not_applicable"] == {"IB-01": "no HCA"}


def test_not_applicable_without_a_reason_keeps_the_node_out_and_says_so() -> None:
    decision = one(CheckOutcome("n", "GPU-01", PASS), CheckOutcome("n", "IB-01", NOT_APPLICABLE))
    assert not decision.admitted
    assert decision.incomplete == ("IB-01",)
    assert decision.reasons == ("IB-01 has no verdict (status 'not-applicable', no reason)",)
    assert decision.not_applicable == ()


def test_an_unknown_status_with_a_reason_keeps_its_reason() -> None:
    decision = one(CheckOutcome("n", "SITE-1", "skipped", "SITE-1 skipped: no license"))
    assert (decision.admitted, decision.incomplete, decision.reasons) == (
        False, ("SITE-1",), ("SITE-1 skipped: no license",))


def test_a_reasonless_verdict_gets_its_check_and_status_as_reason() -> None:
    assert one(CheckOutcome("n", "GPU-02", FAIL)).reasons == ("GPU-02 fail",)
    assert one(CheckOutcome("n", "GPU-02", INCOMPLETE)).reasons == ("GPU-02 incomplete",)


def test_failed_reasons_come_before_incomplete_ones() -> None:
    decision = one(CheckOutcome("n", "A", INCOMPLETE, "A unreadable"), CheckOutcome("n", "B", FAIL, "B down"),
                   CheckOutcome("n", "C", PASS, "C ok"))
    assert decision.failed == ("B",) and decision.incomplete == ("A",)
    assert decision.reasons == ("B down", "A unreadable")


def test_a_node_without_any_outcome_is_held_as_incomplete() -> None:
    decision = decide(["n", "m"], [CheckOutcome("m", "X", PASS)])["n"]
    assert (decision.admitted, decision.incomplete) == (False, (RUN_CHECK,))
    assert decision.reasons == (f"{RUN_CHECK} no check ran on this node",)


def test_hold_all_adds_the_run_reason_once() -> None:
    decisions = decide(["a", "b"], [CheckOutcome("a", "X", PASS), CheckOutcome("b", "X", FAIL, "X down")])
    held = hold_all(decisions, "partial run")
    assert not any(d.admitted for d in held.values())
    assert held["a"].incomplete == (RUN_CHECK,) and held["a"].reasons == (f"{RUN_CHECK} partial run",)
    assert held["b"].failed == ("X",) and held["b"].incomplete == (RUN_CHECK,)
    again = hold_all(held, "interrupted")
    assert again["a"].incomplete == (RUN_CHECK,)
    assert again["a"].reasons == (f"{RUN_CHECK} partial run", f"{RUN_CHECK} interrupted")


def test_short_reason_fits_the_limit_exactly_and_cuts_one_over() -> None:
    decision = NodeDecision("n", False, ("X",), (), ("X " + "a" * 18,))
    text = decision.short_reason()
    assert text == "X " + "a" * 18 and len(text) == 20
    assert decision.short_reason(limit=20) == text
    cut = decision.short_reason(limit=19)
    assert cut == "X " + "a" * 14 + "..." and len(cut) == 19


def test_short_reason_drops_the_first_check_id_from_its_cause() -> None:
    decision = NodeDecision("n", False, (), ("IB-04",), ("IB-04 counters unreadable",))
    assert decision.short_reason() == "IB-04 counters unreadable"
    other = NodeDecision("n", False, ("GPU-01",), (), ("driver 550 (expected 535)",))
    assert other.short_reason() == "GPU-01 driver 550 (expected 535)"
    assert NodeDecision("n", True).short_reason() == ""


def test_gate_document_counts_admitted_and_rejected() -> None:
    decisions = decide(["a", "b", "c"], [CheckOutcome("a", "X", PASS), CheckOutcome("b", "X", FAIL, "X")])
    doc = gate_document(decisions, run="r1")
    assert doc["run"] == "r1"
    assert (doc["admitted"], doc["rejected"]) == ("a", "b,c")
    assert doc["summary"] == {"nodes": 3, "admitted": 1, "rejected": 2}
