"""The plots of report.html, each a card: a check, what is drawn, the SVG and a few notes.

Per-node readings become strip plots (:mod:`burnin.report.series`); the
fabric phase's pair runs one point per pair; busbw-vs-size curves, where the
fabric phase kept each run's rows, and soak time series (``soak.json``) become
curve plots. Cards that need attention (a failure, an outlier) sort first.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from burnin.nodes import fold
from burnin.report.node_facts import NodeFacts
from burnin.report.plots import Curve, Rendered, curve_plot, strip_plot
from burnin.report.series import MEASURES, Line, Point, Series, outliers


def node_order(name: str) -> tuple[tuple[int, str], ...]:
    """Natural order: ``gpu2`` before ``gpu10``."""
    return tuple((int(part), "") if part.isdigit() else (-1, part) for part in re.split(r"(\d+)", name) if part)


@dataclass(frozen=True, slots=True)
class PlotCard:
    check: str
    title: str
    label: str
    svg: Rendered
    notes: tuple[str, ...]
    attention: bool
    anchor: str = ""


def series_card(series: Series, titles: Mapping[str, str]) -> PlotCard:
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


def pair_card(fabric: Mapping[str, Any], titles: Mapping[str, str]) -> PlotCard | None:
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


def curve_cards(nodes: Sequence[str], facts: Mapping[str, NodeFacts], status: Mapping[tuple[str, str], str],
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


def soak_cards(soak: Mapping[str, Any], status: Mapping[tuple[str, str], str],
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
