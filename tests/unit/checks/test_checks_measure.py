"""The judging primitives: physical ranges, flags, and how findings roll up into a verdict."""

from __future__ import annotations

import math

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from burnin.checks.base import (
    ERROR_COUNT,
    PhysicalRange,
    measured_count,
    measured_flag,
    measured_number,
    parse_cpulist,
)
from burnin.evaluate.verdict import Finding, Status, Unmeasurable, incomplete, roll_up

RANGE = PhysicalRange(10, 20, "W")


@pytest.mark.parametrize(("value", "admitted"), [
    (10, True), (20, True), (15.5, True), (9.999, False), (20.001, False), (9, False), (21, False),
])
def test_measured_number_at_and_around_its_range(value: float, admitted: bool) -> None:
    if admitted:
        assert measured_number(value, "gpu1", "power", RANGE) == value
    else:
        with pytest.raises(Unmeasurable) as info:
            measured_number(value, "gpu1", "power", RANGE)
        assert info.value.reason == f"gpu1 power {value!r} outside its physical range 10..20 W"


@pytest.mark.parametrize(("value", "words"), [
    (None, "gpu1 power not reported"),
    (math.nan, "gpu1 power nan is not a finite number"),
    (math.inf, "gpu1 power inf is not a finite number"),
    (-math.inf, "gpu1 power -inf is not a finite number"),
    (True, "gpu1 power True is not a number"),
    ("15", "gpu1 power '15' is not a number"),
    ([15], "gpu1 power [15] is not a number"),
    ("x" * 100, "..."),
])
def test_measured_number_refuses_what_is_no_number(value: object, words: str) -> None:
    with pytest.raises(Unmeasurable) as info:
        measured_number(value, "gpu1", "power", RANGE)
    assert words in info.value.reason
    assert len(info.value.reason) < 120  # a long value is quoted shortened


def _measured_as_specified(value: object, valid: PhysicalRange, integer: bool) -> object:
    """measured_number's rules one question at a time (what its fast path for plain numbers must agree with)."""
    if value is None:
        return "not reported"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "not a number"
    if isinstance(value, float) and not math.isfinite(value):
        return "not a finite number"
    if integer and isinstance(value, float) and not value.is_integer():
        return "not a whole number"
    if value < valid.lo or value > valid.hi:
        return "outside its physical range"
    return value


UNBOUNDED = PhysicalRange(0, math.inf)


class _Count(int):
    """An int of another type (an IntEnum's kind): the fast path is for JSON's own int and float only."""


@given(st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(), st.text(max_size=3),
                 st.integers(-5, 25).map(_Count)),
       st.sampled_from([RANGE, ERROR_COUNT, PhysicalRange(-1, 1023), PhysicalRange(0.5, 1.5), UNBOUNDED]),
       st.booleans())
@example(math.inf, UNBOUNDED, False)
@example(math.nan, UNBOUNDED, False)
@example(True, RANGE, False)
@example(0.7, PhysicalRange(0.5, 1.5), True)
@example(15.0, RANGE, True)
def test_measured_number_answers_every_value_by_its_rules(value: object, valid: PhysicalRange, integer: bool) -> None:
    expected = _measured_as_specified(value, valid, integer)
    if isinstance(expected, str):
        with pytest.raises(Unmeasurable) as info:
            measured_number(value, "gpu1", "power", valid, integer=integer)
        assert expected in info.value.reason
    else:
        got = measured_number(value, "gpu1", "power", valid, integer=integer)
        assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize(("value", "expected"), [(0, 0), (2**64 - 1, 2**64 - 1), (7.0, 7)])
def test_measured_count_accepts_whole_counts(value: float, expected: int) -> None:
    assert measured_count(value, "mlx5_0", "symbol_error") == expected


@pytest.mark.parametrize("value", [-1, 2**64, 0.5, math.nan, False])
def test_measured_count_refuses_the_rest(value: object) -> None:
    with pytest.raises(Unmeasurable):
        measured_count(value, "mlx5_0", "symbol_error", ERROR_COUNT)


@pytest.mark.parametrize(("value", "result"), [(True, True), (False, False)])
def test_measured_flag(value: bool, result: bool) -> None:
    assert measured_flag(value, "gpu0", "pending") is result


@pytest.mark.parametrize("value", [None, 0, 1, "false", math.nan])
def test_measured_flag_refuses_non_booleans(value: object) -> None:
    with pytest.raises(Unmeasurable):
        measured_flag(value, "gpu0", "pending")


def test_cpulist_garbage_is_unmeasurable() -> None:
    assert parse_cpulist("0-3,8") == frozenset({0, 1, 2, 3, 8})
    with pytest.raises(Unmeasurable):
        parse_cpulist("3-1")


# ------------------------------------------------------------------ roll_up

P = Finding("gpu0", Status.PASS, "ok", "ok")
F = Finding("gpu1", Status.FAIL, "bad", "good")
U = Finding("gpu2", Status.INCOMPLETE, "not measured", "good", "NVML timed out")


@pytest.mark.parametrize(("findings", "status"), [
    ([P], Status.PASS), ([P, P], Status.PASS), ([F], Status.FAIL), ([P, F], Status.FAIL), ([F, P], Status.FAIL),
    ([U], Status.INCOMPLETE), ([P, U], Status.INCOMPLETE), ([U, P], Status.INCOMPLETE),
    ([F, U], Status.FAIL), ([U, F], Status.FAIL), ([], Status.INCOMPLETE),
])
def test_roll_up(findings: list[Finding], status: Status) -> None:
    verdict = roll_up("GPU-99", "n1", findings, expected="good")
    assert verdict.status is status
    assert verdict.reason.startswith("GPU-99")


def test_roll_up_fail_names_the_failed_and_the_unmeasured() -> None:
    verdict = roll_up("GPU-99", "n1", [P, F, U], expected="good")
    assert verdict.reason == "GPU-99 gpu1 bad (expected good); not measured: gpu2 NVML timed out"


def test_roll_up_incomplete_names_the_cause() -> None:
    verdict = roll_up("GPU-99", "n1", [P, U], expected="good")
    assert verdict.reason == "GPU-99 could not be measured: gpu2: NVML timed out"


def test_roll_up_nothing_measured_is_incomplete() -> None:
    verdict = roll_up("GPU-99", "n1", [], expected="good")
    assert verdict.status is Status.INCOMPLETE and "found nothing to measure" in verdict.reason


@pytest.mark.parametrize(("failed", "shown", "more"), [(4, 4, ""), (5, 4, "; +1 more"), (9, 4, "; +5 more")])
def test_roll_up_folds_long_lists(failed: int, shown: int, more: str) -> None:
    findings = [Finding(f"gpu{i}", Status.FAIL, "bad", "good") for i in range(failed)]
    verdict = roll_up("GPU-99", "n1", findings, expected="good")
    assert verdict.measured.count("gpu") == shown
    assert verdict.measured.endswith(more) if more else "more" not in verdict.measured


def test_roll_up_pass_reports_healthy_text() -> None:
    assert roll_up("GPU-99", "n1", [P], expected="good", healthy="all good").measured == "all good"
    assert roll_up("GPU-99", "n1", [P], expected="good").measured == "ok"


def test_incomplete_helper() -> None:
    verdict = incomplete("IB-01", "n1", "ibstat timed out")
    assert verdict.status is Status.INCOMPLETE and verdict.reason == "IB-01 could not be measured: ibstat timed out"


@pytest.mark.parametrize(("length", "shown"), [(39, 39), (40, 40), (41, 40), (60, 40)])
def test_long_values_are_quoted_shortened_to_40_characters(length: int, shown: int) -> None:
    value = "v" * (length - 2)  # repr adds the two quotes
    with pytest.raises(Unmeasurable) as info:
        measured_number(value, "n", "x", RANGE)
    quoted = info.value.reason.removeprefix("n x ").removesuffix(" is not a number")
    assert len(quoted) == shown
    assert quoted == (repr(value) if length <= 40 else repr(value)[:37] + "...")
