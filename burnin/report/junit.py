"""``junit.xml`` that CI servers accept: valid against the Jenkins xunit plugin's junit-10.xsd.

One test case per node and check. The names are chosen for the two readers
that matter:

- Jenkins splits ``classname`` at its last dot into package and class:
  ``burnin.node.GPU-10`` shows as class ``GPU-10`` in package ``burnin.node``;
- GitLab shows ``classname`` as the suite column and ``name`` as the test:
  ``test_nvlink_links[sim03]`` carries the node.

The schema allows no ``<properties>`` inside a test case, so each case carries
its node, check, measured, expected and verdict as ``key: value`` lines in
``<system-out>`` (what both servers show next to a test), and a failure's or
error's ``message`` is the one-line measured-vs-expected reason. A skip (not
applicable) carries its reason as element text as well as ``message``: GitLab
shows only element text. Every case says what was expected: a verdict that
left ``expected`` empty (a check not measured on that node) takes what the
run's other verdicts of the check expected, else what the caller's
``defaults`` say (:func:`burnin.report.catalog.expectations`: the
topology's thresholds of the check). Run metadata goes in each suite's
``<properties>``, which the schema allows.

Pure apart from :func:`write_junit`; everything a node printed is escaped
with :func:`burnin.text.printable` (XML 1.0 cannot carry most control bytes).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from burnin.atomic import write_text_atomic
from burnin.text import printable

CASE_FIELDS = ("node", "check", "measured", "expected", "verdict")
# GitLab refuses JUnit files above 30 MB; stay well below it per file.
MAX_FILE_BYTES = 25 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Case:
    """One check on one node, as the JUnit writer needs it."""

    suite: str
    test: str
    node: str
    check: str
    status: str  # pass | fail | incomplete | not-applicable
    reason: str = ""
    measured: str = ""
    expected: str = ""
    duration_s: float = 0.0

    @classmethod
    def from_outcome(cls, outcome: Mapping[str, object]) -> Case:
        node, check = str(outcome["node"]), str(outcome["check"])
        return cls(
            suite=str(outcome.get("suite") or "burnin"),
            test=str(outcome.get("test") or f"{check}[{node}]"),
            node=node, check=check, status=str(outcome["status"]),
            reason=str(outcome.get("reason") or ""), measured=str(outcome.get("measured") or ""),
            expected=str(outcome.get("expected") or ""),
            duration_s=float(str(outcome.get("duration_s") or 0.0)),
        )


def _time(seconds: float) -> str:
    # junit-10.xsd's SUREFIRE_TIME: digits, at most three decimals, no exponent.
    return f"{max(0.0, seconds):.3f}"


def _clean(text: str, limit: int = 2000) -> str:
    return printable(text, keep_newlines=True, limit=limit)


def _case_element(case: Case) -> ET.Element:
    element = ET.Element("testcase", {
        "classname": _clean(f"burnin.{case.suite}.{case.check}", 300),
        "name": _clean(case.test, 300),
        "time": _time(case.duration_s),
    })
    verdict = case.status
    message = _clean(case.reason.splitlines()[0] if case.reason else f"{case.check} {verdict}", 1000)
    if verdict == "fail":
        ET.SubElement(element, "failure", {"type": case.check, "message": message}).text = message
    elif verdict == "incomplete":
        ET.SubElement(element, "error", {"type": "incomplete", "message": message}).text = message
    elif verdict == "not-applicable":
        ET.SubElement(element, "skipped", {"type": "not-applicable", "message": message}).text = message
    lines = [f"{key}: {_clean(value, 500)}" for key, value in
             zip(CASE_FIELDS, (case.node, case.check, case.measured, case.expected, verdict), strict=True)]
    ET.SubElement(element, "system-out").text = "\n".join(lines)
    return element


def _suite_element(name: str, cases: list[Case], meta: Mapping[str, str], timestamp: str) -> ET.Element:
    counts = {s: sum(1 for c in cases if c.status == s) for s in ("fail", "incomplete", "not-applicable")}
    suite = ET.Element("testsuite", {
        "name": _clean(f"burnin.{name}", 200), "tests": str(len(cases)), "failures": str(counts["fail"]),
        "errors": str(counts["incomplete"]), "skipped": str(counts["not-applicable"]),
        "time": _time(sum(c.duration_s for c in cases)), "timestamp": timestamp,
    })
    if meta:
        props = ET.SubElement(suite, "properties")
        for key, value in meta.items():
            ET.SubElement(props, "property", {"name": key, "value": _clean(value, 500)})
    for case in cases:
        suite.append(_case_element(case))
    return suite


def run_expectations(cases: Iterable[Case]) -> dict[str, str]:
    """Check id -> what the run's verdicts of that check expected most often (those that said)."""
    said: dict[str, Counter[str]] = defaultdict(Counter)
    for case in cases:
        if case.expected.strip():
            said[case.check][case.expected] += 1
    return {check: counts.most_common(1)[0][0] for check, counts in said.items()}


def with_expectations(cases: Iterable[Case], defaults: Mapping[str, str] | None = None) -> list[Case]:
    """``cases`` with every empty ``expected`` filled: from the run's other verdicts of the check, else
    ``defaults``; a check neither knows keeps it empty."""
    cases = list(cases)
    known = {**(defaults or {}), **run_expectations(cases)}
    return [case if case.expected.strip() or case.check not in known else replace(case, expected=known[case.check])
            for case in cases]


def render_junit(cases: Iterable[Case], *, meta: Mapping[str, str] | None = None,
                 timestamp: str = "", defaults: Mapping[str, str] | None = None) -> bytes:
    """The whole document: one ``<testsuite>`` per burnin suite under ``<testsuites>``.

    ``defaults``: check id -> what it expects, for a case whose verdict left ``expected`` empty
    and whose check no other verdict of the run says it for."""
    by_suite: dict[str, list[Case]] = {}
    for case in with_expectations(cases, defaults):
        by_suite.setdefault(case.suite, []).append(case)
    root = ET.Element("testsuites", {"name": "burnin"})
    totals = {"tests": 0, "failures": 0, "errors": 0}
    for name in sorted(by_suite):
        suite = _suite_element(name, by_suite[name], meta or {}, timestamp)
        root.append(suite)
        for key in totals:
            totals[key] += int(suite.get(key, "0"))
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("time", _time(sum(c.duration_s for group in by_suite.values() for c in group)))
    return bytes(ET.tostring(root, encoding="utf-8", xml_declaration=True))


def write_junit(path: Path, cases: Iterable[Case], *, meta: Mapping[str, str] | None = None,
                timestamp: str = "") -> list[Path]:
    """Write ``path`` atomically; above :data:`MAX_FILE_BYTES`, one file per suite beside it.

    A case whose ``expected`` no verdict of the run says takes the thresholds that the topology
    named in ``meta`` sets for its check (:func:`burnin.report.catalog.expectations`).
    Returns the files written (``junit.xml``, or ``junit-<suite>.xml`` each).
    """
    cases = with_expectations(cases)
    if any(not case.expected.strip() for case in cases):
        from burnin.report.catalog import expectations

        cases = with_expectations(cases, expectations((meta or {}).get("topology")))
    document = render_junit(cases, meta=meta, timestamp=timestamp)
    if len(document) <= MAX_FILE_BYTES:
        write_text_atomic(path, document.decode("utf-8"))
        return [path]
    paths = []
    for suite in sorted({c.suite for c in cases}):
        part = path.with_name(f"{path.stem}-{suite}{path.suffix}")
        write_text_atomic(part, render_junit([c for c in cases if c.suite == suite], meta=meta,
                                             timestamp=timestamp).decode("utf-8"))
        paths.append(part)
    path.unlink(missing_ok=True)
    return paths


def read_cases(path: Path) -> dict[str, dict[str, str]]:
    """``test name -> {node, check, measured, expected, verdict}`` read back from a junit.xml."""
    cases: dict[str, dict[str, str]] = {}
    for element in ET.parse(path).iter("testcase"):  # noqa: S314 - burnin reads back its own file
        out = element.find("system-out")
        fields: dict[str, str] = {}
        for line in (out.text or "").splitlines() if out is not None else ():
            key, sep, value = line.partition(": ")
            if sep and key in CASE_FIELDS:
                fields[key] = value
        cases[element.get("name", "")] = fields
    return cases
