"""The run's metadata for report.html: version, command line, suites, times, files.

gate.json records the topology, when the gate was written and what pytest
selected; the command line, the suites, the start and the duration come from
an optional ``run.json`` beside it, which the run command writes
(:func:`write_run_json`; format in docs/report.md). Without it the report
says what it inferred and how.
"""

from __future__ import annotations

import calendar
import json
import shlex
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from burnin.atomic import write_text_atomic

RUN_META_FILE = "run.json"
"""Optional ``{argv, suites, started, duration_s, version}`` written by the run command (docs/report.md)."""
SOAK_FILE = "soak.json"
"""Optional soak time series (docs/report.md); drawn when present."""


@dataclass(frozen=True, slots=True)
class RunInfo:
    rows: tuple[tuple[str, str], ...]
    links: tuple[tuple[str, str], ...]
    """(file name, href) of the run's result files found beside report.html."""
    warnings: tuple[str, ...] = ()
    command: tuple[str, ...] = ()
    """The run's command line, one shell-quoted word each (shown unbroken, wrapped between words)."""


def write_run_json(out_dir: Path, *, argv: Sequence[str], suites: Sequence[str], started: float,
                   duration_s: float, left_on_nodes: Mapping[str, Sequence[str]] | None = None,
                   not_measured: Mapping[str, str] | None = None) -> Path:
    """Write ``out_dir/run.json`` (atomically) for report.html's metadata; ``started`` is Unix time.
    ``left_on_nodes``: node -> the files the run shipped there and could not remove; ``not_measured``: node -> why
    its allocation ended under the run, so that no gate acted on it (each written when any)."""
    from burnin import __version__

    document: dict[str, object] = {"argv": list(argv), "suites": list(suites),
                                   "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
                                   "duration_s": round(duration_s, 3), "version": __version__}
    if left_on_nodes:
        document["left_on_nodes"] = {node: list(paths) for node, paths in sorted(left_on_nodes.items())}
    if not_measured:
        document["not_measured"] = dict(sorted(not_measured.items()))
    path = out_dir / RUN_META_FILE
    write_text_atomic(path, json.dumps(document, indent=1) + "\n")
    return path


def duration_text(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min {secs:02d} s"


def epoch(stamp: object) -> float | None:
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


def run_info(out_dir: Path, gate: Mapping[str, Any], meta: Mapping[str, Any], *, verdicts: int,
             fabric: bool, first_collected: float | None) -> RunInfo:
    """The run's metadata: version, command line, suites, times, selection; what is not recorded says so."""
    from burnin import __version__

    rows: list[tuple[str, str]] = []
    command: tuple[str, ...] = ()
    version = meta.get("version")
    rows.append(("burnin", str(version) if version else
                 f"{__version__} (the version rendering this report; run.json not written)"))
    argv = meta.get("argv")
    if isinstance(argv, list) and argv:
        command = tuple(shlex.quote(str(a)) for a in argv)
    suites = meta.get("suites")
    if isinstance(suites, list) and suites:
        rows.append(("suites", ", ".join(map(str, suites))))
    else:
        inferred = ["node", *(["fabric"] if fabric else [])]
        rows.append(("suites", ", ".join(inferred) + " (inferred: run.json not written)"))
    rows.append(("topology", str(gate.get("topology") or "-")))
    if meta.get("started"):
        rows.append(("started", str(meta["started"])))
    if gate.get("created"):
        rows.append(("gate written", str(gate["created"])))
    duration = meta.get("duration_s")
    created = epoch(gate.get("created"))
    if isinstance(duration, (int, float)) and not isinstance(duration, bool):
        rows.append(("duration", duration_text(float(duration))))
    elif created is not None and first_collected is not None:
        rows.append(("duration", f"about {duration_text(created - first_collected)} (first facts to gate)"))
    selection = gate.get("selection")
    if isinstance(selection, dict) and selection.get("keyword"):
        rows.append(("selection", f"-k {selection['keyword']}"))
    nodes = gate.get("summary", {}).get("nodes", len(gate.get("nodes", {})))
    rows.append(("verdicts", f"{verdicts} over {nodes} nodes"))
    warnings: list[str] = []
    if gate.get("partial"):
        reasons = gate.get("partial_reasons") or []
        warnings.append("Partial run: it did not judge every check and admits nobody"
                        + (f" ({'; '.join(map(str, reasons))})" if reasons else "") + ".")
    if gate.get("interrupted"):
        warnings.append(f"Interrupted run: {gate.get('interrupted_reason') or 'stopped before the end'}; "
                        "it admits nobody.")
    return RunInfo(tuple(rows), tuple(_links(out_dir)), tuple(warnings), command)
