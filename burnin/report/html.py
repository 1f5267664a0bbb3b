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
"""

from __future__ import annotations

import base64
import calendar
import hashlib
import json
import re
import shlex
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from burnin.errors import BurninError
from burnin.nodes import fold
from burnin.report.node_facts import NodeFacts, read_node
from burnin.report.plots import Curve, Rendered, curve_plot, number_text, strip_plot
from burnin.report.series import MEASURES, Line, Point, Series, build_series, outliers
from burnin.text import printable

if TYPE_CHECKING:
    from burnin.topology.model import Topology

RUN_META_FILE = "run.json"
"""Optional ``{argv, suites, started, duration_s, version}`` written by the run command (docs/report.md)."""
SOAK_FILE = "soak.json"
"""Optional soak time series (docs/report.md); drawn when present."""
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


@dataclass(frozen=True, slots=True)
class PlotCard:
    check: str
    title: str
    label: str
    svg: Rendered
    notes: tuple[str, ...]
    attention: bool
    anchor: str = ""


@dataclass(frozen=True, slots=True)
class RunInfo:
    rows: tuple[tuple[str, str], ...]
    links: tuple[tuple[str, str], ...]
    """(file name, href) of the run's result files found beside report.html."""
    warnings: tuple[str, ...] = ()


@dataclass
class _Run:
    out_dir: Path
    gate: dict[str, Any]
    verdicts: list[dict[str, Any]]
    meta: dict[str, Any] = field(default_factory=dict)
    fabric: dict[str, Any] = field(default_factory=dict)
    soak: dict[str, Any] = field(default_factory=dict)


def node_order(name: str) -> tuple[tuple[int, str], ...]:
    """Natural order: ``gpu2`` before ``gpu10``."""
    return tuple((int(part), "") if part.isdigit() else (-1, part) for part in re.split(r"(\d+)", name) if part)


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


def check_matrix(verdicts: list[dict[str, Any]], titles: Mapping[str, str] | None = None) -> list[CheckRow]:
    by_check: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for verdict in verdicts:
        by_check[verdict["check"]][verdict["status"]].append(verdict["node"])
    rows = []
    for check in sorted(by_check):
        status = by_check[check]
        rows.append(CheckRow(check, len(status["pass"]), len(status["fail"]), len(status["incomplete"]),
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
    verdicts = _read_json(out_dir / "verdicts.json", [])
    verdicts = [v for v in verdicts if isinstance(v, dict) and {"node", "check", "status"} <= v.keys()] \
        if isinstance(verdicts, list) else []
    meta, fabric, soak = (_read_json(out_dir / name, {}) for name in (RUN_META_FILE, "fabric.json", SOAK_FILE))
    return _Run(out_dir, gate, verdicts, *(d if isinstance(d, dict) else {} for d in (meta, fabric, soak)))


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


def _duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min {secs:02d} s"


def _epoch(stamp: object) -> float | None:
    if not isinstance(stamp, str):
        return None
    try:
        return float(calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        return None


def _links(out_dir: Path) -> list[tuple[str, str]]:
    names = ["gate.json", "verdicts.json", "junit.xml", *sorted(p.name for p in out_dir.glob("junit-*.xml")),
             *sorted(p.name for p in out_dir.glob("*.prom")), "fabric.json", "fabric-commands.log", SOAK_FILE,
             RUN_META_FILE]
    links = [(name, quote(name)) for name in dict.fromkeys(names) if (out_dir / name).is_file()]
    if (out_dir / "facts").is_dir():
        links.append(("facts/", "facts/"))
    return links


def run_info(run: _Run, first_collected: float | None) -> RunInfo:
    """The run's metadata: version, command line, suites, times, selection; what is not recorded says so."""
    from burnin import __version__

    gate, meta = run.gate, run.meta
    rows: list[tuple[str, str]] = []
    version = meta.get("version")
    rows.append(("burnin", str(version) if version else
                 f"{__version__} (the version rendering this report; run.json not written)"))
    argv = meta.get("argv")
    if isinstance(argv, list) and argv:
        rows.append(("command", shlex.join(str(a) for a in argv)))
    suites = meta.get("suites")
    if isinstance(suites, list) and suites:
        rows.append(("suites", ", ".join(map(str, suites))))
    else:
        inferred = ["node", *(["fabric"] if run.fabric else [])]
        rows.append(("suites", ", ".join(inferred) + " (inferred: run.json not written)"))
    rows.append(("topology", str(gate.get("topology") or "-")))
    if meta.get("started"):
        rows.append(("started", str(meta["started"])))
    if gate.get("created"):
        rows.append(("gate written", str(gate["created"])))
    duration = meta.get("duration_s")
    created = _epoch(gate.get("created"))
    if isinstance(duration, (int, float)) and not isinstance(duration, bool):
        rows.append(("duration", _duration(float(duration))))
    elif created is not None and first_collected is not None:
        rows.append(("duration", f"about {_duration(created - first_collected)} (first facts to gate)"))
    selection = gate.get("selection")
    if isinstance(selection, dict) and selection.get("keyword"):
        rows.append(("selection", f"-k {selection['keyword']}"))
    nodes = gate.get("summary", {}).get("nodes", len(gate.get("nodes", {})))
    rows.append(("verdicts", f"{len(run.verdicts)} over {nodes} nodes"))
    warnings: list[str] = []
    if gate.get("partial"):
        reasons = gate.get("partial_reasons") or []
        warnings.append("Partial run: it did not judge every check and admits nobody"
                        + (f" ({'; '.join(map(str, reasons))})" if reasons else "") + ".")
    if gate.get("interrupted"):
        warnings.append(f"Interrupted run: {gate.get('interrupted_reason') or 'stopped before the end'}; "
                        "it admits nobody.")
    return RunInfo(tuple(rows), tuple(_links(run.out_dir)), tuple(warnings))


def _statuses(verdicts: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], str]:
    """(node, check) -> the worst status among the verdicts (fail > incomplete > not-applicable > pass)."""
    worst: dict[tuple[str, str], str] = {}
    for verdict in verdicts:
        key = (str(verdict["node"]), str(verdict["check"]))
        status = str(verdict["status"])
        if key not in worst or STATUS_ORDER.get(status, 1) < STATUS_ORDER.get(worst[key], 1):
            worst[key] = status
    return worst


def _series_card(series: Series, titles: Mapping[str, str]) -> PlotCard:
    measure = series.measure
    notes: list[str] = []
    bounds = [line.label for line in series.lines if line.kind == "bound"]
    if bounds:
        notes.append(f"bound {', '.join(bounds)} {measure.unit} (topology)")
    failed = [p.label for p in series.points if p.status == "fail"]
    incomplete = [p.label for p in series.points if p.status == "incomplete"]
    standing_out = [p.label for p in series.points if p.outlier and p.status not in ("fail", "incomplete")]
    if failed:
        notes.append(f"failed: {fold(failed)}")
    if incomplete:
        notes.append(f"incomplete: {fold(incomplete)}")
    if standing_out:
        notes.append(f"stand out from the fleet: {fold(standing_out)}")
    if series.missing:
        notes.append(f"no value from {len(series.missing)}: {fold(series.missing)}")
    label = f"{measure.check} {measure.label} ({measure.unit}), {len(series.points)} nodes"
    svg = strip_plot(label, series.points, series.lines, measure.unit)
    return PlotCard(measure.check, titles.get(measure.check, ""), f"{measure.label} ({measure.unit})", svg,
                    tuple(notes), series.attention, f"plot-{measure.reading}")


def _pair_card(fabric: Mapping[str, Any], titles: Mapping[str, str]) -> PlotCard | None:
    """NCCL-03's 2-node runs of the localisation, one point per pair, in the order they ran."""
    localization = fabric.get("localization")
    if not isinstance(localization, dict):
        return None
    points: list[Point] = []
    for test in localization.get("tests") or []:
        if not isinstance(test, dict) or not isinstance(test.get("measurement"), dict):
            continue
        value = test["measurement"].get("busbw_gbps")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
            label = "+".join(map(str, test.get("nodes") or ())) or "?"
            points.append(Point(label, float(value), "pass" if test.get("passed") else "fail"))
    if not points:
        return None
    marks = outliers([p.value for p in points])
    points = [Point(p.label, p.value, p.status, mark) for p, mark in zip(points, marks, strict=True)]
    lines = []
    floor = localization.get("floor_gbps")
    if isinstance(floor, (int, float)) and not isinstance(floor, bool):
        lines.append(Line(f">= {floor:.4g}", float(floor), "bound"))
    middle = sorted(p.value for p in points)[len(points) // 2]
    lines.append(Line(f"median {middle:.4g}", middle, "median"))
    failed = [p.label for p in points if p.status == "fail"]
    notes = [f"{len(points)} pair runs in {localization.get('rounds', '?')} rounds"]
    if failed:
        notes.append("below the floor: " + ", ".join(failed[:12]) + (" ..." if len(failed) > 12 else ""))
    named = localization.get("named") or []
    if named:
        notes.append(f"named: {fold(map(str, named))}")
    svg = strip_plot("NCCL-03 2-node all_reduce busbw per pair (GB/s)", points, lines, "GB/s",
                     order="pair runs in the order they ran")
    return PlotCard("NCCL-03", titles.get("NCCL-03", ""), "2-node all_reduce busbw per pair (GB/s)", svg,
                    tuple(notes), bool(failed), "plot-nccl-pairs")


def _curve_cards(nodes: Sequence[str], facts: Mapping[str, NodeFacts], status: Mapping[tuple[str, str], str],
                 titles: Mapping[str, str]) -> list[PlotCard]:
    """busbw against message size per node, where the fabric phase kept each run's rows (``curve``)."""
    cards = []
    for measure in MEASURES:
        curves = [Curve(n, status.get((n, measure.check), ""), facts[n].curves[measure.reading],
                        status.get((n, measure.check), "") in ("fail", "incomplete"))
                  for n in nodes if n in facts and measure.reading in facts[n].curves]
        if not curves:
            continue
        label = f"{measure.label} against message size"
        svg = curve_plot(f"{measure.check} {label}", curves, measure.unit, x_unit="message size", log2_x=True)
        marked = [c.label for c in curves if c.marked]
        notes = [f"{len(curves)} nodes"] + ([f"marked: {fold(marked)}"] if marked else [])
        cards.append(PlotCard(measure.check, titles.get(measure.check, ""), f"{label} ({measure.unit})", svg,
                              tuple(notes), bool(marked), f"curve-{measure.reading}"))
    return cards


def _soak_cards(soak: Mapping[str, Any], status: Mapping[tuple[str, str], str],
                titles: Mapping[str, str]) -> list[PlotCard]:
    """Soak time series (``soak.json``: docs/report.md), one plot per series."""
    cards = []
    for index, series in enumerate(soak.get("series") or []):
        if not isinstance(series, dict) or not isinstance(series.get("nodes"), dict):
            continue
        check = str(series.get("check") or "")
        curves = []
        for node, rows in sorted(series["nodes"].items(), key=lambda item: node_order(str(item[0]))):
            points = tuple((float(r[0]) / 3600, float(r[1])) for r in rows or []
                           if isinstance(r, list) and len(r) >= 2
                           and all(isinstance(v, (int, float)) and not isinstance(v, bool) and v == v for v in r[:2]))
            verdict = status.get((str(node), check), "")
            curves.append(Curve(str(node), verdict, points, verdict in ("fail", "incomplete")))
        lines = [Line(f"{word} {series[key]:g}", float(series[key]), "bound")
                 for key, word in (("lower", ">="), ("upper", "<="))
                 if isinstance(series.get(key), (int, float)) and not isinstance(series.get(key), bool)]
        unit = str(series.get("unit") or "")
        label = str(series.get("label") or f"series {index + 1}")
        svg = curve_plot(f"{check} {label}", curves, unit, x_unit="hours", lines=lines)
        marked = [c.label for c in curves if c.marked]
        cards.append(PlotCard(check, titles.get(check, ""), f"{label} ({unit}) over time", svg,
                              (f"marked: {fold(marked)}",) if marked else (), bool(marked), f"soak-{index}"))
    return cards


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
            tuple(decision.get("incomplete") or ()), tuple(map(str, decision.get("reasons") or ())),
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


def render(out_dir: Path) -> Path:
    """Write ``out_dir/report.html`` and return its path."""
    from jinja2 import Environment, PackageLoader

    run = _load(out_dir)
    nodes = sorted(run.gate.get("nodes", {}), key=node_order)
    facts_dir = _facts_dir(run)
    facts = {n: read_node(n, facts_dir / f"{n}.json") for n in nodes} if facts_dir else {}
    titles = check_titles()
    status = _statuses(run.verdicts)
    series = build_series(nodes, facts, status, _topology(run.gate))
    cards = [_series_card(s, titles) for s in series]
    pair_card = _pair_card(run.fabric, titles)
    cards += [pair_card] if pair_card else []
    cards += _curve_cards(nodes, facts, status, titles) + _soak_cards(run.soak, status, titles)
    cards.sort(key=lambda c: (not c.attention, c.check))
    collected = [t for f in facts.values() for label, value in f.summary if label == "collected"
                 if (t := _epoch(value)) is not None]
    env = Environment(loader=PackageLoader("burnin.report", "templates"), autoescape=True, finalize=shown)
    script, style, policy = _script(env)
    views = _node_views(run, nodes, facts)
    page = env.get_template("report.html.j2").render(
        gate=run.gate, groups=group_failures(run.gate), checks=check_matrix(run.verdicts, titles),
        nodes=views, plots=cards, info=run_info(run, min(collected, default=None)), script=script, style=style,
        policy=policy, every_check=len(run.verdicts) <= ALL_CHECKS_LIMIT,
    )
    path = out_dir / "report.html"
    path.write_text(page, encoding="utf-8")
    return path
