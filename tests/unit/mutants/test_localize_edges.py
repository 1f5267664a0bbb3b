"""The NCCL-04 planner's rules, checked on every round of many small racks (burnin.fabric.localize).

tests/unit/fabric/test_fabric_localize.py follows a few racks to their end; these check, round by
round, the rules each plan must keep, including racks with flaky tests, and the bisection and
repair steps at their bounds. Written for the mutants bench/mutants showed surviving.
"""

from __future__ import annotations

import random

import pytest

from burnin.fabric.localize import BISECT_MIN, Job, Localizer, simulate


def other(job: Job) -> str:
    return next(n for n in job.nodes if n != job.suspect)


def checked_round(planner: Localizer) -> list[Job]:
    """The next round, after checking it against the planner's rules as they stood before it."""
    first = planner.rounds == 0
    good = set(planner.good)
    suspects = set(planner.suspects)
    strikes = dict(planner.strikes)
    tried = {node: set(mates) for node, mates in planner.partners.items()}
    failed_with: dict[str, set[str]] = {}
    for rnd in planner.history:
        for job, ok in rnd:
            if job.kind in ("partner", "confirm") and not ok:
                assert job.suspect is not None
                failed_with.setdefault(job.suspect, set()).add(other(job))
    tests = planner.next_round()
    members = [n for t in tests for n in t.nodes]
    assert len(members) == len(set(members)), f"a node is in two tests of one round: {tests}"
    if first:
        assert all(t.kind == "pair" and len(t.nodes) == 2 for t in tests)
        return tests
    known_good_used = {other(t) for t in tests if t.kind in ("partner", "confirm")}
    for test in tests:
        if test.kind not in ("partner", "confirm"):
            continue
        assert test.suspect in suspects and len(test.nodes) == 2
        partner = other(test)
        assert partner in good, f"{test}: {partner} is not known good"
        if test.kind == "confirm":
            assert strikes.get(test.suspect), f"{test}: a confirmation without a first failure"
            assert partner not in failed_with.get(test.suspect, set()), f"{test}: confirmed with the same node"
        else:
            assert not strikes.get(test.suspect)
            if partner in tried.get(test.suspect, set()):
                spare = good - known_good_used - tried.get(test.suspect, set())
                assert not spare, f"{test}: paired again with {partner} while {sorted(spare)} were free"
    partnered = {t.suspect for t in tests if t.kind in ("partner", "confirm")}
    for suspect in suspects - partnered:
        if not strikes.get(suspect):
            assert good <= known_good_used, f"{suspect} waits while {sorted(good - known_good_used)} are free"
    return tests


def drive(planner: Localizer, bad: set[str], *, flaky: float = 0.0, seed: int = 0) -> list[list[Job]]:
    """To the end: a test fails when it holds a bad node, or at random with probability ``flaky``."""
    rng = random.Random(seed)
    rounds: list[list[Job]] = []
    while True:
        tests = checked_round(planner)
        if not tests:
            return rounds
        rounds.append(tests)
        planner.record([not (set(t.nodes) & bad) and rng.random() >= flaky for t in tests])


RACKS = [(size, bads, seed) for size in (3, 4, 5, 6, 8, 9, 12, 16, 24) for bads in (1, 2, size // 2)
         for seed in range(4)]


@pytest.mark.parametrize(("size", "bads", "seed"), RACKS)
def test_every_round_keeps_the_rules_and_no_healthy_node_is_named(size: int, bads: int, seed: int) -> None:
    nodes = [f"n{i:02d}" for i in range(size)]
    bad = set(random.Random(seed).sample(nodes, bads))
    planner = Localizer(nodes, seed=seed)
    drive(planner, bad)
    assert not (planner.named - bad), "a healthy node was named"
    assert not (planner.good & bad), "a bad node was cleared"
    assert planner.named | planner.unresolved >= bad
    assert planner.rounds <= planner.max_rounds


@pytest.mark.parametrize(("size", "bads", "seed"), RACKS)
def test_the_rules_hold_when_tests_fail_at_random(size: int, bads: int, seed: int) -> None:
    nodes = [f"n{i:02d}" for i in range(size)]
    bad = set(random.Random(seed).sample(nodes, bads))
    planner = Localizer(nodes, seed=seed)
    drive(planner, bad, flaky=0.2, seed=seed)
    assert not (planner.good & bad), "a bad node was cleared"
    assert planner.rounds <= planner.max_rounds


@pytest.mark.parametrize("seed", range(8))
def test_one_bad_node_among_eight_is_named_alone(seed: int) -> None:
    nodes = [f"n{i}" for i in range(8)]
    planner = Localizer(nodes, seed=seed)
    drive(planner, {"n5"})
    assert planner.named == {"n5"} and not planner.unresolved
    assert planner.good == set(nodes) - {"n5"}


def test_pass_one_records_each_node_with_its_mate() -> None:
    planner = Localizer(["a", "b", "c", "d"], seed=1)
    tests = planner.next_round()
    planner.record([False, True])
    for test in tests:
        x, y = test.nodes
        assert planner.partners[x] == {y} and planner.partners[y] == {x}


def test_the_round_limit_ends_the_plan() -> None:
    planner = Localizer([f"n{i}" for i in range(8)], seed=0, max_rounds=1)
    tests = planner.next_round()
    planner.record([False] * len(tests))
    assert planner.done and planner.next_round() == []
    assert planner.unresolved == {n for t in tests for n in t.nodes}


def forced_first_round(planner: Localizer, pairs: list[tuple[str, str]]) -> None:
    planner.next_round()
    planner._pending = [Job(pair, "pair") for pair in pairs]


def test_eight_suspects_without_a_known_good_node_are_bisected() -> None:
    assert BISECT_MIN == 8
    nodes = [f"n{i}" for i in range(8)]
    planner = Localizer(nodes, seed=0)
    forced_first_round(planner, [("n0", "n4"), ("n1", "n5"), ("n2", "n6"), ("n3", "n7")])
    planner.record([False] * 4)
    second = checked_round(planner)
    assert [(t.kind, t.nodes) for t in second] == [("group", tuple(nodes))]
    planner.record([False])
    third = checked_round(planner)
    assert [(t.kind, t.nodes) for t in third] == [("group", ("n0", "n1", "n2", "n3")),
                                                  ("group", ("n4", "n5", "n6", "n7"))]
    planner.record([False, False])
    fourth = checked_round(planner)
    assert [(t.kind, t.nodes) for t in fourth] == [("group", ("n0", "n1")), ("group", ("n2", "n3")),
                                                   ("group", ("n4", "n5")), ("group", ("n6", "n7"))]
    planner.record([True, False, True, False])
    assert planner.good == {"n0", "n1", "n4", "n5"}
    fifth = checked_round(planner)
    assert {t.kind for t in fifth} == {"partner"} and {t.suspect for t in fifth} == {"n2", "n3", "n6", "n7"}


def test_a_passing_group_clears_its_members() -> None:
    nodes = [f"n{i}" for i in range(8)]
    planner = Localizer(nodes, seed=0)
    forced_first_round(planner, [("n0", "n4"), ("n1", "n5"), ("n2", "n6"), ("n3", "n7")])
    planner.record([False] * 4)
    checked_round(planner)
    planner.record([True])  # the whole group passes: the pairs failed by chance
    assert planner.good == set(nodes) and not planner.suspects and planner.done


def test_seven_suspects_without_a_known_good_node_are_paired_anew() -> None:
    nodes = [f"n{i}" for i in range(7)]
    planner = Localizer(nodes, seed=0)
    forced_first_round(planner, [("n0", "n1"), ("n2", "n3"), ("n4", "n5")])
    planner.record([False] * 3)
    assert planner.suspects == set(nodes)  # n6, the odd node out, was not tested yet
    second = checked_round(planner)
    assert len(second) == 3 and {t.kind for t in second} == {"pair"}
    for test in second:
        assert set(test.nodes) not in ({"n0", "n1"}, {"n2", "n3"}, {"n4", "n5"})


def test_checking_done_does_not_change_the_plan() -> None:
    for seed in range(12):
        nodes = [f"n{i:02d}" for i in range(10)]
        bad = set(random.Random(seed).sample(nodes, 3))
        plain, curious = Localizer(nodes, seed=seed), Localizer(nodes, seed=seed)
        outcomes = random.Random(seed)
        while True:
            for _ in range(3):
                _ = curious.done
            tests = plain.next_round()
            assert curious.next_round() == tests, f"seed {seed}: looking at done changed round {plain.rounds + 1}"
            if not tests:
                break
            result = [not (set(t.nodes) & bad) and outcomes.random() >= 0.2 for t in tests]
            plain.record(result)
            curious.record(result)


def test_known_good_partners_are_drawn_at_random_with_the_seed() -> None:
    partners = set()
    for seed in range(10):
        planner = Localizer([f"n{i}" for i in range(8)], seed=seed)
        forced_first_round(planner, [("n0", "n1"), ("n2", "n3"), ("n4", "n5"), ("n6", "n7")])
        planner.record([False, True, True, True])
        second = planner.next_round()
        partners.add(next(other(t) for t in second if t.suspect == "n0"))
        again = Localizer([f"n{i}" for i in range(8)], seed=seed)
        forced_first_round(again, [("n0", "n1"), ("n2", "n3"), ("n4", "n5"), ("n6", "n7")])
        again.record([False, True, True, True])
        assert again.next_round() == second, "the same seed plans the same round"
    assert len(partners) > 1


def test_simulated_tests_pass_at_the_minimum() -> None:
    """With no tolerance, a healthy pair is exactly at pass one's median and passes."""
    nodes = [f"n{i}" for i in range(8)]
    trial = simulate(nodes, {"n3": 0.5}, tolerance=0.0, seed=2)
    assert trial.named == {"n3"} and not trial.unresolved


def test_two_nodes_are_tested_one_node_is_not() -> None:
    assert Localizer(["a"]).done
    pair = Localizer(["a", "b"])
    assert not pair.done
    assert [t.nodes for t in pair.next_round()] in ([("a", "b")], [("b", "a")])


@pytest.mark.parametrize(("confirm", "failures_to_name"), [(True, 2), (False, 1)])
def test_a_suspect_is_named_after_the_strikes_it_needs(confirm: bool, failures_to_name: int) -> None:
    planner = Localizer([f"n{i}" for i in range(8)], seed=3, confirm=confirm)
    forced_first_round(planner, [("n0", "n1"), ("n2", "n3"), ("n4", "n5"), ("n6", "n7")])
    planner.record([False, True, True, True])
    for strike in range(1, failures_to_name + 1):
        tests = checked_round(planner)
        planner.record([t.suspect != "n0" for t in tests])
        assert ("n0" in planner.named) is (strike == failures_to_name)
    assert planner.named == {"n0"} and planner.good == {f"n{i}" for i in range(1, 8)}
