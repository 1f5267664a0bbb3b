"""The gate admits only nodes whose every check passed."""

from __future__ import annotations

from burnin.gate.decide import CheckOutcome, decide, gate_document


def test_fail_and_incomplete_both_reject_and_are_kept_apart() -> None:
    outcomes = [
        CheckOutcome("n1", "GPU-10", "pass"),
        CheckOutcome("n2", "GPU-10", "fail", "GPU-10 gpu3 17/18 (expected 18)"),
        CheckOutcome("n3", "IB-01", "incomplete", "IB-01 could not be measured: ibstat timed out"),
        CheckOutcome("n3", "GPU-10", "pass"),
    ]
    decisions = decide(["n1", "n2", "n3", "n4"], outcomes)
    assert decisions["n1"].admitted
    assert not decisions["n2"].admitted and decisions["n2"].failed == ("GPU-10",)
    assert not decisions["n3"].admitted and decisions["n3"].incomplete == ("IB-01",)
    assert decisions["n3"].failed == ()
    # a node on which nothing ran is never admitted (fail closed)
    assert not decisions["n4"].admitted


def test_gate_document_folds_node_sets() -> None:
    outcomes = [CheckOutcome(f"sim{i:02d}", "X", "fail" if i == 3 else "pass") for i in range(1, 9)]
    doc = gate_document(decide([f"sim{i:02d}" for i in range(1, 9)], outcomes))
    assert doc["admitted"] == "sim[01-02,04-08]"
    assert doc["rejected"] == "sim03"
    assert doc["summary"] == {"nodes": 8, "admitted": 7, "rejected": 1}
    assert set(doc["nodes"]["sim03"]) == {"admitted", "failed", "incomplete", "reasons"}


def test_short_reason_names_checks_first() -> None:
    outcomes = [
        CheckOutcome("n", "IB-01", "fail", "IB-01 mlx5_2 1: DOWN / 3: Disabled (expected 4: ACTIVE / 5: LinkUp)"),
        CheckOutcome("n", "IB-02", "fail", "IB-02 mlx5_2 ..."),
    ]
    reason = decide(["n"], outcomes)["n"].short_reason()
    assert reason.startswith("IB-01,IB-02 mlx5_2 1: DOWN")


def test_a_check_judged_in_two_suites_is_one_cause() -> None:
    # STO-02 is judged by the node suite and by the fabric suite of the same run, from the same facts
    same = "STO-02 /etc/nccl.conf NCCL_IB_HCA selects storage device mlx5_8 (expected compute HCAs only)"
    decisions = decide(["n"], [CheckOutcome("n", "STO-02", "fail", same), CheckOutcome("n", "STO-02", "fail", same),
                               CheckOutcome("n", "IB-01", "fail", "IB-01 mlx5_2 DOWN")])
    assert decisions["n"].failed == ("STO-02", "IB-01")
    assert decisions["n"].reasons == (same, "IB-01 mlx5_2 DOWN")
