"""One status vocabulary (issue 11 item 8): the gate's outcome strings are evaluate's Status values."""

from __future__ import annotations

import json

from burnin.evaluate.verdict import Status
from burnin.gate.decide import (
    FAIL,
    INCOMPLETE,
    NOT_APPLICABLE,
    PASS,
    CheckOutcome,
    decide,
    effective_status,
)


def test_the_gate_constants_are_the_status_values() -> None:
    assert (PASS, FAIL, INCOMPLETE, NOT_APPLICABLE) == (
        "pass", "fail", "incomplete", "not-applicable")
    assert [s.value for s in Status] == [PASS, FAIL, INCOMPLETE, NOT_APPLICABLE]


def test_a_status_member_and_its_string_decide_alike() -> None:
    for status in Status:
        by_member = CheckOutcome("n1", "GPU-10", status, reason="why")
        by_string = CheckOutcome("n1", "GPU-10", status.value, reason="why")
        assert effective_status(by_member) == effective_status(by_string) == status.value
        one = decide(["n1"], [by_member])["n1"].to_json()
        assert json.dumps(one) == json.dumps(decide(["n1"], [by_string])["n1"].to_json())


def test_not_applicable_without_a_reason_is_still_incomplete() -> None:
    outcome = CheckOutcome("n1", "STO-01", Status.NOT_APPLICABLE)
    assert effective_status(outcome) == Status.INCOMPLETE
