"""What the sweep knows of each node, which nodes it starts next, and what each node's sweep came to. Pure.

A node is *tested* when its own job ran the collector to the end and the node suite judged what it gathered
(then ``admitted`` or ``rejected``, as ``burnin run`` decides). Every other node is *not tested*, never
admitted, and says why: ``preempted`` (its job gave way to another job; it is tried again when idle),
``ended`` (its job ended some other way: cancelled, timed out, its node failed, the window closed),
``down`` (Slurm runs no job there: drained, down, not responding) or ``busy`` (never idle while the window
was open, or taken again before its job could start).

With fabric groups (``--fabric-group N``) a node the node suite admitted in this sweep also waits for a *group*:
one job over at least N such nodes idle together, which runs the fabric suite's multi-node checks across them.
Its fabric part is ``passed``, ``failed`` (a check named this node: it is rejected), ``incomplete`` (measured
nothing this node can be blamed or cleared for: never admitted by the fabric, never drained for it),
``preempted`` (its group gave way to another job: tried again), ``ended`` (its group ended otherwise), or
``pending`` (no group yet; ``ungrouped`` once none can form).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from burnin.sweep.slurm_state import idle
from burnin.transport.slurm_jobs import SlurmNode

Status = Literal["admitted", "rejected", "preempted", "ended", "down", "busy"]
FabricStatus = Literal["pending", "passed", "failed", "incomplete", "preempted", "ended", "ungrouped"]
FABRIC_SETTLED: tuple[FabricStatus, ...] = ("passed", "failed", "incomplete", "ended", "ungrouped")
TESTED: tuple[Status, ...] = ("admitted", "rejected")
NOT_TESTED: tuple[Status, ...] = ("busy", "preempted", "down", "ended")


@dataclass(frozen=True, slots=True)
class Attempt:
    """One job of a node: its id (None: never granted) and how it ended."""

    job_id: str | None
    end: str
    """``tested``, ``preempted``, ``not started: ...``, ``ended: <Slurm state>``."""


@dataclass
class NodeRecord:
    """One node of the sweep."""

    node: str
    status: Status = "busy"
    why: str = "never idle while the window was open"
    attempts: list[Attempt] = field(default_factory=list)
    reasons: tuple[str, ...] = ()
    """A rejected node's reasons (gate.json's)."""
    fabric: FabricStatus = "pending"
    fabric_why: str = "no group of idle nodes formed yet"
    fabric_reasons: tuple[str, ...] = ()
    fabric_groups: list[Attempt] = field(default_factory=list)
    """The group jobs this node was in, and how each ended."""
    fabric_results: str | None = None
    """The folder of the group whose verdicts count for this node."""

    @property
    def awaits_group(self) -> bool:
        """Admitted by the node suite in this sweep and its fabric part still to measure (or preempted)."""
        return self.status == "admitted" and self.fabric in ("pending", "preempted")

    @property
    def settled(self) -> bool:
        """Nothing more is tried on this node: tested, or its job ended in a way that is not retried."""
        return self.status in (*TESTED, "ended")

    @property
    def preemptions(self) -> int:
        return sum(1 for attempt in self.attempts if attempt.end == "preempted")

    def saw(self, info: SlurmNode | None, error: str | None = None) -> None:
        """What Slurm says of the node now (for a node not yet tested and not running a job of the sweep)."""
        if self.settled or self.status == "preempted":
            return  # a preemption says more than whatever the node is doing since
        if info is None:
            self.status, self.why = "down", f"Slurm cannot say ({error or 'not a node of this cluster'})"
        elif not info.schedulable:
            self.status = "down"
            self.why = f"State={info.state}" + (f", Reason={info.reason!r}" if info.reason else "")
        elif not idle(info):
            self.status, self.why = "busy", f"never idle while the window was open (last seen {info.state})"


def limit(share: float, partition_nodes: int) -> int:
    """Jobs of the sweep at once: ``share`` of the partition's nodes, rounded down, one at least."""
    return max(1, math.floor(share * partition_nodes + 1e-9))


def pick(order: Sequence[str], records: Mapping[str, NodeRecord], current: Mapping[str, SlurmNode],
         running: Sequence[str], at_once: int) -> list[str]:
    """The nodes to start a job on now: untested, not running one, idle now, in ``order``, up to ``at_once``
    jobs of the sweep in all."""
    room = at_once - len(running)
    chosen: list[str] = []
    for node in order:
        if room <= len(chosen):
            break
        info = current.get(node)
        if node in running or records[node].settled or info is None or not idle(info):
            continue
        chosen.append(node)
    return chosen


def pick_group(order: Sequence[str], records: Mapping[str, NodeRecord], current: Mapping[str, SlurmNode],
               running: Sequence[str], at_once: int, size: int) -> list[str]:
    """The nodes of a fabric group to start now: every node the node suite admitted in this sweep whose fabric
    part is still to measure, idle now and in no job of the sweep, in ``order``, up to the room left under
    ``at_once``; none unless at least ``size`` (2 at least) are there together."""
    room = at_once - len(running)
    found = [node for node in order if records[node].awaits_group and node not in running
             and (info := current.get(node)) is not None and idle(info)][:max(0, room)]
    return found if size >= 2 and len(found) >= size else []


def groups_possible(records: Mapping[str, NodeRecord], size: int) -> bool:
    """Whether a group of ``size`` can still form: the nodes awaiting one and those whose node suite has not
    judged them yet (they may still be admitted) are ``size`` at least."""
    could = [r for r in records.values() if r.awaits_group or not r.settled]
    return size >= 2 and len(could) >= size


def counts(records: Mapping[str, NodeRecord]) -> dict[str, list[str]]:
    """Nodes by status, every status present (empty lists too)."""
    by: dict[str, list[str]] = {status: [] for status in (*TESTED, *NOT_TESTED)}
    for node, record in records.items():
        by[record.status].append(node)
    return by


def fabric_counts(records: Mapping[str, NodeRecord]) -> dict[str, list[str]]:
    """Nodes by the fabric part's status (every status present); a node the node suite did not admit has none."""
    by: dict[str, list[str]] = {status: [] for status in
                                ("passed", "failed", "incomplete", "preempted", "ended", "ungrouped", "pending")}
    for node, record in records.items():
        if record.status == "admitted" or record.fabric != "pending":
            by[record.fabric].append(node)
    return by
