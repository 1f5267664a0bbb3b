"""Each failed check's nodes side by side: what the failing nodes measured against what the others did.

A plot shows a check whose reading is a number (GPUs seen, PCIe lanes,
busbw). Many checks judge text (a route, an NCCL setting, a firmware
version) or a number the report does not plot; for every check that failed
on some node, :func:`comparisons` groups the run's verdicts of that check by
suite, verdict and measured value, so the failing node stands in its own row
above the rows of the nodes that passed (``GPU-08 fail gpu3 Gen5 x8 sim05``
over ``pass Gen5 x16 sim[01-04,06-08]``). A check judged by two suites
(STO-02 by the node suite's configuration and the fabric suite's NCCL logs)
keeps a row per suite.

Passing nodes whose measurements all differ (a throughput) would be a row
each: past :data:`PASS_ROWS` rows the rest of them are one row that counts
them.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from burnin.nodes import fold

ORDER = {"fail": 0, "incomplete": 1, "not-applicable": 2, "pass": 3}
PASS_ROWS = 3
"""Rows of passing nodes shown per check (the most common measurements shared by two nodes or more, else
one example); the rest are counted in one row."""
FAIL_ROWS = 12
"""Rows of failing or incomplete nodes shown per check; the rest are counted in one row."""


@dataclass(frozen=True, slots=True)
class Row:
    status: str
    suite: str
    measured: str
    expected: str
    nodes: str
    """The nodes of the row, folded (``sim[01-04,06-08]``)."""
    count: int


@dataclass(frozen=True, slots=True)
class Comparison:
    check: str
    title: str
    rows: tuple[Row, ...]
    failed_nodes: str
    plots: tuple[tuple[str, str], ...] = ()
    """(anchor, label) of each plot of this check on the page."""
    expected: str = ""
    """What every row expected, when they all expected the same (the rows then leave it empty)."""

    @property
    def anchor(self) -> str:
        return f"compare-{self.check}"


def _measured(verdict: Mapping[str, Any]) -> str:
    """What the row shows: the measurement, or for a check not measured, why."""
    measured = str(verdict.get("measured") or "")
    status = str(verdict.get("status"))
    if status in ("incomplete", "not-applicable") or not measured:
        return str(verdict.get("reason") or measured or status)
    return measured


def _rows(verdicts: Sequence[Mapping[str, Any]]) -> tuple[Row, ...]:
    groups: dict[tuple[str, str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for verdict in verdicts:
        groups[(str(verdict["status"]), str(verdict.get("suite") or ""), _measured(verdict))].append(verdict)
    by_status: dict[str, list[tuple[str, str, list[Mapping[str, Any]]]]] = defaultdict(list)
    for (status, suite, measured), members in groups.items():
        by_status[status].append((suite, measured, members))
    rows: list[Row] = []
    for status in sorted(by_status, key=lambda s: (ORDER.get(s, 1), s)):
        ordered = sorted(by_status[status], key=lambda group: (-len(group[2]), group[0], group[1]))
        limit = FAIL_ROWS
        if status in ("pass", "not-applicable"):
            # nodes that each measured something else (a throughput) compare by one example, not a row each
            limit = max(1, sum(1 for _, _, members in ordered[:PASS_ROWS] if len(members) > 1))
        for suite, measured, members in ordered[:limit]:
            names = [str(v["node"]) for v in members]
            expected = next((str(v["expected"]) for v in members if v.get("expected")), "")
            rows.append(Row(status, suite, measured, expected, fold(names), len(set(names))))
        rest = sorted({str(v["node"]) for _, _, members in ordered[limit:] for v in members})
        if rest:
            more = f"{len(rest)} more node{'s' if len(rest) > 1 else ''}, each with another measurement"
            rows.append(Row(status, "", more, "", fold(rest), len(rest)))
    return tuple(rows)


def comparisons(verdicts: Iterable[Mapping[str, Any]], titles: Mapping[str, str],
                plots: Mapping[str, Sequence[tuple[str, str]]] | None = None) -> list[Comparison]:
    """One :class:`Comparison` per check that failed on at least one node, in check order."""
    by_check: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for verdict in verdicts:
        by_check[str(verdict["check"])].append(verdict)
    result = []
    for check in sorted(by_check):
        members = by_check[check]
        failed = [str(v["node"]) for v in members if v["status"] == "fail"]
        if not failed:
            continue
        rows = _rows(members)
        said = {row.expected for row in rows if row.expected}
        common = said.pop() if len(said) == 1 else ""
        if common:
            rows = tuple(dataclasses.replace(row, expected="") for row in rows)
        result.append(Comparison(check, titles.get(check, ""), rows, fold(failed),
                                 tuple((plots or {}).get(check, ())), common))
    return result
