"""Admit a node only when every check passed; anything else rejects it (fail closed)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from burnin.nodes import fold


@dataclass(frozen=True, slots=True)
class CheckOutcome:
    node: str
    check: str
    status: str  # pass | fail | incomplete
    reason: str = ""
    measured: str = ""
    expected: str = ""


@dataclass(frozen=True, slots=True)
class NodeDecision:
    node: str
    admitted: bool
    failed: tuple[str, ...] = ()
    incomplete: tuple[str, ...] = ()
    reasons: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {
            "admitted": self.admitted,
            "failed": list(self.failed),
            "incomplete": list(self.incomplete),
            "reasons": list(self.reasons),
        }

    def short_reason(self, limit: int = 200) -> str:
        """``<check ids> <first cause>``, for a Slurm drain reason."""
        ids = ",".join((*self.failed, *self.incomplete))
        cause = self.reasons[0] if self.reasons else ""
        first_id = (self.failed or self.incomplete or ("",))[0]
        if cause.startswith(first_id):
            cause = cause[len(first_id):].strip()
        text = f"{ids} {cause}".strip()
        return text if len(text) <= limit else text[: limit - 3] + "..."


def decide(nodes: Iterable[str], outcomes: Iterable[CheckOutcome]) -> dict[str, NodeDecision]:
    """One decision per node; a node with no outcome at all is rejected as incomplete."""
    by_node: dict[str, list[CheckOutcome]] = {n: [] for n in nodes}
    for outcome in outcomes:
        by_node.setdefault(outcome.node, []).append(outcome)
    decisions: dict[str, NodeDecision] = {}
    for node, results in by_node.items():
        failed = [o for o in results if o.status == "fail"]
        incomplete = [o for o in results if o.status == "incomplete"]
        reasons = [o.reason for o in (*failed, *incomplete)]
        if not results:
            decisions[node] = NodeDecision(node, False, (), ("RUN",), ("RUN no check ran on this node",))
            continue
        decisions[node] = NodeDecision(
            node,
            admitted=not failed and not incomplete,
            failed=tuple(dict.fromkeys(o.check for o in failed)),
            incomplete=tuple(dict.fromkeys(o.check for o in incomplete)),
            reasons=tuple(reasons),
        )
    return dict(sorted(decisions.items()))


def gate_document(decisions: Mapping[str, NodeDecision], **meta: Any) -> dict[str, Any]:
    """The ``gate.json`` contract (DESIGN.md)."""
    admitted = [n for n, d in decisions.items() if d.admitted]
    rejected = [n for n, d in decisions.items() if not d.admitted]
    return {
        **meta,
        "nodes": {n: d.to_json() for n, d in decisions.items()},
        "admitted": fold(admitted),
        "rejected": fold(rejected),
        "summary": {"nodes": len(decisions), "admitted": len(admitted), "rejected": len(rejected)},
    }
