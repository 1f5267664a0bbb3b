"""The repair ladder's policy, pure: which step comes next, when it climbs, and that it always ends."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from burnin.repair.policy import (
    DAY_S,
    DEFAULT,
    REBOOT,
    RESET,
    VENDOR,
    Attempt,
    Incident,
    Ladder,
    incident_class,
    incidents_from,
    next_step,
)

NOW = 1_800_000_000.0


def test_a_first_gpu_incident_starts_with_a_reset_and_climbs_when_the_check_fails_again() -> None:
    first = next_step([], NOW, "gpu")
    assert (first.step, first.rung, first.new_incident) == (RESET, 0, True)
    after_reset = next_step([Incident(NOW, (Attempt(NOW, RESET, "fail"),))], NOW, "gpu")
    assert (after_reset.step, after_reset.new_incident) == (REBOOT, False)
    assert "failed again after the reset" in after_reset.why
    after_reboot = next_step([Incident(NOW, (Attempt(NOW, RESET, "fail"), Attempt(NOW, REBOOT, "fail")))], NOW,
                             "gpu")
    assert after_reboot.step == VENDOR


def test_a_fabric_or_other_incident_has_no_reset_rung() -> None:
    assert next_step([], NOW, "fabric").step == REBOOT
    assert next_step([], NOW, "node").step == REBOOT
    assert next_step([], NOW, "unknown-class").step == REBOOT  # the node ladder


def test_a_step_that_could_not_be_taken_climbs_and_an_incomplete_repeats_its_rung_once() -> None:
    assert next_step([Incident(NOW, (Attempt(NOW, RESET, "not-taken"),))], NOW, "gpu").step == REBOOT
    once = next_step([Incident(NOW, (Attempt(NOW, RESET, "incomplete"),))], NOW, "gpu")
    assert once.step == RESET and "once more" in once.why
    twice = [Incident(NOW, (Attempt(NOW, RESET, "incomplete"), Attempt(NOW, RESET, "incomplete")))]
    assert next_step(twice, NOW, "gpu").step == REBOOT


def test_k_incidents_in_d_days_start_the_next_one_a_rung_up_and_older_ones_do_not_count() -> None:
    closed = [Incident(NOW - i * DAY_S, (Attempt(NOW - i * DAY_S, RESET, "pass"),), closed=True) for i in (5, 3)]
    third = next_step(closed, NOW, "gpu")  # 3 incidents in 30 days (default K=3)
    assert (third.step, third.new_incident) == (REBOOT, True)
    assert "incident 3" in third.why
    fourth = next_step([*closed, Incident(NOW - DAY_S, closed=True)], NOW, "gpu")
    assert fourth.step == VENDOR
    old = [Incident(NOW - 40 * DAY_S, closed=True), Incident(NOW - 31 * DAY_S, closed=True)]
    assert next_step(old, NOW, "gpu").step == RESET


def test_check_ids_map_to_their_class_by_family_and_run_names_none() -> None:
    assert incident_class(["GPU-04"]) == "gpu"
    assert incident_class(["RUN", "IB-01", "GPU-04"]) == "fabric"
    assert incident_class(["INV-04"]) == "node"
    assert incident_class(["RUN"]) == "node"


def test_the_journal_reads_back_into_incidents_per_node_and_class() -> None:
    entries = [
        {"at": 1, "node": "a", "class": "gpu", "event": "open"},
        {"at": 2, "node": "a", "class": "gpu", "event": "attempt", "step": "reset", "outcome": "fail"},
        {"at": 2, "node": "b", "class": "gpu", "event": "open"},
        {"at": 3, "node": "a", "class": "fabric", "event": "open"},
        {"at": 4, "node": "a", "class": "gpu", "event": "attempt", "step": "reboot", "outcome": "pass"},
        {"at": 5, "node": "a", "class": "gpu", "event": "close", "how": "resumed"},
        {"at": 6, "node": "a", "class": "gpu", "event": "attempt", "step": "reset", "outcome": "fail"},  # none open
        {"at": 7, "node": "a", "class": "gpu", "event": "open"},
        {"at": 8, "node": "a", "class": "gpu", "event": "attempt", "step": "bogus", "outcome": "fail"},
    ]
    incidents = incidents_from(entries, "a", "gpu")
    assert incidents == [Incident(1.0, (Attempt(2.0, RESET, "fail"), Attempt(4.0, REBOOT, "pass")), True),
                         Incident(7.0)]


outcomes = st.sampled_from(["fail", "incomplete", "not-taken"])


@pytest.mark.fuzz
@settings(max_examples=300, deadline=None)
@given(klass=st.sampled_from(["gpu", "fabric", "node"]), results=st.lists(outcomes, max_size=12),
       retries=st.integers(0, 3), earlier=st.integers(0, 6))
def test_the_ladder_never_goes_down_and_always_reaches_the_vendor(klass: str, results: list[str], retries: int,
                                                                   earlier: int) -> None:
    ladder = Ladder(DEFAULT.ladders, DEFAULT.classes, incidents=3, days=30, incomplete_retries=retries)
    steps = ladder.steps(klass)
    history = [Incident(NOW - (i + 1) * DAY_S, closed=True) for i in range(earlier)]
    rungs = []
    attempts: tuple[Attempt, ...] = ()
    for result in results:
        decision = next_step([*history, Incident(NOW, attempts)], NOW, klass, ladder)
        rungs.append(decision.rung)
        if decision.step == VENDOR:
            break
        attempts = (*attempts, Attempt(NOW, decision.step, result))  # type: ignore[arg-type]
    assert rungs == sorted(rungs)  # never down
    assert all(steps[r] in steps for r in rungs)
    bound = len(steps) * (retries + 1)
    if len(results) >= bound:  # every non-pass outcome: the vendor within the bound
        assert steps[rungs[-1]] == VENDOR


@pytest.mark.fuzz
@settings(max_examples=200, deadline=None)
@given(ages=st.lists(st.floats(0, 90), max_size=8), k=st.integers(1, 5))
def test_more_recent_incidents_never_start_lower(ages: list[float], k: int) -> None:
    ladder = Ladder(DEFAULT.ladders, DEFAULT.classes, incidents=k, days=30)
    history = sorted((Incident(NOW - a * DAY_S, closed=True) for a in ages), key=lambda i: i.opened)
    start = next_step(history, NOW, "gpu", ladder).rung
    recent = sum(1 for a in ages if a <= 30)
    assert start == min(max(0, recent + 1 - k + 1), 2)
    more = next_step([*history, Incident(NOW - DAY_S, closed=True)], NOW, "gpu", ladder).rung
    assert more >= start
