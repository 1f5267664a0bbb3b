"""Edges of the verdict roll-up that bench/mutants showed untested: each fails if the code is off by one."""

from __future__ import annotations

import pytest

from burnin.evaluate.verdict import Finding, Status, Verdict, incomplete, roll_up


def bad(subject: str, measured: str = "down") -> Finding:
    return Finding(subject, Status.FAIL, measured, "up")


def unmeasured(subject: str) -> Finding:
    return Finding(subject, Status.INCOMPLETE, "not measured", "up", note="no counter")


@pytest.mark.parametrize(("status", "passed"), [(Status.PASS, True), (Status.FAIL, False),
                                                (Status.INCOMPLETE, False)])
def test_only_a_pass_verdict_has_passed(status: Status, passed: bool) -> None:
    assert Verdict("GPU-01", "sim01", status, "8", "8", "r").passed is passed


def test_four_failing_subjects_are_all_named_without_a_more_suffix() -> None:
    verdict = roll_up("GPU-10", "sim01", [bad(f"gpu{i}") for i in range(4)], expected="up")
    assert verdict.measured == "gpu0 down; gpu1 down; gpu2 down; gpu3 down"
    assert "more" not in verdict.reason


def test_five_failing_subjects_show_four_and_count_the_rest() -> None:
    verdict = roll_up("GPU-10", "sim01", [bad(f"gpu{i}") for i in range(5)], expected="up")
    assert verdict.measured == "gpu0 down; gpu1 down; gpu2 down; gpu3 down; +1 more"


def test_not_measured_subjects_beside_a_failure_show_two_then_count() -> None:
    two = roll_up("IB-01", "sim01", [bad("mlx5_0"), unmeasured("mlx5_1"), unmeasured("mlx5_2")], expected="up")
    assert two.reason.endswith("not measured: mlx5_1 no counter; mlx5_2 no counter")
    three = roll_up("IB-01", "sim01", [bad("mlx5_0"), *(unmeasured(f"mlx5_{i}") for i in (1, 2, 3))],
                    expected="up")
    assert three.reason.endswith("not measured: mlx5_1 no counter; mlx5_2 no counter; +1 more")


def test_a_node_subject_is_shown_without_its_name() -> None:
    verdict = roll_up("HOST-01", "sim01", [bad("node", "numa balancing on")], expected="off")
    assert verdict.measured == "numa balancing on"
    assert verdict.reason == "HOST-01 numa balancing on (expected off)"


def test_a_failure_outranks_unmeasured_subjects() -> None:
    verdict = roll_up("GPU-10", "sim01", [unmeasured("gpu0"), bad("gpu1")], expected="up")
    assert verdict.status is Status.FAIL
    assert verdict.measured == "gpu1 down"


def test_unmeasured_subjects_alone_make_the_check_incomplete_with_each_cause() -> None:
    verdict = roll_up("GPU-10", "sim01", [Finding("gpu0", Status.PASS, "up", "up"), unmeasured("gpu1")],
                      expected="up")
    assert verdict.status is Status.INCOMPLETE
    assert verdict.reason == "GPU-10 could not be measured: gpu1: no counter"


def test_no_subject_at_all_is_incomplete_never_pass() -> None:
    verdict = roll_up("GPU-10", "sim01", [], expected="up")
    assert verdict.status is Status.INCOMPLETE
    assert verdict.reason == "GPU-10 found nothing to measure"


def test_a_pass_shows_the_distinct_values_or_the_healthy_summary() -> None:
    findings = [Finding(f"gpu{i}", Status.PASS, "18/18" if i else "18/18 ", "18") for i in range(3)]
    assert roll_up("GPU-10", "sim01", findings, expected="18").measured == "18/18; 18/18 "
    summary = roll_up("GPU-10", "sim01", findings, expected="18", healthy="8 GPUs 18/18")
    assert (summary.status, summary.measured, summary.reason) == (Status.PASS, "8 GPUs 18/18",
                                                                 "GPU-10 ok: 8 GPUs 18/18")


def test_incomplete_helper_says_not_measured_and_why() -> None:
    verdict = incomplete("IB-04", "sim01", "counter file missing", expected="0")
    assert (verdict.status, verdict.measured, verdict.reason) == (
        Status.INCOMPLETE, "not measured", "IB-04 could not be measured: counter file missing")
