"""Slurm's node events (``sacctmgr show event``, from its accounting) folded into ``burnin reliability``.

Each node event whose state takes the node out of the pool (down, drained, failing) is a failure of the node from
its start to its end (open: still out), with its reason:

- a burnin reason (``burnin: GPU-04,IB-02 <cause>``) is a failure of its first check: the category is the check's
  (:func:`burnin.history.reliability.category`);
- any other reason is the site's or slurmctld's: slurmctld's own reasons about the host (``Not responding``,
  ``Node unexpectedly rebooted``, ``Kill task failed``...) are ``host``, anything else (an operator's
  ``fan replaced``) is ``other``.

A drain burnin took and recorded itself (a gate action in the history: same node, a start within
:data:`MATCH_WINDOW_S` of the recorded action, the same reason or the same check ids) is not counted a second
time: only its end (when Slurm saw the node back) is folded in, which the history may not know when an operator
resumed the node. The folding (:func:`fold_events`) is pure; ``burnin reliability`` reads the events
(:mod:`burnin.cli.slurm_events`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from burnin.history.records import Observation
from burnin.parsers.sacctmgr import SlurmEvent
from burnin.reasons import reason_checks
from burnin.text import printable

MATCH_WINDOW_S = 300.0
"""A Slurm event starting this close to a drain burnin recorded on the node, with its reason, is that drain."""
SLURM_HOST = "SLURM-host"
"""The failed 'check' of an event slurmctld set about the node's host (category host)."""
SLURM_OTHER = "SLURM-other"
"""The failed 'check' of an event with a reason that is neither burnin's nor slurmctld's (category other)."""
HOST_REASONS = ("Not responding", "Node unexpectedly rebooted", "Kill task failed", "Prolog error", "Epilog error",
                "Low RealMemory", "Low socket*core*thread count", "Low TmpDisk", "NO NETWORK ADDRESS FOUND",
                "batch job complete failure", "Duplicate jobid", "Node silently failed and came back",
                "reboot timed out")
OUT_OF_POOL_STATES = frozenset({"DOWN", "DRAIN", "DRAINED", "DRAINING", "FAIL", "FAILING"})


@dataclass(frozen=True)
class RecordedDrain:
    """A drain (eviction, taint) burnin recorded in the history as a gate action."""

    node: str
    at: float
    check_ids: tuple[str, ...]
    reason: str


@dataclass
class Folded:
    observations: list[Observation] = field(default_factory=list)
    read: int = 0
    """Node events sacctmgr gave."""
    folded: int = 0
    """Counted as failures."""
    known: int = 0
    """Drains burnin had recorded itself (only their end folded in)."""
    ignored: int = 0
    """Events of a state that does not take a node out of the pool, or that started before the period."""


def out_of_pool(state: str) -> bool:
    """Whether a node event's state (``DRAIN``, ``IDLE+DRAIN``, ``DOWN*``) takes the node out of the pool."""
    return any(word.rstrip("*~#!%$@^-") in OUT_OF_POOL_STATES for word in state.split("+"))


def failed_checks(reason: str) -> tuple[str, ...]:
    """What an event failed: the check ids of a burnin reason, else :data:`SLURM_HOST` or :data:`SLURM_OTHER`."""
    ids = [c for c in reason_checks(reason) or () if c != "RUN"]
    if ids:
        return tuple(ids)
    return (SLURM_HOST,) if reason.strip().startswith(HOST_REASONS) else (SLURM_OTHER,)


def _is_recorded(event: SlurmEvent, start: float, drains: Sequence[RecordedDrain]) -> bool:
    ids = reason_checks(event.reason)
    for drain in drains:
        if drain.node != event.node or abs(drain.at - start) > MATCH_WINDOW_S:
            continue
        if drain.reason == event.reason or (ids is not None and set(ids) == set(drain.check_ids)):
            return True
    return False


def fold_events(events: Iterable[SlurmEvent], drains: Sequence[RecordedDrain], since: float) -> Folded:
    """The observations Slurm's node events add (pure; see the module's docstring)."""
    folded = Folded()
    by_node: dict[str, list[RecordedDrain]] = {}
    for drain in drains:
        by_node.setdefault(drain.node, []).append(drain)
    for event in events:
        if event.kind != "Node":
            continue
        folded.read += 1
        start = event.start.timestamp()
        end = None if event.end is None else event.end.timestamp()
        if not out_of_pool(event.state) or start < since:
            folded.ignored += 1
            if end is not None and start < since <= end and out_of_pool(event.state):
                folded.observations.append(_back(event, end))
            continue
        reason = printable(event.reason, limit=2000)
        if _is_recorded(event, start, by_node.get(event.node, [])):
            folded.known += 1
        else:
            folded.folded += 1
            folded.observations.append(Observation(event.node, start, False, failed_checks(event.reason), (),
                                                   reason, "sacctmgr", "slurm"))
        if end is not None:
            folded.observations.append(_back(event, end))
    return folded


def _back(event: SlurmEvent, end: float) -> Observation:
    return Observation(event.node, end, True, (), (), "", "sacctmgr", "slurm")
