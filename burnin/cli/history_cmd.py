"""``burnin history``: a node's timeline, a check's failures, trends and past runs, from the history database
(:mod:`burnin.cli.history_db`), and the fleet's reliability from run folders (REL-01/REL-02).

``burnin history NODE`` (a node's runs, failed checks with what they measured, gate actions, trends),
``--check ID``, ``--runs``, ``--trends`` and ``burnin history import PATH...`` ask or fill the database.
``burnin history RUN...`` (run folders, which exist as paths) reads each run's ``gate.json`` (a run folder,
the file itself, or a folder of run folders such as ``reports/``) and the watch's journals (``--journal``), and
prints per node the failures attributed to it, MTTR, availability and lemon
nodes, then the fleet's figures. ``--json FILE`` writes everything as JSON
(``-``: to stdout, instead of the table). Exit 0; 2 on a file that is not what
it should be (one line naming it). A bad record in a good file (a torn journal
line, an impossible time) is skipped, and a node admitted with failed checks is
counted as rejected: each is one warning line on stderr, naming the file.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from burnin.argtypes import positive_int

if TYPE_CHECKING:
    from burnin.history.load import Inputs
    from burnin.history.metrics import FleetHistory

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
MAX_WINDOW_DAYS = 3650


def window(text: str) -> float:
    """``30d``, ``72h``, ``90m``, ``3600s`` or a number of days -> seconds (above 0, at most ten years)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text)
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a time window (30d, 72h, 90m, 3600s)")
    seconds = float(match.group(1)) * _UNITS[match.group(2) or "d"]
    if seconds <= 0 or seconds > MAX_WINDOW_DAYS * _UNITS["d"]:
        raise argparse.ArgumentTypeError(f"{text!r}: a window must be above 0 and at most {MAX_WINDOW_DAYS} days")
    return seconds


def drop_fraction(text: str) -> float:
    """``5%`` or ``0.05`` -> 0.05 (above 0, below 1)."""
    try:
        value = float(text.strip().removesuffix("%")) / (100 if text.strip().endswith("%") else 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction (5% or 0.05)") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: must be above 0 and below 100%")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from burnin.cli.history_db import add_history_argument

    parser.add_argument("paths", nargs="*", type=Path, metavar="NODE|RUN",
                        help="a node name (its timeline from the history database); or `import` and run folders; "
                             "or run folders to read directly (a run's output folder, a gate.json, or a folder of "
                             "run folders)")
    add_history_argument(parser)
    parser.add_argument("--check", metavar="ID", help="where and how often the check failed (history database)")
    parser.add_argument("--runs", action="store_true", help="list the runs in the history database")
    parser.add_argument("--trends", action="store_true",
                        help="measurements falling steadily over each node's last runs (history database)")
    parser.add_argument("--trend-runs", type=positive_int, default=5, metavar="N",
                        help="a trend spans a node's last N runs (default 5)")
    parser.add_argument("--trend-drop", type=drop_fraction, default=0.05, metavar="FRACTION",
                        help="a trend falls by more than this in all (default 5%%)")
    parser.add_argument("--journal", action="append", type=Path, default=[], metavar="FILE",
                        help="a burnin watch journal (events.jsonl, or its state folder): each drain or eviction "
                             "is a rejection (repeatable)")
    parser.add_argument("--json", dest="json_out", metavar="FILE",
                        help="write the history as JSON to FILE ('-': to stdout instead of the table)")
    parser.add_argument("--lemon-failures", type=positive_int, default=3, metavar="K",
                        help="a lemon node has at least K attributed failures within the window (default 3)")
    parser.add_argument("--lemon-window", type=window, default=window("30d"), metavar="TIME",
                        help="the lemon window: 30d, 72h, ... (a bare number is days; default 30d)")
    parser.add_argument("--all", action="store_true", help="list every node, not only those that left the pool")


def _table(fleet: FleetHistory, every_node: bool) -> Any:
    from rich.table import Table
    from rich.text import Text

    from burnin.history.document import duration_text, percent
    from burnin.history.records import stamp
    from burnin.text import printable

    table = Table(expand=False)
    for column in ("node", "failures", "checks", "outages", "MTTR", "availability", "lemon", "out since"):
        table.add_column(column, justify="right" if column in ("failures", "outages", "MTTR", "availability")
                         else "left")
    for node, history in fleet.nodes.items():
        if not (every_node or history.outages):
            continue
        checks = sorted({c for o in history.failures for c in o.failed})
        lemon = history.lemon
        table.add_row(Text(printable(node, limit=60)), str(len(history.failures)),
                      Text(printable(",".join(checks), limit=80)), str(len(history.outages)),
                      duration_text(history.mttr_s), percent(history.availability),
                      Text("LEMON" if lemon else "", style="bold red"),
                      "" if history.out_since is None else stamp(history.out_since))
    return table


def _print(fleet: FleetHistory, inputs: Inputs, every_node: bool) -> None:
    from rich.console import Console
    from rich.text import Text

    from burnin.history.document import duration_text, percent
    from burnin.history.records import stamp
    from burnin.nodes import fold
    from burnin.text import printable

    console = Console(file=sys.stdout, width=None if sys.stdout.isatty() else 160, highlight=False)

    def say(text: str) -> None:
        console.print(Text(printable(text)), soft_wrap=True)

    say(f"burnin history: {len(fleet.nodes)} nodes, {len(inputs.runs)} runs and {len(inputs.journals)} journals, "
        f"from {stamp(fleet.start)} to {stamp(fleet.end)} ({duration_text(fleet.end - fleet.start)})")
    left_pool = [n for n, h in fleet.nodes.items() if h.outages]
    if left_pool or every_node:
        console.print(_table(fleet, every_node))
    if not every_node:
        say(f"never out of the pool: {len(fleet.nodes) - len(left_pool)} nodes")
    by_check = ", ".join(f"{check} {count}" for check, count in sorted(fleet.failures_by_check.items()))
    rate = fleet.failures_per_1000_node_days
    say(f"fleet: {fleet.failures} failures attributed" + (f" ({by_check})" if by_check else "") +
        f"; {'-' if rate is None else f'{rate:.1f}'} per 1000 node-days in the pool; MTTR "
        f"{duration_text(fleet.mttr_s)}; availability {percent(fleet.availability)}")
    window_text = duration_text(fleet.lemon_window_s)
    lemons = [f"{node} ({h.lemon.failures} failures {stamp(h.lemon.first)} .. {stamp(h.lemon.last)})"
              for node, h in fleet.nodes.items() if h.lemon is not None]
    say(f"lemons (>= {fleet.lemon_failures} failures within {window_text}): " + ("; ".join(lemons) or "none"))
    say(f"out of the pool now: {fold(fleet.out_now) or 'none'}")


def run(args: argparse.Namespace) -> int:
    from burnin.cli import history_db
    from burnin.errors import UsageError

    paths: list[Path] = list(args.paths)
    if paths and str(paths[0]) == "import":
        return history_db.do_import(args, paths[1:])
    asked = [flag for flag in ("check", "runs", "trends") if getattr(args, flag)]
    if len(paths) == 1 and not asked and not args.journal and not _names_a_path(paths[0]):
        with history_db.open_store(args) as store:
            history_db.print_timeline(store, str(paths[0]), args.trend_runs, args.trend_drop)
        return 0
    if asked:
        if paths or len(asked) > 1:
            raise UsageError(f"--{asked[0]} takes no NODE or RUN and no other question")
        with history_db.open_store(args) as store:
            if args.check:
                history_db.print_check(store, args.check)
            elif args.runs:
                history_db.print_runs(store)
            else:
                history_db.print_trends(store, args.trend_runs, args.trend_drop)
        return 0
    if not paths:
        raise UsageError("name a NODE, or --check ID, --runs, --trends, `import RUN...`, or run folders (RUN...)")
    return _read_folders(args)


def _names_a_path(path: Path) -> bool:
    """A positional that is a run folder or file (it exists, or it is written as a path), not a node name."""
    return path.exists() or "/" in str(path) or str(path) in (".", "..")


def _read_folders(args: argparse.Namespace) -> int:
    import json

    from burnin.atomic import write_text_atomic
    from burnin.errors import UsageError
    from burnin.history.document import history_document
    from burnin.history.load import collect
    from burnin.history.metrics import fleet_history
    from burnin.text import printable

    inputs = collect(args.paths, args.journal)
    for skipped in inputs.skipped:
        print(printable(f"burnin history: skipped {skipped.path}: {skipped.reason}"), file=sys.stderr)
    for odd in inputs.inconsistent:
        print(printable(f"burnin history: inconsistent {odd.path}: node {odd.node} {odd.reason}"), file=sys.stderr)
    if not inputs.observations:
        raise UsageError("no run to read: " + ("every one was skipped" if inputs.skipped else
                                               "no gate.json and no journal entry found"))
    fleet = fleet_history(inputs.observations, lemon_failures=args.lemon_failures,
                          lemon_window_s=args.lemon_window)
    document = json.dumps(history_document(fleet, inputs), indent=1) + "\n"
    if args.json_out == "-":
        sys.stdout.write(document)
        return 0
    if args.json_out is not None:
        target = Path(args.json_out)
        try:
            write_text_atomic(target, document)
        except OSError as exc:
            raise UsageError(f"--json {printable(str(target))}: cannot write ({exc.strerror or exc})") from None
    _print(fleet, inputs, args.all)
    if args.json_out is not None:
        print(f"history: {args.json_out}")
    return 0
