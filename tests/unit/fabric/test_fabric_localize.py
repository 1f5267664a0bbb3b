"""The NCCL-04 planner: disjoint rounds, known-good partners, confirmation, bisection, fail closed."""

from __future__ import annotations

import random

import pytest

from burnin.fabric.localize import Job, Localizer, simulate

NODES_1024 = [f"gpu{i:04d}" for i in range(1, 1025)]


def drive(planner: Localizer, bad: set[str]) -> list[list[Job]]:
    """Run to the end with exact outcomes: a test fails iff it holds a bad node."""
    rounds = []
    while True:
        tests = planner.next_round()
        if not tests:
            return rounds
        rounds.append(tests)
        planner.record([not (set(t.nodes) & bad) for t in tests])


@pytest.mark.parametrize("seed", range(12))
def test_one_to_three_bad_of_1024_named_in_three_rounds(seed: int) -> None:
    rng = random.Random(seed)
    bad = set(rng.sample(NODES_1024, rng.randint(1, 3)))
    planner = Localizer(NODES_1024, seed=seed)
    rounds = drive(planner, bad)
    assert planner.named == bad
    assert planner.rounds == len(rounds) <= 3
    assert not planner.unresolved


def test_without_confirm_two_rounds_suffice() -> None:
    planner = Localizer(NODES_1024, seed=3, confirm=False)
    drive(planner, {"gpu0007", "gpu0500"})
    assert planner.named == {"gpu0007", "gpu0500"} and planner.rounds == 2


@pytest.mark.parametrize("seed", range(6))
def test_every_round_is_disjoint_and_pairs_a_suspect_with_a_known_good_node(seed: int) -> None:
    bad = {"gpu0010", "gpu0011", "gpu0999"}
    planner = Localizer(NODES_1024, seed=seed)
    good_before: set[str] = set()
    for number, tests in enumerate(drive(planner, bad), start=1):
        members = [n for t in tests for n in t.nodes]
        assert len(members) == len(set(members)), "a node is in two tests of one round"
        if number == 1:
            assert all(t.kind == "pair" and len(t.nodes) == 2 for t in tests)
            assert len(members) == 1024
        for test in tests:
            if test.kind in ("partner", "confirm"):
                partner = next(n for n in test.nodes if n != test.suspect)
                assert partner in good_before or partner in planner.good
        good_before |= planner.good


def test_confirmation_uses_a_different_partner() -> None:
    planner = Localizer(NODES_1024, seed=5)
    rounds = drive(planner, {"gpu0042"})
    partner_of = {t.kind: next(n for n in t.nodes if n != "gpu0042") for r in rounds for t in r
                  if t.suspect == "gpu0042"}
    assert set(partner_of) == {"partner", "confirm"} and partner_of["partner"] != partner_of["confirm"]


def test_a_noisy_failure_with_a_good_partner_is_not_enough() -> None:
    planner = Localizer([f"n{i}" for i in range(8)], seed=1)
    first = planner.next_round()
    planner.record([i != 0 for i in range(len(first))])  # one pair fails (noise: nobody is bad)
    second = planner.next_round()
    assert {t.kind for t in second} == {"partner"} and len(second) == 2
    planner.record([t.suspect != first[0].nodes[0] for t in second])  # one suspect fails once
    third = planner.next_round()
    assert [t.kind for t in third] == ["confirm"]
    planner.record([True])  # ... and passes with another partner: cleared
    assert planner.done and not planner.named and not planner.unresolved


def test_two_nodes_one_bad_cannot_be_told_apart() -> None:
    planner = Localizer(["a", "b"])
    drive(planner, {"b"})
    assert planner.unresolved == {"a", "b"} and not planner.named


def test_odd_node_out_is_tested_in_pass_two() -> None:
    nodes = [f"n{i}" for i in range(7)]
    planner = Localizer(nodes, seed=2)
    rounds = drive(planner, set())
    assert len(rounds[0]) == 3 and planner.rounds == 2
    assert planner.good == set(nodes)


def test_no_known_good_node_falls_back_to_new_pairings() -> None:
    nodes = [f"n{i}" for i in range(6)]
    bad = {"n0", "n2", "n4"}
    planner = Localizer(nodes, seed=0)
    first = planner.next_round()
    # force the worst first round: every pair holds a bad node
    planner._pending = [Job(("n0", "n1"), "pair"), Job(("n2", "n3"), "pair"), Job(("n4", "n5"), "pair")]
    planner.record([False, False, False])
    assert first and planner.suspects == set(nodes)
    drive(planner, bad)
    assert not (planner.named - bad), "a healthy node was named"
    assert planner.named | planner.unresolved >= bad


def test_many_bad_nodes_use_bisection_and_never_name_a_healthy_one() -> None:
    nodes = [f"n{i:03d}" for i in range(64)]
    bad = set(nodes[::2][:20]) | {"n001", "n003"}
    planner = Localizer(nodes, seed=4)
    rounds = drive(planner, bad)
    assert not (planner.named - bad)
    assert planner.named | planner.unresolved >= bad
    assert planner.rounds <= planner.max_rounds
    assert any(t.kind in ("partner", "confirm") for r in rounds for t in r)


def test_record_must_match_the_round() -> None:
    planner = Localizer(["a", "b", "c", "d"])
    planner.next_round()
    with pytest.raises(ValueError, match="2 tests were planned"):
        planner.record([True])
    planner.record([True, True])
    assert planner.done and planner.rounds == 1


def test_next_round_before_record_is_refused() -> None:
    planner = Localizer(["a", "b", "c", "d"])
    planner.next_round()
    with pytest.raises(RuntimeError):
        planner.next_round()


def test_a_single_node_needs_no_round() -> None:
    assert Localizer(["a"]).next_round() == []


def test_simulated_model_without_noise_names_exactly_the_bad_nodes() -> None:
    trial = simulate(NODES_1024, {"gpu0100": 0.5, "gpu0777": 0.7}, seed=9)
    assert trial.named == {"gpu0100", "gpu0777"} and trial.rounds == 3 and not trial.unresolved
    assert 512 <= trial.tests < 530
