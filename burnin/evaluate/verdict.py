"""Verdicts: pass, fail, or incomplete, each with measured, expected and a reason."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field


class Status(str, enum.Enum):
    """The one status vocabulary of verdicts, check outcomes and the gate (its values are gate.json's strings).

    A check judges pass, fail or incomplete; ``NOT_APPLICABLE`` is the topology's
    explicit decision, with its reason, that a check does not apply to a node.
    """

    PASS = "pass"  # noqa: S105 - a verdict, not a password
    FAIL = "fail"
    INCOMPLETE = "incomplete"
    NOT_APPLICABLE = "not-applicable"


class Unmeasurable(Exception):
    """A value could not be measured (source failed, tool missing, output unreadable)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


@dataclass(frozen=True, slots=True)
class Finding:
    """One subject's result inside a check (a GPU, an HCA, a PCIe port...)."""

    subject: str
    status: Status
    measured: str
    expected: str
    note: str = ""

    def __reduce__(self) -> tuple[type[Finding], tuple[str, Status, str, str, str]]:
        # pickled as a call of the class: a third of the time of the frozen dataclass's own state
        # (judging workers send every node's verdicts back: bench/judge)
        return Finding, (self.subject, self.status, self.measured, self.expected, self.note)


@dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome of one check on one node."""

    check_id: str
    node: str
    status: Status
    measured: str
    expected: str
    reason: str
    findings: tuple[Finding, ...] = field(default=())

    def __reduce__(self) -> tuple[type[Verdict], tuple[str, str, Status, str, str, str, tuple[Finding, ...]]]:
        return Verdict, (self.check_id, self.node, self.status, self.measured, self.expected, self.reason,
                         self.findings)

    @property
    def passed(self) -> bool:
        return self.status is Status.PASS

    def to_json(self) -> dict[str, object]:
        return {
            "check": self.check_id,
            "node": self.node,
            "status": self.status.value,
            "measured": self.measured,
            "expected": self.expected,
            "reason": self.reason,
        }


def ok(subject: str, measured: str, expected: str) -> Finding:
    """A subject measured and within what is expected."""
    return Finding(subject, Status.PASS, measured, expected)


def bad(subject: str, measured: str, expected: str) -> Finding:
    """A subject measured and outside what is expected."""
    return Finding(subject, Status.FAIL, measured, expected)


def unknown(subject: str, note: str, expected: str = "") -> Finding:
    """A subject not measured, and why (``note``)."""
    return Finding(subject, Status.INCOMPLETE, "not measured", expected, note)


def judge(subject: str, measured: bool, text: str, expected: str) -> Finding:
    """:func:`ok` when ``measured`` holds, else :func:`bad`."""
    return ok(subject, text, expected) if measured else bad(subject, text, expected)


def _join(items: Iterable[str], limit: int = 4) -> str:
    items = list(items)
    shown = "; ".join(items[:limit])
    if len(items) > limit:
        shown += f"; +{len(items) - limit} more"
    return shown


def _label(finding: Finding) -> str:
    return finding.measured if finding.subject == "node" else f"{finding.subject} {finding.measured}"


def roll_up(check_id: str, node: str, findings: list[Finding], *, expected: str,
            healthy: str = "") -> Verdict:
    """Combine per-subject findings into the node's verdict for one check.

    Any failing subject fails the check (even if others could not be measured:
    a known fault is the more useful statement); otherwise any unmeasured
    subject makes it incomplete; otherwise it passes.
    """
    failed = [f for f in findings if f.status is Status.FAIL]
    missing = [f for f in findings if f.status is Status.INCOMPLETE]
    if failed:
        measured = _join(_label(f) for f in failed)
        reason = f"{check_id} {measured} (expected {expected})"
        if missing:
            not_measured = _join((f"{f.subject} {f.note}" for f in missing), 2)
            reason += f"; not measured: {not_measured}"
        return Verdict(check_id, node, Status.FAIL, measured, expected, reason, tuple(findings))
    if missing:
        note = _join(f"{f.subject}: {f.note}" for f in missing)
        return Verdict(check_id, node, Status.INCOMPLETE, "not measured", expected,
                       f"{check_id} could not be measured: {note}", tuple(findings))
    if not findings:
        return Verdict(check_id, node, Status.INCOMPLETE, "nothing measured", expected,
                       f"{check_id} found nothing to measure", ())
    measured = healthy or _join(sorted({f.measured for f in findings}))
    return Verdict(check_id, node, Status.PASS, measured, expected,
                   f"{check_id} ok: {measured}", tuple(findings))


def incomplete(check_id: str, node: str, reason: str, expected: str = "") -> Verdict:
    return Verdict(check_id, node, Status.INCOMPLETE, "not measured", expected,
                   f"{check_id} could not be measured: {reason}")
