"""Admit a node only when every check passed; anything else rejects it (fail closed).

A check outcome is ``pass``, ``fail``, ``incomplete`` or ``not-applicable``
(an explicit decision, with its reason, that the check does not apply to the
node). Any other status, or a not-applicable without a reason, counts as
``incomplete``. A run that did not judge every check of its suites (partial,
interrupted) admits nobody: :func:`hold_all`.

A decision also carries the checks it judged and passed (``passed``): a gate
puts a node back into the pool only for the checks named in the reason it was
taken out with (``burnin: IB-01,GPU-10 <cause>``, :func:`reason_checks`) that
this decision judged and passed (:func:`unjudged`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from burnin.evaluate.verdict import Status
from burnin.nodes import fold
from burnin.reasons import CHECK_ID, DRAIN_PREFIX, RUN_CHECK, reason_checks
from burnin.text import printable

# The outcome strings are the one vocabulary's values (burnin.evaluate.verdict.Status).
PASS: str = Status.PASS.value
FAIL: str = Status.FAIL.value
INCOMPLETE: str = Status.INCOMPLETE.value
NOT_APPLICABLE: str = Status.NOT_APPLICABLE.value
VENDOR_MARK = "sent to vendor"
"""What follows the check ids in the reason of a node the repair ladder sent to the vendor (docs/repair.md):
no gate, probe or watch changes that reason or resumes the node; an operator returns it."""
IDS_BUDGET = 100  # a longer list of check ids is written with ranges (GPU-01..06) in a reason


@dataclass(frozen=True, slots=True)
class CheckOutcome:
    node: str
    check: str
    status: str  # pass | fail | incomplete | not-applicable
    reason: str = ""
    measured: str = ""
    expected: str = ""
    test: str = ""  # the test's name, e.g. test_nvlink_links[sim03]
    suite: str = ""  # the suite folder it came from, e.g. node
    duration_s: float = 0.0


@dataclass(frozen=True, slots=True)
class NodeDecision:
    node: str
    admitted: bool
    failed: tuple[str, ...] = ()
    incomplete: tuple[str, ...] = ()
    reasons: tuple[str, ...] = field(default=())
    # check id -> why it does not apply to this node (stands in for a verdict)
    not_applicable: tuple[tuple[str, str], ...] = ()
    # the checks this decision judged and every outcome of which passed: all a gate may resume a node for
    passed: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "admitted": self.admitted,
            "failed": list(self.failed),
            "incomplete": list(self.incomplete),
            "reasons": [printable(r) for r in self.reasons],
        }
        if self.not_applicable:
            doc["not_applicable"] = {check: printable(reason) for check, reason in self.not_applicable}
        return doc

    def short_reason(self, limit: int = 200, *, carry: Iterable[str] = ()) -> str:
        """``<check ids> <first cause>``, for a Slurm drain reason; ``carry``: ids of an earlier reason
        that still hold the node (named after this decision's own)."""
        ids = check_ids_text((*self.failed, *self.incomplete, *carry))
        cause = self.reasons[0] if self.reasons else ""
        first_id = (self.failed or self.incomplete or ("",))[0]
        if cause.startswith(first_id):
            cause = cause[len(first_id):].strip()
        text = f"{ids} {cause}".strip()
        return text if len(text) <= limit else text[: limit - 3] + "..."


def check_ids_text(ids: Iterable[str]) -> str:
    """Check ids for a reason, comma-separated, each once; a list longer than :data:`IDS_BUDGET` is
    written by family with ranges (``GPU-01,GPU-03..08,IB-01..06``), so that it stays whole in a reason."""
    unique = list(dict.fromkeys(ids))
    plain = ",".join(unique)
    if len(plain) <= IDS_BUDGET:
        return plain
    numbered: dict[str, list[tuple[int, str]]] = {}
    others: list[str] = []
    for check in unique:
        match = CHECK_ID.match(check)
        if match is None:
            others.append(check)
        else:
            numbered.setdefault(match.group(1), []).append((int(match.group(2)), match.group(2)))
    parts: list[str] = []
    for family, numbers in numbered.items():
        numbers.sort()
        run = [numbers[0]]
        for number in [*numbers[1:], None]:
            if number is not None and number[0] == run[-1][0] + 1 and len(number[1]) == len(run[-1][1]):
                run.append(number)
                continue
            first, last = run[0][1], run[-1][1]
            parts.append(f"{family}-{first}" if len(run) == 1 else f"{family}-{first}..{last}")
            if number is not None:
                run = [number]
    return ",".join([*parts, *others])


def sent_to_vendor(reason: str) -> bool:
    """Whether a reason is burnin's 'sent to vendor' (``burnin: GPU-04 sent to vendor: <bundle>``)."""
    words = reason[len(DRAIN_PREFIX):].split(maxsplit=1) if reason.startswith(DRAIN_PREFIX) else []
    return len(words) == 2 and words[1].startswith(f"{VENDOR_MARK}:")


def unjudged(reason: str, passed: Collection[str]) -> tuple[str, ...] | None:
    """The checks of a burnin reason that are not among ``passed`` (what still holds the node); None when
    its ids cannot be read. ``RUN`` (the run could not vouch for the node) is cleared by any admission."""
    ids = reason_checks(reason)
    if ids is None:
        return None
    return tuple(c for c in ids if c != RUN_CHECK and c not in passed)


def effective_status(outcome: CheckOutcome) -> str:
    """The status the gate acts on: anything but a known verdict, or a reasonless N/A, is incomplete."""
    if outcome.status in (PASS, FAIL, INCOMPLETE):
        return outcome.status
    if outcome.status == NOT_APPLICABLE and outcome.reason.strip():
        return NOT_APPLICABLE
    return INCOMPLETE


def _reason(outcome: CheckOutcome, status: str) -> str:
    if outcome.reason.strip():
        return outcome.reason
    if status == INCOMPLETE and outcome.status != INCOMPLETE:
        return f"{outcome.check} has no verdict (status {outcome.status!r}, no reason)"
    return f"{outcome.check} {status}"


def decide(nodes: Iterable[str], outcomes: Iterable[CheckOutcome]) -> dict[str, NodeDecision]:
    """One decision per node; a node with no outcome at all is rejected as incomplete."""
    by_node: dict[str, list[CheckOutcome]] = {n: [] for n in nodes}
    for outcome in outcomes:
        by_node.setdefault(outcome.node, []).append(outcome)
    decisions: dict[str, NodeDecision] = {}
    for node, results in by_node.items():
        if not results:
            decisions[node] = NodeDecision(node, False, (), (RUN_CHECK,), (f"{RUN_CHECK} no check ran on this node",))
            continue
        judged = [(o, effective_status(o)) for o in results]
        failed = [(o, s) for o, s in judged if s == FAIL]
        incomplete = [(o, s) for o, s in judged if s == INCOMPLETE]
        stand_aside = [o for o, s in judged if s == NOT_APPLICABLE]
        held = {o.check for o, s in judged if s != PASS}
        decisions[node] = NodeDecision(
            node,
            admitted=not failed and not incomplete,
            failed=tuple(dict.fromkeys(o.check for o, _ in failed)),
            incomplete=tuple(dict.fromkeys(o.check for o, _ in incomplete)),
            # one line per cause: a check judged in two suites of the run (STO-02) says it once
            reasons=tuple(dict.fromkeys(_reason(o, s) for o, s in (*failed, *incomplete))),
            not_applicable=tuple((o.check, o.reason) for o in stand_aside),
            passed=tuple(dict.fromkeys(o.check for o, s in judged if s == PASS and o.check not in held)),
        )
    return dict(sorted(decisions.items()))


def passed_checks(verdicts: Iterable[Mapping[str, Any]]) -> dict[str, tuple[str, ...]]:
    """Per node, the checks every verdict of which passed (``verdicts.json`` rows: node, check, status)."""
    outcomes = [CheckOutcome(str(v.get("node", "")), str(v.get("check", "")), str(v.get("status", "")),
                             str(v.get("reason", ""))) for v in verdicts]
    return {node: d.passed for node, d in decide((), outcomes).items()}


def hold_all(decisions: Mapping[str, NodeDecision], reason: str) -> dict[str, NodeDecision]:
    """Every node not admitted, with ``RUN <reason>`` added: the run cannot vouch for anyone."""
    line = f"{RUN_CHECK} {reason}"
    return {
        node: replace(
            d,
            admitted=False,
            incomplete=d.incomplete if RUN_CHECK in d.incomplete else (*d.incomplete, RUN_CHECK),
            reasons=(*d.reasons, line),
        )
        for node, d in decisions.items()
    }


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
