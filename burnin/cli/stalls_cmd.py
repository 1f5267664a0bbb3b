"""``burnin stalls``: the watch's stall records of several nodes, and the node whose counters stopped first.

``burnin stalls JOURNAL...`` reads each node's ``events.jsonl`` (or its state folder), groups the stalls into
episodes and names, per episode, the node whose compute HCAs' traffic counters stopped first as the likely
culprit, or says why it cannot (burnin.watch.culprit). Exit 0 with the report; 2 when a file is missing or
is not a journal.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from burnin.cli.history_cmd import window
    from burnin.watch.culprit import DEFAULT_MARGIN_S

    parser.add_argument("journals", nargs="+", type=Path, metavar="JOURNAL",
                        help="a node's burnin watch journal (events.jsonl, or its state folder), one per node")
    parser.add_argument("--since", type=window, metavar="TIME",
                        help="only stalls found within this long before now: 30d, 72h, 90m, 3600s (default all)")
    parser.add_argument("--margin", type=float, default=DEFAULT_MARGIN_S, metavar="S",
                        help="one node's counters must have stopped at least S seconds before every other's to be "
                             f"named (the nodes' clocks differ; default {DEFAULT_MARGIN_S:g})")
    parser.add_argument("--json", dest="json_out", metavar="FILE",
                        help="write the episodes as JSON to FILE ('-': to stdout instead of the text)")


def _lines(path: Path) -> tuple[str, list[str]]:
    from burnin.errors import UsageError
    from burnin.watch.journal import JOURNAL_FILE

    file = path / JOURNAL_FILE if path.is_dir() else path
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{file}: no such file" + (" (a watch's state folder holds events.jsonl)"
                                                   if path.is_dir() else "")) from None
    except (OSError, UnicodeDecodeError) as exc:
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8 text"
        raise UsageError(f"{file}: cannot read ({detail})") from None
    lines = text.splitlines()
    if lines and not any(line.lstrip().startswith("{") for line in lines):
        raise UsageError(f"{file}: not a burnin watch journal (no line is a JSON object)")
    return str(file), lines


def run(args: argparse.Namespace) -> int:
    from burnin.errors import UsageError
    from burnin.text import printable
    from burnin.watch.culprit import Doubt, StallRecord, describe, episodes, judge, read_stalls

    if not args.margin >= 0 or args.margin == float("inf"):
        raise UsageError(f"--margin {args.margin}: must be a number of seconds, 0 or more")
    now = time.time()
    records: list[StallRecord] = []
    doubts: list[Doubt] = []
    owners: dict[str, str] = {}
    read: set[Path] = set()
    for path in args.journals:
        origin, lines = _lines(path)
        if Path(origin).resolve() in read:
            continue  # the same journal named twice (a file and its folder)
        read.add(Path(origin).resolve())
        found, doubted, nodes = read_stalls(lines, origin, now)
        for node in nodes:
            if node in owners and owners[node] != origin:
                doubted.append(Doubt(origin, f"node {node} also has journal {owners[node]}: one journal per node"))
            owners.setdefault(node, origin)
        records += found
        doubts += doubted
    if args.since is not None:
        records = [r for r in records if r.found_at >= now - args.since]
    judged = [judge(episode, doubts, args.margin) for episode in episodes(records)]
    document: dict[str, Any] = {
        "journals": [str(p) for p in args.journals], "stalls": len(records),
        "doubts": [{"where": d.where, "why": d.why} for d in doubts],
        "episodes": [{"culprit": e.culprit, "verdict": e.verdict, "start": e.start,
                      "stalls": [{"node": r.node, "found_at": r.found_at, "counters_changed_at": r.changed_at,
                                  "counters_changed_after": r.changed_after, "watched_since": r.watched_since,
                                  "action": r.action, "origin": r.origin} for r in e.records]}
                     for e in judged],
    }
    if args.json_out:
        text = json.dumps(document, indent=1, sort_keys=True) + "\n"
        if args.json_out == "-":
            sys.stdout.write(text)
            return 0
        Path(args.json_out).write_text(text, encoding="utf-8")
    say = print
    say(printable(f"burnin stalls: {len(args.journals)} journals, {len(records)} stalls in {len(judged)} episodes"))
    for doubt in doubts[:10]:
        say(printable(f"  not trusted: {doubt.where}: {doubt.why}"))
    if len(doubts) > 10:
        say(f"  ... and {len(doubts) - 10} more not trusted")
    for number, episode in enumerate(judged, start=1):
        stalled = len({r.node for r in episode.records})
        say(printable(f"episode {number}: {stalled} node(s) stalled"))
        for record in sorted(episode.records, key=lambda r: r.stopped_by):
            say(printable(f"  {describe(record)}"))
        say(printable(f"  {episode.verdict}"))
    return 0
