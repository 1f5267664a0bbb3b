"""REL-02 figures from hand-built observation sequences: outages, MTTR, availability, lemons, fleet counts."""

from __future__ import annotations

import pytest

from burnin.history.metrics import (
    DAY_S,
    DEFAULT_LEMON_FAILURES,
    DEFAULT_LEMON_WINDOW_S,
    Lemon,
    find_lemon,
    fleet_history,
    node_history,
)
from burnin.history.records import Observation

T0 = 1_780_000_000.0


def seen(node: str, day: float, admitted: bool = True, failed: tuple[str, ...] = (),
         incomplete: tuple[str, ...] = (), reason: str = "", source: str = "run") -> Observation:
    return Observation(node, T0 + day * DAY_S, admitted, failed, incomplete, reason or ",".join(failed + incomplete),
                       f"runs/day{day:g}", source)  # type: ignore[arg-type]


def test_the_catalogs_defaults() -> None:
    assert DEFAULT_LEMON_FAILURES == 3 and DEFAULT_LEMON_WINDOW_S == 30 * DAY_S == 30 * 86400


def test_a_rejection_until_the_next_admission_is_one_outage() -> None:
    history = node_history("n1", [seen("n1", 0), seen("n1", 1, False, ("GPU-10",)), seen("n1", 3),
                                  seen("n1", 10, False, ("IB-02",)), seen("n1", 11, False, ("IB-04",), ("IB-05",)),
                                  seen("n1", 12), seen("n1", 20)], T0 + 20 * DAY_S)
    assert [(o.start, o.end) for o in history.outages] == [(T0 + DAY_S, T0 + 3 * DAY_S),
                                                           (T0 + 10 * DAY_S, T0 + 12 * DAY_S)]
    assert history.outages[1].failed == ["IB-02", "IB-04"] and history.outages[1].incomplete == ["IB-05"]
    assert len(history.failures) == 2 and history.observations == 7
    assert history.mttr_s == 2 * DAY_S
    # in the pool 0-1, 3-10 and 12-20: 16 of 20 days
    assert history.in_pool_s == 16 * DAY_S and history.observed_s == 20 * DAY_S
    assert history.availability == pytest.approx(0.8)
    assert history.out_since is None
    assert (history.first_seen, history.last_seen) == (T0, T0 + 20 * DAY_S)


def test_mttr_is_the_mean_of_closed_outages_and_an_open_one_is_out_since() -> None:
    history = node_history("n1", [seen("n1", 0, False, ("GPU-04",)), seen("n1", 1), seen("n1", 2, False, ("GPU-01",)),
                                  seen("n1", 5), seen("n1", 6, False, ("GPU-03",))], T0 + 8 * DAY_S)
    assert history.repairs_s == [DAY_S, 3 * DAY_S]
    assert history.mttr_s == 2 * DAY_S
    assert history.out_since == T0 + 6 * DAY_S
    assert history.outages[-1].end is None and history.outages[-1].attributed
    # in the pool 1-2 and 5-6 of the 8 days since first seen
    assert history.in_pool_s == 2 * DAY_S and history.availability == pytest.approx(0.25)


def test_a_node_never_admitted_has_no_mttr_and_no_availability_time() -> None:
    history = node_history("n1", [seen("n1", 0, False, ("INV-01",)), seen("n1", 2, False, ("INV-01",))],
                           T0 + 4 * DAY_S)
    assert history.mttr_s is None and history.in_pool_s == 0 and history.availability == 0
    assert len(history.outages) == 1 and history.out_since == T0


def test_a_node_seen_once_at_the_end_has_no_availability() -> None:
    history = node_history("n1", [seen("n1", 4)], T0 + 4 * DAY_S)
    assert history.observed_s == 0 and history.availability is None and history.mttr_s is None


def test_an_unmeasured_hold_is_out_of_the_pool_but_no_attributed_failure() -> None:
    history = node_history("n1", [seen("n1", 0), seen("n1", 1, False, (), ("RUN",), "RUN unreachable"),
                                  seen("n1", 2)], T0 + 2 * DAY_S)
    assert len(history.outages) == 1 and not history.outages[0].attributed and history.failures == []
    assert history.mttr_s == DAY_S and history.availability == pytest.approx(0.5)


def test_the_outages_reason_is_its_first_failures() -> None:
    history = node_history("n1", [seen("n1", 1, False, (), ("IB-01",), "IB-01 could not be measured"),
                                  seen("n1", 2, False, ("IB-02",), (), "IB-02 200 Gb/s"),
                                  seen("n1", 3, False, ("IB-04",), (), "IB-04 errors")], T0 + 3 * DAY_S)
    outage = history.outages[0]
    assert outage.reason == "IB-02 200 Gb/s" and outage.failed == ["IB-02", "IB-04"]
    assert outage.origins == ["runs/day1", "runs/day2", "runs/day3"] and outage.sources == ["run"]


def test_a_rejection_keeps_the_first_reason_when_none_failed() -> None:
    outage = node_history("n1", [seen("n1", 1, False, (), ("A",), "first"), seen("n1", 2, False, (), ("B",), "second")],
                          T0 + 2 * DAY_S).outages[0]
    assert outage.reason == "first" and outage.incomplete == ["A", "B"]


def test_observations_are_taken_in_time_order_whatever_order_they_come_in() -> None:
    history = node_history("n1", [seen("n1", 3), seen("n1", 0), seen("n1", 1, False, ("GPU-10",))], T0 + 3 * DAY_S)
    assert history.mttr_s == 2 * DAY_S and history.first_seen == T0


def test_a_watch_drain_and_the_runs_rejection_are_one_outage() -> None:
    history = node_history("n1", [seen("n1", 0), seen("n1", 1, False, ("GPU-04",), source="watch"),
                                  seen("n1", 1.5, False, ("GPU-04", "GPU-03")), seen("n1", 2)], T0 + 2 * DAY_S)
    assert len(history.outages) == 1 and history.outages[0].sources == ["watch", "run"]
    assert history.outages[0].failed == ["GPU-04", "GPU-03"]


# ---------------------------------------------------------------- lemons


@pytest.mark.parametrize(("days", "k", "window_days", "lemon"), [
    ([0, 10, 20], 3, 30, Lemon(3, T0, T0 + 20 * DAY_S)),
    ([0, 20, 40], 3, 30, None),  # never three within 30 days
    ([0, 15, 30], 3, 30, Lemon(3, T0, T0 + 30 * DAY_S)),  # the window's end is inside it
    ([0, 15, 30.01], 3, 30, None),
    ([0, 20, 40], 2, 30, Lemon(2, T0, T0 + 20 * DAY_S)),  # the earliest of the best windows
    ([40, 0, 45, 50], 3, 30, Lemon(3, T0 + 40 * DAY_S, T0 + 50 * DAY_S)),
    ([0, 1, 2, 3], 3, 30, Lemon(4, T0, T0 + 3 * DAY_S)),  # the most failures in one window
    ([0, 1], 3, 30, None),
    ([], 1, 30, None),
    ([5], 1, 30, Lemon(1, T0 + 5 * DAY_S, T0 + 5 * DAY_S)),
])
def test_a_lemon_has_k_failures_within_the_window(days: list[float], k: int, window_days: float,
                                                  lemon: Lemon | None) -> None:
    assert find_lemon([T0 + d * DAY_S for d in days], k, window_days * DAY_S) == lemon


def test_only_attributed_failures_make_a_lemon() -> None:
    observations = []
    for day in (1, 3, 5):
        observations += [seen("n1", day, False, (), ("RUN",)), seen("n1", day + 1)]
        observations += [seen("n2", day, False, ("GPU-04",)), seen("n2", day + 1)]
    fleet = fleet_history(observations)
    assert fleet.lemons == ["n2"] and fleet.nodes["n1"].lemon is None
    assert fleet.nodes["n2"].lemon == Lemon(3, T0 + DAY_S, T0 + 5 * DAY_S)


def test_the_lemon_settings_are_used() -> None:
    observations = [seen("n1", d, False, ("GPU-04",)) for d in (0, 10)] + [seen("n1", d) for d in (1, 11)]
    assert fleet_history(observations).lemons == []
    assert fleet_history(observations, lemon_failures=2).lemons == ["n1"]
    assert fleet_history(observations, lemon_failures=2, lemon_window_s=9 * DAY_S).lemons == []
    settings = fleet_history(observations, lemon_failures=2, lemon_window_s=9 * DAY_S)
    assert (settings.lemon_failures, settings.lemon_window_s) == (2, 9 * DAY_S)


# ---------------------------------------------------------------- the fleet


def test_fleet_counts_and_rates() -> None:
    observations = [
        seen("a", 0), seen("a", 10),
        seen("b", 0), seen("b", 2, False, ("GPU-10",)), seen("b", 4), seen("b", 6, False, ("GPU-10", "IB-02")),
        seen("b", 7),
        seen("c", 0), seen("c", 8, False, (), ("RUN",)),
    ]
    fleet = fleet_history(observations)
    assert (fleet.start, fleet.end) == (T0, T0 + 10 * DAY_S)
    assert list(fleet.nodes) == ["a", "b", "c"]
    assert fleet.failures == 2
    assert fleet.failures_by_check == {"GPU-10": 2, "IB-02": 1}
    assert fleet.out_now == ["c"] and fleet.lemons == []
    # repairs: b 2 d and 1 d (c's outage is still open)
    assert fleet.mttr_s == pytest.approx(1.5 * DAY_S)
    # in the pool: a 10 d, b 2 + 2 + 3 = 7 d, c 8 d of 30 observed node-days
    assert fleet.node_days_in_pool == pytest.approx(25)
    assert fleet.availability == pytest.approx(25 / 30)
    assert fleet.failures_per_1000_node_days == pytest.approx(1000 * 2 / 25)


def test_a_fleet_with_no_time_has_no_rates() -> None:
    fleet = fleet_history([seen("a", 0), seen("b", 0, False, ("GPU-01",))])
    assert fleet.availability is None and fleet.failures_per_1000_node_days is None and fleet.mttr_s is None
    assert fleet.node_days_in_pool == 0 and fleet.failures == 1


def test_no_observation_is_no_history() -> None:
    with pytest.raises(ValueError, match="no observation"):
        fleet_history([])


def test_an_origin_is_named_once_and_an_unnamed_one_not_at_all() -> None:
    drain = Observation("n1", T0 + 10, False, ("GPU-04",), (), "Xid 79", "/var/lib/burnin/watch/events.jsonl", "watch")
    again = Observation("n1", T0 + 20, False, ("GPU-04",), (), "Xid 79", "/var/lib/burnin/watch/events.jsonl", "watch")
    unnamed = Observation("n1", T0 + 30, False, ("GPU-03",), (), "", "", "run")
    outage = node_history("n1", [drain, again, unnamed], T0 + 30).outages[0]
    assert outage.origins == ["/var/lib/burnin/watch/events.jsonl"] and outage.sources == ["watch", "run"]


def test_under_a_second_or_a_day_still_has_rates() -> None:
    history = node_history("n1", [seen("n1", 0), seen("n1", 0.5 / DAY_S, False, ("GPU-04",))],
                           T0 + 0.5)
    assert history.observed_s == pytest.approx(0.5) and history.availability == pytest.approx(1.0)
    fleet = fleet_history([seen("a", 0), seen("a", 0.5, False, ("GPU-04",)), seen("b", 0), seen("b", 0.5)])
    assert fleet.node_days_in_pool == pytest.approx(1.0)
    half = fleet_history([seen("a", 0), seen("a", 0.5, False, ("GPU-04",))])
    assert half.node_days_in_pool == pytest.approx(0.5)
    assert half.failures_per_1000_node_days == pytest.approx(2000)
    assert half.availability == pytest.approx(1.0)
    brief = fleet_history([seen("a", 0), seen("a", 0.5 / DAY_S, False, ("GPU-04",))])
    assert brief.availability == pytest.approx(1.0)
