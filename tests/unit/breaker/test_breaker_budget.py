"""The breaker's budget, pure: Slurm's drains and their times, the window, the larger of N and P%."""

from __future__ import annotations

import time

import pytest

from burnin.breaker.budget import Allowance, Settings, admit, budget, parse_fleet, parse_time, window_text

NOW = time.mktime(time.strptime("2026-12-01T18:40:00", "%Y-%m-%dT%H:%M:%S"))
FLEET = """NodeName=sim01 Arch=x86_64 State=IDLE+DRAIN Reason=burnin: GPU-10 gpu3 links down [root@2026-12-01T18:35:00]
NodeName=sim02 Arch=x86_64 State=MIXED+DRAIN Reason=burnin: IB-01 mlx5_2 1: DOWN [slurm@2026-12-01T18:30:00]
NodeName=sim03 Arch=x86_64 State=IDLE+DRAIN Reason=burnin: XID-01 old [root@2026-12-01T18:29:59]
NodeName=sim04 Arch=x86_64 State=IDLE+DRAIN Reason=maintenance by alice [alice@2026-12-01T18:39:00]
NodeName=sim05 Arch=x86_64 State=DOWN+DRAIN Reason=burnin: GPU-01 ecc [root@garbage]
NodeName=sim06 Arch=x86_64 State=IDLE
NodeName=sim07 Arch=x86_64 State=IDLE+DRAIN Reason=burnin: GPU-03 remap ReasonTime=2026-12-01T18:38:00
NodeName=sim08 Arch=x86_64 State=IDLE Reason=burnin: stale reason of a resumed node [root@2026-12-01T18:39:00]
"""


def test_parse_fleet_counts_every_node_and_keeps_only_burnins_drains_with_their_times() -> None:
    fleet = parse_fleet(FLEET)
    assert fleet.total == 8
    times = {node.name: node.at for node in fleet.drained}
    assert sorted(times) == ["sim01", "sim02", "sim03", "sim05", "sim07"]  # not alice's, not an undrained one
    assert times["sim01"] == NOW - 300 and times["sim02"] == NOW - 600 and times["sim03"] == NOW - 601
    assert times["sim05"] is None  # a stamp that is no time
    assert times["sim07"] == NOW - 120  # ReasonTime=


def test_the_window_counts_drains_since_its_start_and_those_of_unknown_time() -> None:
    plan = budget(parse_fleet(FLEET), Settings(nodes=10), NOW)
    assert sorted(plan.counted) == ["sim01", "sim02", "sim05", "sim07"]  # sim02 exactly at the window's start
    assert plan.out_already == {"sim03"}  # drained one second before it
    assert plan.room == 6


@pytest.mark.parametrize(("nodes", "percent", "total", "limit"), [
    (2, 5.0, 10, 2), (2, 5.0, 40, 2), (2, 5.0, 60, 3), (2, 5.0, 1000, 50), (2, 5.0, 59, 2), (0, 0.0, 100, 0),
    (7, 50.0, 10, 7),
])
def test_the_limit_is_the_larger_of_n_nodes_and_p_percent_rounded_down(nodes: int, percent: float, total: int,
                                                                      limit: int) -> None:
    assert Settings(nodes=nodes, percent=percent).base_limit(total) == limit


def test_a_full_budget_holds_new_nodes_but_not_nodes_burnin_already_took_out() -> None:
    plan = budget(parse_fleet(FLEET), Settings(nodes=4), NOW)
    allowed, held = admit(plan, ["sim01", "sim03", "sim06", "sim08"], NOW)
    assert allowed == ["sim01", "sim03"]  # draining again for another reason takes nothing more out
    assert sorted(held) == ["sim06", "sim08"]
    assert held["sim06"].startswith("4 of 4 nodes taken out by burnin in the last 10 min (sim01 at ")
    assert "sim05 at an unreadable time" in held["sim06"]


def test_nodes_are_admitted_in_order_until_the_room_is_spent() -> None:
    plan = budget(parse_fleet("NodeName=a1 State=IDLE\n" * 1), Settings(nodes=2), NOW)
    allowed, held = admit(plan, ["a1", "a2", "a3", "a2"], NOW)
    assert allowed == ["a1", "a2", "a2"] and list(held) == ["a3"]
    assert plan.room == 0


def test_an_allowance_widens_the_budget_only_within_its_window() -> None:
    allowance = Allowance(extra=3, granted=NOW - 10, until=NOW + 590)
    assert budget(parse_fleet(FLEET), Settings(), NOW, allowance).limit == 5
    assert budget(parse_fleet(FLEET), Settings(), NOW + 590, allowance).limit == 2
    assert budget(parse_fleet(FLEET), Settings(), NOW - 11, allowance).limit == 2


def test_times_and_windows_as_text() -> None:
    assert parse_time("2026-12-01T18:40:00") == NOW
    assert parse_time("Unknown") is None and parse_time("") is None
    assert [window_text(s) for s in (600, 7200, 90)] == ["10 min", "2 h", "90 s"]
    assert Settings().describe() == "the larger of 2 nodes and 5% per 10 min"


def test_an_allowance_starts_the_moment_it_is_granted() -> None:
    assert Allowance(1, granted=NOW, until=NOW + 1).active(NOW)


@pytest.mark.parametrize(("count", "tail"), [(5, "a5 at 18:40:00)"), (6, "a5 at 18:40:00 and 1 more)")])
def test_the_cause_names_five_nodes_then_counts_the_rest(count: int, tail: str) -> None:
    plan = budget(parse_fleet(""), Settings(nodes=count), NOW)
    admit(plan, [f"a{n}" for n in range(1, count + 1)], NOW)
    assert plan.cause().endswith(tail), plan.cause()
