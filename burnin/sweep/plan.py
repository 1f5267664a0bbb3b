"""What the sweep knows of each node, which nodes it starts next, and what each node's sweep came to. Pure.

A node is *tested* when its own job ran the collector to the end and the node suite judged what it gathered
(then ``admitted`` or ``rejected``, as ``burnin run`` decides). Every other node is *not tested*, never
admitted, and says why: ``preempted`` (its job gave way to another job; it is tried again when idle),
``ended`` (its job ended some other way: cancelled, timed out, its node failed, the window closed),
``down`` (Slurm runs no job there: drained, down, not responding) or ``busy`` (never idle while the window
was open, or taken again before its job could start).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from burnin.sweep.slurm_state import idle
from burnin.transport.slurm_jobs import SlurmNode

Status = Literal["admitted", "rejected", "preempted", "ended", "down", "busy"]
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


def counts(records: Mapping[str, NodeRecord]) -> dict[str, list[str]]:
    """Nodes by status, every status present (empty lists too)."""
    by: dict[str, list[str]] = {status: [] for status in (*TESTED, *NOT_TESTED)}
    for node, record in records.items():
        by[record.status].append(node)
    return by
