"""Fatal events the breaker held, asked again once the budget frees up (``burnin breaker retry``, docs/breaker.md).

A drain the watch wanted for a fatal event (an Xid, a lost GPU) and the breaker held is a fact about the node
that no later run re-measures: the kernel line is gone from the watch's view once read. So each such hold
(``by: watch`` in ``breaker-held.jsonl``, within ``since`` seconds) is asked again, through the gate's own drain
(the breaker's budget, an operator's drain never overwritten, a node drained since left as it is). A run's
holds (``by: gate``) are not: the next run judges those nodes again, and a node it admits is innocent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

FATAL_BY = "watch"


@dataclass(frozen=True, slots=True)
class Pending:
    """A node whose fatal event's drain the breaker held: the reason it would have set, and when."""

    node: str
    reason: str
    at: float


def pending(held: Sequence[Mapping[str, Any]]) -> list[Pending]:
    """The watch's held drains (not record mode), the latest per node, oldest first (pure)."""
    latest: dict[str, Pending] = {}
    for entry in held:
        node, reason, at = entry.get("node"), entry.get("reason"), entry.get("at")
        if entry.get("by") != FATAL_BY or entry.get("mode", "held") != "held":
            continue
        if not isinstance(node, str) or not isinstance(reason, str) or not reason or not isinstance(at, int | float):
            continue
        if node not in latest or latest[node].at <= at:
            latest[node] = Pending(node, reason, float(at))
    return sorted(latest.values(), key=lambda p: (p.at, p.node))
