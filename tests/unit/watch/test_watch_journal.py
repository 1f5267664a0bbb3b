"""The journal's recent entries and the node's escalation memory (burnin.watch.journal)."""

from __future__ import annotations

from pathlib import Path

from burnin.watch.events import Action, Decision
from burnin.watch.journal import Incidents, Journal


def test_recent_entries_from_the_given_time_on_and_nothing_that_is_no_entry(tmp_path: Path) -> None:
    journal = Journal(tmp_path)
    journal.append({"detected_at": 99.0, "key": ["a"]})
    journal.append({"detected_at": 100.0, "key": ["b"]})
    with journal.path.open("a") as fh:
        fh.write('[1, 2]\n5\n"text"\nnot json\n{"detected_at": "soon"}\n')
    journal.append({"detected_at": 101.0, "key": ["c"]})
    assert [e["key"] for e in journal.recent(100.0)] == [["b"], ["c"]]


def test_recent_of_no_journal_is_empty(tmp_path: Path) -> None:
    assert Journal(tmp_path / "none").recent(0.0) == []


def test_the_state_folder_is_made_on_the_first_entry(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "state" / "watch")
    journal.append({"detected_at": 1.0})
    assert journal.recent(0.0) == [{"detected_at": 1.0}]


def _decision(action: Action, why: str) -> Decision:
    return Decision(action, "GPU-04", why, ("GPU-04", "xid", "0000:1b:00", "79"))


def test_covered_up_to_exactly_the_window() -> None:
    incidents = Incidents(60.0)
    incidents.acted(_decision(Action.EVICT, "gpu3 Xid 79"), 1000.0)
    assert incidents.covered(Action.EVICT, 1060.0) == "node already evicted 60.0 s ago (burnin: GPU-04 gpu3 Xid 79)"
    assert incidents.covered(Action.DRAIN, 1030.0) is not None
    assert incidents.covered(Action.EVICT, 1060.5) is None
    assert incidents.covered(Action.RECORD, 1001.0) is None


def test_a_later_action_of_the_same_level_restarts_the_window() -> None:
    """Evicted, resumed, evicted again 30 s later: 80 s after the first, the node is still covered by the second."""
    incidents = Incidents(60.0)
    incidents.acted(_decision(Action.EVICT, "gpu3 Xid 79"), 1000.0)
    incidents.acted(_decision(Action.EVICT, "gpu5 Xid 48"), 1030.0)
    covered = incidents.covered(Action.EVICT, 1080.0)
    assert covered is not None and "gpu5 Xid 48" in covered


def test_a_lower_action_within_the_window_does_not_lower_the_memory() -> None:
    incidents = Incidents(60.0)
    incidents.acted(_decision(Action.EVICT, "gpu3 Xid 79"), 1000.0)
    incidents.acted(_decision(Action.DRAIN, "gpu3 Xid 74"), 1010.0)
    assert incidents.covered(Action.EVICT, 1050.0) is not None
    incidents.acted(_decision(Action.DRAIN, "gpu3 Xid 74"), 1070.0)  # the eviction's window is over
    assert incidents.covered(Action.EVICT, 1071.0) is None and incidents.covered(Action.DRAIN, 1071.0) is not None


def test_restore_remembers_only_actions_that_took_the_node_out() -> None:
    key = ["GPU-04", "xid", "0000:1b:00", "79"]
    failed = {"key": key, "detected_at": 1000.0, "acted_at": 1000.5, "action": "evict", "out_of_pool": False,
              "check": "GPU-04", "cause": "gpu3 Xid 79"}
    incidents = Incidents(60.0)
    incidents.restore([failed])
    assert incidents.covered(Action.EVICT, 1001.0) is None  # the eviction failed: the node may be in the pool
    assert incidents.duplicate(tuple(key), 1001.0)  # but the incident is known
    incidents.restore([{**failed, "out_of_pool": True}])
    assert incidents.covered(Action.EVICT, 1001.0) == "node already evicted 0.5 s ago (burnin: GPU-04 gpu3 Xid 79)"
    drained = Incidents(60.0)
    drained.restore([{**failed, "action": "drain", "out_of_pool": True}])
    assert drained.covered(Action.DRAIN, 1001.0) is not None and drained.covered(Action.EVICT, 1001.0) is None


def test_a_lower_action_exactly_a_window_later_keeps_the_higher_one() -> None:
    incidents = Incidents(60.0)
    incidents.acted(_decision(Action.EVICT, "gpu3 Xid 79"), 1000.0)
    incidents.acted(_decision(Action.DRAIN, "gpu3 Xid 74"), 1060.0)
    assert incidents.covered(Action.EVICT, 1060.0) is not None
