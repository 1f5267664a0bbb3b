"""How the pytest phases of one node test become one check outcome (fail closed).

pytest reports a test's setup, call and teardown separately, and has outcomes
(skipped, xfailed, xpassed, an error in a fixture) that are no verdict at all.
Here each phase is judged, and the worst of them is the test's outcome: fail
> incomplete > pass or not-applicable. A skip, an xfail or xpass, an error in
setup or teardown, or a test with no result is ``incomplete``; the report is
rewritten so that JUnit shows it as a failure or error carrying the one-line
cause instead of a skip or a fixture traceback. Only
:func:`burnin.suite.not_applicable`, with its reason, stands in for a verdict.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path

import pytest

from burnin.evaluate.verdict import Unmeasurable
from burnin.gate.decide import FAIL, INCOMPLETE, NOT_APPLICABLE, PASS, CheckOutcome
from burnin.suite import CheckIncomplete, NotApplicable
from burnin.text import printable

RANK = {PASS: 0, NOT_APPLICABLE: 0, INCOMPLETE: 1, FAIL: 2}
REASON_LIMIT = 2000


@dataclasses.dataclass
class ItemResult:
    """The worst status an item's phases reported so far (fail > incomplete > pass, not-applicable)."""

    status: str | None = None
    reason: str = ""

    def add(self, status: str, reason: str) -> None:
        if self.status is None or RANK[status] > RANK[self.status]:
            self.status, self.reason = status, printable(reason, limit=REASON_LIMIT)


def outcome_from_properties(properties: Iterable[tuple[str, object]], *, test: str = "", suite: str = "",
                            duration_s: float = 0.0) -> CheckOutcome | None:
    """The check outcome that a node test's final JUnit properties record (None: not a node test); ``test``,
    ``suite`` and ``duration_s`` as given."""
    props = dict(properties)
    node, check, status = props.get("node"), props.get("check"), props.get("verdict")
    if node is None or check is None:
        return None
    if status not in RANK:
        status = INCOMPLETE
        props["reason"] = f"{check} has no outcome: the test reported no result"
    return CheckOutcome(str(node), str(check), str(status), str(props.get("reason") or ""),
                        str(props.get("measured", "")), str(props.get("expected", "")), test, suite, duration_s)


def test_name(nodeid: str) -> str:
    """``suites/node/test_gpu.py::test_nvlink_links[sim03]`` -> ``test_nvlink_links[sim03]``."""
    return nodeid.rsplit("::", 1)[-1]


def suite_name(path: object) -> str:
    """The suite a test file belongs to: the name of its folder (``suites/node/test_gpu.py`` -> ``node``)."""
    parent = Path(str(path)).parent.name
    return parent or "burnin"


def skip_message(longrepr: object) -> str:
    """The reason of a skip, from pytest's ``(path, line, "Skipped: reason")``."""
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr or "").strip().removeprefix("Skipped: ")


def _crash_line(report: pytest.TestReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return str(crash.message).splitlines()[0] if crash.message else ""
    text = str(report.longrepr or "").strip().splitlines()
    return text[-1] if text else ""


def _as_error(report: pytest.TestReport, reason: str) -> None:
    """Turn a report into a failure (call) or an error (setup, teardown) whose whole text is ``reason``."""
    report.outcome = "failed"
    report.longrepr = reason
    if hasattr(report, "wasxfail"):
        del report.wasxfail


def judge_phase(report: pytest.TestReport, call: pytest.CallInfo[None], check: str,
                 props: dict[str, object]) -> tuple[str, str] | None:
    """This phase's (status, reason), rewriting the report where pytest's own outcome would mislead."""
    exc = call.excinfo.value if call.excinfo is not None else None
    verdict_status, verdict_reason = props.get("verdict"), str(props.get("reason") or "")
    if isinstance(exc, NotApplicable) and report.skipped and verdict_status in (FAIL, INCOMPLETE):
        # the check's own verdict was in before the test stood aside: it stands
        _as_error(report, printable(verdict_reason or f"{check} verdict {verdict_status}", limit=REASON_LIMIT))
        return str(verdict_status), verdict_reason or f"{check} verdict {verdict_status}"
    if isinstance(exc, NotApplicable) and report.skipped and exc.reason.strip():
        reason = printable(f"{check} not applicable: {exc.reason}", limit=REASON_LIMIT)
        path, lineno = (report.longrepr[0], report.longrepr[1]) if isinstance(report.longrepr, tuple) else ("", 0)
        report.longrepr = (path, lineno, reason)
        return NOT_APPLICABLE, reason
    strict_xpass = isinstance(report.longrepr, str) and report.longrepr.startswith("[XPASS(strict)]")
    if hasattr(report, "wasxfail") or strict_xpass:
        what = "xpassed" if report.passed or strict_xpass else "xfailed"
        why = str(getattr(report, "wasxfail", "") or report.longrepr).removeprefix("[XPASS(strict)]")
        why = why.strip().removeprefix("reason: ")
        reason = f"{check} xfail is not a verdict ({what}{': ' + why if why else ''})"
        _as_error(report, printable(reason, limit=REASON_LIMIT))
        return INCOMPLETE, reason
    if report.skipped:
        reason = (f"{check} skipped: {skip_message(report.longrepr)} "
                  "(a skip is not a verdict; a check that does not apply calls burnin.suite.not_applicable)")
        _as_error(report, printable(reason, limit=REASON_LIMIT))
        return INCOMPLETE, reason
    if isinstance(exc, Unmeasurable | CheckIncomplete):
        cause = exc.reason if isinstance(exc, Unmeasurable) else str(exc)
        reason = verdict_reason if verdict_status == INCOMPLETE and verdict_reason else \
            f"{check} could not be measured: {cause}"
        report.longrepr = printable(reason, limit=REASON_LIMIT)
        return INCOMPLETE, reason
    if report.failed:
        if report.when == "call":
            reason = verdict_reason if verdict_status == FAIL and verdict_reason else f"{check} {_crash_line(report)}"
            if isinstance(report.longrepr, str):
                report.longrepr = printable(report.longrepr, keep_newlines=True)
            return FAIL, reason
        return INCOMPLETE, f"{check} error in {report.when}: {_crash_line(report)}"
    if report.when == "call":
        if verdict_status in (FAIL, INCOMPLETE):  # the test passed over its own check's verdict
            reason = verdict_reason or f"{check} verdict {verdict_status}"
            _as_error(report, printable(reason, limit=REASON_LIMIT))
            return str(verdict_status), reason
        return PASS, verdict_reason
    return None


def set_property(props: list[tuple[str, object]], name: str, value: object) -> None:
    """Replace the first property ``name`` in place, or add it (JUnit shows each name once)."""
    for index, (key, _) in enumerate(props):
        if key == name:
            props[index] = (name, value)
            return
    props.append((name, value))
