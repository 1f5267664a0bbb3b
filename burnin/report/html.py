"""Render ``report.html`` from a run's ``gate.json`` and ``verdicts.json``.

Nodes that failed for the same reasons are grouped and their names folded
(``FAIL IB-02 on sim[03,17-19]``), as operators read a fleet.

Reasons carry what nodes printed. Jinja's autoescape handles ``<>&``; every
value shown also goes through :func:`burnin.text.printable` (the environment's
``finalize``), so control bytes a node sent appear as ``\\x1b`` and never raw.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from burnin.nodes import fold
from burnin.text import printable


@dataclass(frozen=True, slots=True)
class FailureGroup:
    nodes: str
    count: int
    failed: tuple[str, ...]
    incomplete: tuple[str, ...]
    reasons: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CheckRow:
    check: str
    passed: int
    failed: int
    incomplete: int
    failed_nodes: str
    incomplete_nodes: str


def group_failures(gate: dict[str, Any]) -> list[FailureGroup]:
    """Rejected nodes grouped by identical failed/incomplete checks and reasons."""
    groups: dict[tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]], list[str]] = defaultdict(list)
    for node, decision in gate.get("nodes", {}).items():
        if decision.get("admitted"):
            continue
        key = (tuple(decision.get("failed", ())), tuple(decision.get("incomplete", ())),
               tuple(decision.get("reasons", ())))
        groups[key].append(node)
    rows = [FailureGroup(fold(nodes), len(nodes), *key) for key, nodes in groups.items()]
    return sorted(rows, key=lambda g: (-g.count, g.nodes))


def check_matrix(verdicts: list[dict[str, Any]]) -> list[CheckRow]:
    by_check: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for verdict in verdicts:
        by_check[verdict["check"]][verdict["status"]].append(verdict["node"])
    rows = []
    for check in sorted(by_check):
        status = by_check[check]
        rows.append(CheckRow(check, len(status["pass"]), len(status["fail"]), len(status["incomplete"]),
                             fold(status["fail"]), fold(status["incomplete"])))
    return rows


def shown(value: object) -> object:
    """What the page shows for ``value``: text with control characters escaped, anything else as is.

    Text already escaped for HTML (``Markup``, e.g. a ``join`` result) stays ``Markup``:
    :func:`printable` adds no ``<>&``, so it is still safe and is not escaped twice.
    """
    if isinstance(value, str):
        return type(value)(printable(value))
    return value


def render(out_dir: Path) -> Path:
    """Write ``out_dir/report.html`` and return its path."""
    from jinja2 import Environment, PackageLoader

    gate = json.loads((out_dir / "gate.json").read_text(encoding="utf-8"))
    verdicts_file = out_dir / "verdicts.json"
    verdicts = json.loads(verdicts_file.read_text(encoding="utf-8")) if verdicts_file.exists() else []
    env = Environment(loader=PackageLoader("burnin.report", "templates"), autoescape=True, finalize=shown)
    page = env.get_template("report.html.j2").render(
        gate=gate, groups=group_failures(gate), checks=check_matrix(verdicts),
        nodes=sorted(gate.get("nodes", {}).items()),
    )
    path = out_dir / "report.html"
    path.write_text(page, encoding="utf-8")
    return path
