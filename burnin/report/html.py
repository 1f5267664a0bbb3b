"""Render ``report.html`` from a run's folder: gate.json, verdicts.json, facts, fabric.json, run.json.

One self-contained file, readable offline: inline CSS, inline SVG plots drawn
by :mod:`burnin.report.plots`, and a small inline script that sorts and
filters the tables. Nodes that failed for the same reasons are grouped and
their names folded (``FAIL IB-02 on sim[03,17-19]``), as operators read a fleet.

Reasons and facts carry what nodes printed. Jinja's autoescape handles
``<>&"'``; every value shown also goes through :func:`burnin.text.printable`
(the environment's ``finalize``), so control bytes a node sent appear as
``\\x1b`` and never raw. The page's Content-Security-Policy allows only its
own script (by hash) and no network at all: even markup that slipped through
could neither run nor load anything.

A gate.json or verdicts.json that is not burnin's is a :class:`ReportError`
(exit 2, naming the file). One verdict that is not a verdict (its check is
``5`` or ``null``, its status unknown) among good ones is left out, and the
page and stderr say which record of which file it was.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO
from urllib.parse import quote

from burnin.atomic import write_text_atomic
from burnin.errors import BurninError
from burnin.nodes import fold
from burnin.report.cards import curve_cards, node_order, pair_card, series_card, soak_cards
from burnin.report.compare import comparisons
from burnin.report.node_facts import NodeFacts, read_node
from burnin.report.plots import Rendered, number_text
from burnin.report.reasons import condense
from burnin.report.runinfo import RUN_META_FILE, SOAK_FILE, epoch, run_info
from burnin.report.series import build_series
from burnin.text import printable

if TYPE_CHECKING:
    from burnin.topology.model import Topology

ALL_CHECKS_LIMIT = 20_000
"""Up to this many verdicts, each node's section lists every check; above it, only those that did not pass."""
STATUS_ORDER = {"fail": 0, "incomplete": 1, "not-applicable": 2, "pass": 3}


class ReportError(BurninError):
    """The folder holds no run that a report can be made of."""


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
    not_applicable: int = 0
    title: str = ""


@dataclass(frozen=True, slots=True)
class NodeView:
    name: str
    anchor: str
    admitted: bool
    failed: tuple[str, ...]
    incomplete: tuple[str, ...]
    reasons: tuple[str, ...]
    not_applicable: tuple[tuple[str, str], ...]
    counts: Mapping[str, int]
    facts: NodeFacts
    verdicts: tuple[Mapping[str, Any], ...]
    """The verdicts listed in the node's section (every one, or those that did not pass)."""

    @property
    def href(self) -> str:
        return "#" + quote(self.anchor, safe="")

    def reading(self, key: str) -> str:
        value = self.facts.readings.get(key)
        return number_text(value) if value is not None else ""


@dataclass
class _Run:
    out_dir: Path
    gate: dict[str, Any]
    verdicts: list[dict[str, Any]]
    meta: dict[str, Any] = field(default_factory=dict)
    fabric: dict[str, Any] = field(default_factory=dict)
    soak: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    """Records of the run's files that the report leaves out, each naming its file and record."""


def group_failures(gate: dict[str, Any]) -> list[FailureGroup]:
    """Rejected nodes grouped by identical failed/incomplete checks and reasons."""
    groups: dict[tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]], list[str]] = defaultdict(list)
    for node, decision in gate.get("nodes", {}).items():
        if decision.get("admitted"):
            continue
        key = (tuple(decision.get("failed", ())), tuple(decision.get("incomplete", ())),
               tuple(decision.get("reasons", ())))
        groups[key].append(node)
    rows = [FailureGroup(fold(nodes), len(nodes), failed, incomplete, tuple(condense(reasons)))
            for (failed, incomplete, reasons), nodes in groups.items()]
    return sorted(rows, key=lambda g: (-g.count, g.nodes))


def check_matrix(verdicts: list[dict[str, Any]], titles: Mapping[str, str] | None = None) -> list[CheckRow]:
    """One row per check; a check judged by tests of two suites (STO-02, STO-04) has a row per suite."""
    by_check: dict[str, dict[str, dict[str, list[str]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list)))
    for verdict in verdicts:
        by_check[verdict["check"]][str(verdict.get("suite") or "")][verdict["status"]].append(verdict["node"])
    rows = []
    for check in sorted(by_check):
        suites = by_check[check]
        for suite in sorted(suites):
            status = suites[suite]
            label = f"{check} ({suite})" if len(suites) > 1 and suite else check
            rows.append(CheckRow(label, len(status["pass"]), len(status["fail"]), len(status["incomplete"]),
                                 fold(status["fail"]), fold(status["incomplete"]), len(status["not-applicable"]),
                                 (titles or {}).get(check, "")))
    return rows


def shown(value: object) -> object:
    """What the page shows for ``value``: text with control characters escaped, anything else as is.

    Text already escaped for HTML (``Markup``, e.g. a ``join`` result) stays ``Markup``:
    :func:`printable` adds no ``<>&``, so it is still safe and is not escaped twice.
    :class:`Rendered` markup (the plots, the page's script) was built and made
    printable by report code and keeps its newlines.
    """
    if isinstance(value, Rendered):
        return value
    if isinstance(value, str):
        return type(value)(printable(value))
    return value


def check_titles() -> dict[str, str]:
    from burnin.checks import load_all

    return {check_id: spec.title for check_id, spec in load_all().items()}


def _read_json(path: Path, default: Any) -> Any:
    """A JSON document, or ``default`` when the file is absent or unreadable (optional inputs)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return default


def _json_text(value: object) -> str:
    return printable(json.dumps(value), limit=40)


def verdict_problem(record: object) -> str | None:
    """Why ``record`` is not a verdict the report can show (node, check, status); None when it is."""
    if not isinstance(record, dict):
        return f"{_json_text(record)}, not an object"
    for key, what in (("node", "node name"), ("check", "check id")):
        if key not in record:
            return f"no '{key}'"
        if not isinstance(record[key], str) or not record[key]:
            return f"'{key}' is {_json_text(record[key])}, not a {what}"
    if record.get("status") not in STATUS_ORDER:
        return f"'status' is {_json_text(record.get('status'))}, not one of {', '.join(STATUS_ORDER)}"
    return None


def read_verdicts(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """verdicts.json's verdicts, and a warning for each record that is not one ([] when there is no file).

    A file that is not a JSON list, or none of whose records is a verdict, is a :class:`ReportError`.
    """
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return [], []
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ReportError(printable(f"{path} is not readable JSON: {exc}")) from None
    if not isinstance(document, list):
        raise ReportError(printable(f"{path} is not a list of verdicts"))
    verdicts: list[dict[str, Any]] = []
    problems: list[tuple[int, str]] = []
    for number, record in enumerate(document, start=1):
        problem = verdict_problem(record)
        if problem is None:
            verdicts.append(record)
        else:
            problems.append((number, problem))
    if problems and not verdicts:
        number, problem = problems[0]
        raise ReportError(printable(f"{path}: no record is a verdict (record {number}: {problem})"))
    return verdicts, [printable(f"{path}: record {number} is not a verdict ({problem}): left out of the report")
                      for number, problem in problems]


def _load(out_dir: Path) -> _Run:
    gate_path = out_dir / "gate.json"
    if not gate_path.is_file():
        raise ReportError(f"{out_dir} holds no gate.json: not a burnin run folder (or the run did not finish)")
    try:
        gate = json.loads(gate_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ReportError(f"{gate_path} is not readable JSON: {exc}") from None
    if not isinstance(gate, dict) or not isinstance(gate.get("nodes", {}), dict):
        raise ReportError(f"{gate_path} is not a gate document (no 'nodes' object)")
    odd = next((node for node, decision in gate.get("nodes", {}).items() if not isinstance(decision, dict)), None)
    if odd is not None:
        raise ReportError(printable(f"{gate_path} is not a gate document (node {odd}: no decision object)"))
    decisions = gate.get("nodes", {}).values()
    admitted = sum(1 for decision in decisions if decision.get("admitted") is True)
    # the counts the page shows are the nodes' own (a gate.json written by hand may lack them)
    gate = {**gate, "summary": {"nodes": len(decisions), "admitted": admitted, "rejected": len(decisions) - admitted}}
    verdicts, warnings = read_verdicts(out_dir / "verdicts.json")
    meta, fabric, soak = (_read_json(out_dir / name, {}) for name in (RUN_META_FILE, "fabric.json", SOAK_FILE))
    return _Run(out_dir, gate, verdicts, meta if isinstance(meta, dict) else {},
                fabric if isinstance(fabric, dict) else {}, soak if isinstance(soak, dict) else {}, warnings)


def _facts_dir(run: _Run) -> Path | None:
    local = run.out_dir / "facts"
    if local.is_dir():
        return local
    recorded = run.gate.get("facts")
    return Path(recorded) if isinstance(recorded, str) and Path(recorded).is_dir() else None


def _topology(gate: Mapping[str, Any]) -> Topology | None:
    """The run's topology for drawing its bounds; a plot without bounds beats no report."""
    from burnin.topology.load import find_topology

    name = gate.get("topology")
    if not isinstance(name, str) or not name:
        return None
    try:
        return find_topology(name)
    except (BurninError, OSError, ValueError):
        return None


def _statuses(verdicts: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], str]:
    """(node, check) -> the worst status among the verdicts (fail > incomplete > not-applicable > pass)."""
    worst: dict[tuple[str, str], str] = {}
    for verdict in verdicts:
        key = (str(verdict["node"]), str(verdict["check"]))
        status = str(verdict["status"])
        if key not in worst or STATUS_ORDER.get(status, 1) < STATUS_ORDER.get(worst[key], 1):
            worst[key] = status
    return worst


def _node_views(run: _Run, nodes: Sequence[str], facts: Mapping[str, NodeFacts]) -> list[NodeView]:
    by_node: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for verdict in run.verdicts:
        by_node[str(verdict["node"])].append(verdict)
    every_check = len(run.verdicts) <= ALL_CHECKS_LIMIT
    views = []
    for name in nodes:
        decision = run.gate["nodes"].get(name) or {}
        verdicts = sorted(by_node.get(name, ()), key=lambda v: (STATUS_ORDER.get(str(v["status"]), 1), v["check"]))
        counts = {s: sum(1 for v in verdicts if v["status"] == s) for s in STATUS_ORDER}
        listed = verdicts if every_check else [v for v in verdicts if v["status"] != "pass"]
        not_applicable = decision.get("not_applicable")
        views.append(NodeView(
            name, f"node-{name}", bool(decision.get("admitted")), tuple(decision.get("failed") or ()),
            tuple(decision.get("incomplete") or ()), tuple(condense(map(str, decision.get("reasons") or ()))),
            tuple((str(k), str(v)) for k, v in not_applicable.items()) if isinstance(not_applicable, dict) else (),
            counts, facts.get(name) or NodeFacts(name, problem="no facts file"), tuple(listed)))
    return views


def _script(env: Any) -> tuple[Rendered, Rendered, str]:
    """The page's script and style, and a Content-Security-Policy that allows exactly them and no network."""
    script = env.loader.get_source(env, "report.js")[0]
    style = env.loader.get_source(env, "report.css")[0]

    def digest(text: str) -> str:
        return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"

    policy = (f"default-src 'none'; script-src {digest(script)}; style-src {digest(style)}; img-src data:; "
              "base-uri 'none'; form-action 'none'")
    return Rendered(script), Rendered(style), policy


def render(out_dir: Path, *, err: TextIO | None = None) -> Path:
    """Write ``out_dir/report.html`` and return its path; each record left out is one line on ``err``
    (default stderr) and a warning on the page."""
    from jinja2 import Environment, PackageLoader

    run = _load(out_dir)
    for warning in run.warnings:
        (err or sys.stderr).write(f"burnin report: {warning}\n")
    nodes = sorted(run.gate.get("nodes", {}), key=node_order)
    facts_dir = _facts_dir(run)
    facts = {n: read_node(n, facts_dir / f"{n}.json") for n in nodes} if facts_dir else {}
    titles = check_titles()
    status = _statuses(run.verdicts)
    series = build_series(nodes, facts, status, _topology(run.gate))
    cards = [series_card(s, titles) for s in series]
    pairs = pair_card(run.fabric, titles)
    cards += [pairs] if pairs else []
    cards += curve_cards(nodes, facts, status, titles) + soak_cards(run.soak, status, titles)
    cards.sort(key=lambda c: (not c.attention, c.check))
    plots_of: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for card in cards:
        plots_of[card.check].append((card.anchor, card.label))
    collected = [t for f in facts.values() for label, value in f.summary if label == "collected"
                 if (t := epoch(value)) is not None]
    info = run_info(out_dir, run.gate, run.meta, verdicts=len(run.verdicts), fabric=bool(run.fabric),
                    first_collected=min(collected, default=None))
    info = dataclasses.replace(info, warnings=(*info.warnings, *run.warnings))
    env = Environment(loader=PackageLoader("burnin.report", "templates"), autoescape=True, finalize=shown)
    script, style, policy = _script(env)
    views = _node_views(run, nodes, facts)
    page = env.get_template("report.html.j2").render(
        gate=run.gate, groups=group_failures(run.gate), checks=check_matrix(run.verdicts, titles),
        comparisons=comparisons(run.verdicts, titles, plots_of),
        nodes=views, plots=cards, info=info, script=script, style=style,
        policy=policy, every_check=len(run.verdicts) <= ALL_CHECKS_LIMIT,
    )
    path = out_dir / "report.html"
    write_text_atomic(path, page)  # a reader (or a second render) never sees half a page
    return path
