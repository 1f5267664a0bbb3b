"""A gate resumes a node only for the checks that this decision judged and passed (DESIGN.md, "Contracts").

A node drained with ``burnin: IB-01 <cause>`` stays drained until a decision that judged IB-01 and found it
passing admits it; a reason whose check ids cannot be read is never resumed from; a node drained again
keeps the ids of its earlier reason that the new decision did not clear.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import pytest

from burnin.gate.decide import (
    RUN_CHECK,
    CheckOutcome,
    NodeDecision,
    check_ids_text,
    decide,
    passed_checks,
    reason_checks,
    unjudged,
)
from burnin.gate.slurm import SlurmGate, SlurmNode, drain_action, plan, resume_blockers
from burnin.reasons import parse_check_ids
from burnin.transport.base import CommandResult
from burnin.transport.slurm import SlurmClient

IB_DRAIN = SlurmNode("sim03", "IDLE+DRAIN", "burnin: IB-01 mlx5_2 1: DOWN (an earlier run)")
SOAK_CHECKS = ("GPU-01", "GPU-02", "GPU-03", "GPU-04", "GPU-05", "GPU-06", "GPU-09", "GPU-11", "IB-04",
               "BRN-01", "BRN-02", "BRN-03", "BRN-04", "BRN-05", "BRN-06", "BRN-07")
# what `burnin run` finds on a node it cannot reach: every check of the node suite incomplete
UNREACHABLE = ("GPU-12", "GPU-13", "GPU-01", "GPU-03", "GPU-04", "GPU-05", "GPU-06", "GPU-07", "GPU-08", "GPU-10",
               "GPU-11", *(f"INV-{n:02d}" for n in range(1, 12)), *(f"IB-{n:02d}" for n in (1, 2, 3, 4, 5, 6, 9)),
               *(f"TOP-{n:02d}" for n in range(1, 11)), *(f"STO-{n:02d}" for n in (1, 2, 4, 5, 6, 7)))


def _admitted(node: str, passed: Sequence[str]) -> NodeDecision:
    return NodeDecision(node, True, passed=tuple(passed))


# ------------------------------------------------------------------ what a decision judged and passed


def test_a_decision_passes_only_checks_every_outcome_of_which_passed() -> None:
    outcomes = [CheckOutcome("n", "GPU-04", "pass"), CheckOutcome("n", "GPU-04", "fail", "GPU-04 Xid 79"),
                CheckOutcome("n", "IB-01", "pass"), CheckOutcome("n", "IB-02", "incomplete", "IB-02 no rate"),
                CheckOutcome("n", "STO-01", "not-applicable", "STO-01 no storage fabric"),
                CheckOutcome("n", "TOP-04", "skipped"), CheckOutcome("n", "IB-01", "pass")]
    decision = decide(["n", "m"], outcomes)
    assert decision["n"].passed == ("IB-01",)  # a fail elsewhere, incomplete, N/A, unknown status: not passed
    assert decision["m"].passed == ()  # nothing ran on it


def test_passed_checks_read_from_verdict_rows() -> None:
    rows = [{"node": "a", "check": "IB-01", "status": "pass"}, {"node": "a", "check": "GPU-10", "status": "fail"},
            {"node": "b", "check": "IB-01", "status": "pass"}, {"node": "b", "check": "IB-01", "status": "oops"}]
    assert passed_checks(rows) == {"a": ("IB-01",), "b": ()}


# ------------------------------------------------------------------ the check ids of a reason


def test_a_long_id_list_is_written_with_ranges_and_reads_back_whole() -> None:
    text = check_ids_text(UNREACHABLE)
    assert text.startswith("GPU-01,GPU-03..08,GPU-10..13,INV-01..11,IB-01..06,IB-09,TOP-01..10,STO-01..02,")
    assert len(text) <= 100
    assert set(parse_check_ids(text) or ()) == set(UNREACHABLE)
    decision = NodeDecision("n", False, (), UNREACHABLE, ("GPU-12 could not be measured: unreachable",))
    reason = "burnin: " + decision.short_reason()
    assert set(reason_checks(reason) or ()) == set(UNREACHABLE)
    assert check_ids_text(["IB-01", "GPU-10", "IB-01"]) == "IB-01,GPU-10"  # short: as given, each once


def test_ranges_join_only_ids_written_alike() -> None:
    ids = [f"X-{n}" for n in range(8, 12)] + [f"LONGNAME-{n:02d}" for n in range(1, 20, 2)] + ["RUN"]
    text = check_ids_text(ids)
    assert "X-8..9,X-10..11" in text and text.endswith(",RUN")
    assert parse_check_ids(text) is not None and set(parse_check_ids(text) or ()) == set(ids)


@pytest.mark.parametrize("text", ["", "IB-01,", "IB-01...", "IB-05..03", "IB-5..10", "ib-01", "IB-01;GPU-10",
                                  "FAIL", "IB-01..01"])
def test_ids_that_cannot_be_read_are_none(text: str) -> None:
    assert parse_check_ids(text) is None


def test_the_ids_of_a_reason() -> None:
    assert reason_checks("burnin: IB-01,GPU-10 mlx5_2 DOWN") == ("IB-01", "GPU-10")
    assert reason_checks("burnin: GPU-03..05,RUN x") == ("GPU-03", "GPU-04", "GPU-05", RUN_CHECK)
    assert reason_checks("burnin:") is None
    assert reason_checks("maintenance IB-01") is None
    assert reason_checks("burnin: IB-01,GPU-1...") is None  # cut in its ids
    assert unjudged("burnin: IB-01,GPU-10,RUN x", ["GPU-10"]) == ("IB-01",)
    assert unjudged("burnin: RUN no check ran on this node", []) == ()
    assert unjudged("burnin: see ticket 42", ["IB-01"]) is None


# ------------------------------------------------------------------ the Slurm gate's plan


def test_a_node_drained_for_ib01_is_resumed_only_by_a_decision_that_passed_ib01() -> None:
    soak = plan({"sim03": _admitted("sim03", SOAK_CHECKS)}, {"sim03": IB_DRAIN})
    assert [(a.action, a.target) for a in soak] == [("keep", "sim03")]
    assert "drained for IB-01, which this run did not judge and pass" in soak[0].note
    run = plan({"sim03": _admitted("sim03", ("GPU-10", "IB-01"))}, {"sim03": IB_DRAIN})
    assert [(a.action, a.argv) for a in run] == [("resume", ("scontrol", "update", "NodeName=sim03",
                                                              "State=RESUME"))]


def test_a_reason_whose_ids_cannot_be_read_is_never_resumed_from_nor_replaced() -> None:
    cut = SlurmNode("sim03", "IDLE+DRAIN", "burnin: IB-01,GPU-1...")
    kept = plan({"sim03": _admitted("sim03", ("IB-01", "GPU-10", "GPU-11"))}, {"sim03": cut})
    assert [a.action for a in kept] == ["keep"] and "no check ids burnin can read" in kept[0].note
    rejected = NodeDecision("sim03", False, ("GPU-04",), (), ("GPU-04 gpu3 Xid 79",))
    again = plan({"sim03": rejected}, {"sim03": cut})
    assert [a.action for a in again] == ["keep"] and "cannot be read" in again[0].note
    assert drain_action("sim03", "GPU-04 gpu3 Xid 79", cut).action == "keep"
    assert resume_blockers(cut.reason, ["IB-01"]) == "its drain reason names no check ids burnin can read"


def test_a_run_admission_clears_run_and_resumes_an_unreachable_node() -> None:
    unreachable = NodeDecision("sim03", False, (), UNREACHABLE, ("GPU-12 could not be measured: unreachable",))
    (drain,) = plan({"sim03": unreachable}, {"sim03": SlurmNode("sim03", "IDLE")})
    reason = drain.argv[-1].removeprefix("Reason=")
    assert len(reason) <= 200 and set(reason_checks(reason) or ()) == set(UNREACHABLE)
    back = plan({"sim03": _admitted("sim03", UNREACHABLE)}, {"sim03": SlurmNode("sim03", "IDLE+DRAIN", reason)})
    assert [a.action for a in back] == ["resume"]
    held = SlurmNode("sim03", "IDLE+DRAIN", "burnin: RUN no check ran on this node")
    assert [a.action for a in plan({"sim03": _admitted("sim03", ("IB-01",))}, {"sim03": held})] == ["resume"]


def test_drained_again_keeps_the_earlier_ids_this_decision_did_not_clear() -> None:
    brn = NodeDecision("sim03", False, ("BRN-04",), (), ("BRN-04 node Machine check",), passed=SOAK_CHECKS[:9])
    (carried,) = plan({"sim03": brn}, {"sim03": IB_DRAIN})
    assert carried.action == "drain" and carried.argv[-1] == "Reason=burnin: BRN-04,IB-01 node Machine check"
    cleared = NodeDecision("sim03", False, ("BRN-04",), (), ("BRN-04 node Machine check",), passed=("IB-01",))
    (fresh,) = plan({"sim03": cleared}, {"sim03": IB_DRAIN})
    assert fresh.argv[-1] == "Reason=burnin: BRN-04 node Machine check"
    now = SlurmNode("sim03", "IDLE+DRAIN", "burnin: BRN-04,IB-01 node Machine check")
    assert [a.action for a in plan({"sim03": brn}, {"sim03": now})] == ["keep"]  # the same reason: no update
    probe = drain_action("sim03", "GPU-04 gpu3 Xid 79", IB_DRAIN)
    assert probe.argv[-1] == "Reason=burnin: GPU-04,IB-01 gpu3 Xid 79"
    plain = drain_action("sim03", "see the ticket", IB_DRAIN)  # no ids of its own: nothing to add to
    assert plain.argv[-1] == "Reason=burnin: see the ticket"


class Scontrol(SlurmClient):
    """``show`` answers ``show``; every update succeeds and is recorded."""

    def __init__(self, show: str) -> None:
        super().__init__()
        self.show = show
        self.calls: list[tuple[str, ...]] = []

    def run(self, argv: Sequence[str], *, timeout: float = 10.0) -> CommandResult:
        self.calls.append(tuple(argv))
        return CommandResult("slurm", tuple(argv), 0, self.show if "show" in argv else "", "", 0.01)


SHOW = ("NodeName=sim03 Arch=x86_64 State=IDLE+DRAIN ThreadsPerCore=1 "
        "Reason=burnin: IB-01 mlx5_2 1: DOWN [root@2026-11-29T23:45:25]\n")


def test_the_slurm_gate_acts_on_the_checks_judged() -> None:
    out = io.StringIO()
    client = Scontrol(SHOW)
    assert SlurmGate(client=client).apply({"sim03": _admitted("sim03", SOAK_CHECKS)}, dry_run=False, out=out,
                                          err=io.StringIO())
    assert not any("State=RESUME" in call for call in client.calls)
    assert "burnin gate: sim03: admitted, but drained for IB-01" in out.getvalue()
    gate = SlurmGate(client=client)
    assert not gate.resume("sim03", passed=SOAK_CHECKS)
    assert not any("State=RESUME" in call for call in client.calls)
    assert gate.resume("sim03", passed=("IB-01",))
    assert client.calls[-1] == ("scontrol", "update", "NodeName=sim03", "State=RESUME")


def test_an_id_list_of_exactly_the_budget_stays_as_given() -> None:
    ids = [f"BB-{n:02d}" for n in range(1, 17)]  # 16 ids: 95 characters joined
    assert len(check_ids_text([*ids, "C-12"])) == 100 and check_ids_text([*ids, "C-12"]) == ",".join([*ids, "C-12"])
    assert check_ids_text([*ids, "C-123"]) == "BB-01..16,C-123"  # one over: by family, with ranges


def test_only_a_drain_burnin_set_is_acted_on_as_burnin_s() -> None:
    stale = SlurmNode("sim03", "DOWN", "burnin: IB-01 mlx5_2 1: DOWN")  # down, not drained: not burnin's to resume
    assert plan({"sim03": _admitted("sim03", ("IB-01",))}, {"sim03": stale}) == []
    operator = SlurmNode("sim03", "IDLE+DRAIN", "maintenance")
    (kept,) = plan({"sim03": _admitted("sim03", ("IB-01",))}, {"sim03": operator})
    assert kept.action == "keep" and "by someone else (maintenance)" in kept.note
    rejected = NodeDecision("sim03", False, ("GPU-04",), (), ("GPU-04 gpu3 Xid 79",))
    idle = SlurmNode("sim03", "IDLE", "burnin: IB-01 an old reason Slurm kept")
    (fresh,) = plan({"sim03": rejected}, {"sim03": idle})  # its old ids are no drain: nothing to carry
    assert fresh.argv[-1] == "Reason=burnin: GPU-04 gpu3 Xid 79"
    assert drain_action("sim03", "GPU-04 gpu3 Xid 79", idle).argv[-1] == "Reason=burnin: GPU-04 gpu3 Xid 79"
    unnamed = SlurmNode("sim03", "IDLE+DRAIN", "")  # drained without a reason: burnin may drain it
    assert [a.action for a in plan({"sim03": rejected}, {"sim03": unnamed})] == ["drain"]
    assert drain_action("sim03", "GPU-04 gpu3 Xid 79", unnamed).action == "drain"
    client = Scontrol("NodeName=sim03 Arch=x86_64 State=IDLE Reason=burnin: IB-01 x [root@2026-11-29T23:45:25]\n")
    assert not SlurmGate(client=client).resume("sim03", passed=("IB-01",))
    assert not any("State=RESUME" in call for call in client.calls)
