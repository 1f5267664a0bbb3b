"""``burnin history`` asking the history database: a node's timeline, a check's failures, the runs, the
trends, and ``burnin history import PATH...`` (past run folders and journals into it).

Shared by ``burnin diff`` and ``burnin reliability``: ``--history FILE|URL`` (default ``$BURNIN_HISTORY``, else
``history.sqlite`` in burnin's state directory; a ``postgresql://`` URL names a PostgreSQL database) and how a
store is opened for reading (a file that is missing, not SQLite or of a newer schema, a server that cannot be
reached, is one line and exit 2).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from burnin.history.compare import Trend
    from burnin.history.query import Problem, TimelineEntry
    from burnin.history.store import Store


def history_target(text: str) -> Path | str:
    """``--history``: a ``postgresql://`` URL as it is, anything else a SQLite file's path."""
    from burnin.history.backend import is_url

    return text if is_url(text) else Path(text)


def add_history_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--history", type=history_target, default=None, metavar="FILE|URL",
                        help="the history database: a SQLite file or a postgresql://USER@HOST/DB URL (default: "
                             "$BURNIN_HISTORY, else history.sqlite in burnin's state directory: /var/lib/burnin "
                             "as root, $BURNIN_STATE_DIR if set)")


def open_store(args: argparse.Namespace, *, create: bool = False) -> Store:
    from burnin.history.store import open_history

    return open_history(args.history, create=create)


def say(text: str) -> None:
    from burnin.text import printable

    print(printable(text))


def problem_text(problem: Problem) -> str:
    detail = problem.reason or problem.measured or "(no reason recorded)"
    if problem.expected and problem.expected not in detail:
        detail += f" (expected {problem.expected})"
    prefix = "" if detail.startswith(problem.check) else f"{problem.check} "
    return f"{prefix}{detail}" + ("" if problem.status == "fail" else f" [{problem.status}]")


def _entry_line(entry: TimelineEntry) -> str:
    from burnin.history.records import time_text

    state = entry.state
    what = state.verdict
    if state.failed:
        what += f": failed {','.join(state.failed)}"
    if state.incomplete:
        what += ("; " if state.failed else ": ") + f"incomplete {','.join(state.incomplete)}"
    run_state = "" if entry.run.state == "complete" else f" [run {entry.run.state}]"
    return f"{time_text(entry.run.started)}  run {entry.run.id:<5} {what}{run_state}  {entry.run.out_dir}"


def print_timeline(store: Store, node: str, trend_runs: int, trend_drop: float) -> None:
    from burnin.history.compare import trends
    from burnin.history.query import timeline
    from burnin.history.records import time_text

    found = timeline(store, node)
    runs = len(found.entries)
    rejected = sum(not e.state.admitted for e in found.entries)
    say(f"burnin history {node}: {runs} runs ({rejected} not admitted), {len(found.actions)} gate actions, "
        f"{len(found.incidents)} watch incidents (history: {store.path})")
    events: list[tuple[float, int, list[str]]] = []
    for entry in found.entries:
        lines = [_entry_line(entry)]
        lines += [f"    {problem_text(p)}" for p in entry.problems]
        if not entry.problems and entry.state.reason and not entry.state.admitted:
            lines.append(f"    {entry.state.reason}")
        events.append((entry.run.started, 0, lines))
    for action in found.actions:
        text = f"{time_text(action.at)}  {action.action} {action.checks}".rstrip()
        events.append((action.at, 1, [text + (f": {action.reason}" if action.reason else "") +
                                      (f"  [{action.source}]" if action.source else "")]))
    for incident in found.incidents:
        text = f"{time_text(incident.at)}  incident {incident.kind} {incident.check} {incident.action}"
        events.append((incident.at, 2, [text + (f": {incident.detail}" if incident.detail else "") +
                                        (f"  [{incident.source}]" if incident.source else "")]))
    for _, _, lines in sorted(events, key=lambda e: (e[0], e[1])):
        for line in lines:
            say(line)
    for trend in trends(store, node=node, last=trend_runs, drop=trend_drop):
        say(trend.text())


def print_check(store: Store, check: str) -> None:
    from burnin.history.query import check_history
    from burnin.history.records import time_text

    found = check_history(store, check)
    fails = sum(p.status == "fail" for p in found.problems)
    incompletes = len(found.problems) - fails
    by_node = found.by_node()
    say(f"burnin history --check {check}: failed {fails} times and incomplete {incompletes} times on "
        f"{len(by_node)} nodes, in {found.runs} recorded runs")
    for node, counts in by_node.items():
        say(f"  {node}: {counts['fail']} failed, {counts['incomplete']} incomplete")
    for problem in found.problems:
        say(f"{time_text(problem.at)}  run {problem.run:<5} {problem.node}  {problem_text(problem)}")


def print_runs(store: Store) -> None:
    from burnin.history.query import runs
    from burnin.history.records import time_text

    recorded = runs(store)
    say(f"burnin history --runs: {len(recorded)} runs (history: {store.path})")
    for run in recorded:
        say(f"run {run.id:<5} {time_text(run.started)}  {run.kind:<6} {run.nodes:>5} nodes  {run.state:<12} "
            f"{run.out_dir}")


def print_trends(store: Store, trend_runs: int, trend_drop: float) -> list[Trend]:
    from burnin.history.compare import trends

    found = trends(store, last=trend_runs, drop=trend_drop)
    say(f"burnin history --trends: {len(found)} measurements falling over the last {trend_runs} runs "
        f"by more than {100 * trend_drop:g}%")
    for trend in found:
        say(trend.text())
    return found


def do_import(args: argparse.Namespace, paths: list[Path]) -> int:
    from burnin.errors import UsageError
    from burnin.history.importer import import_paths
    from burnin.text import printable

    if not paths and not args.journal:
        raise UsageError("history import: name run folders (reports/) or --journal FILE to import")
    with open_store(args, create=True) as store:
        result = import_paths(store, paths, args.journal)
    for skipped in result.inputs.skipped:
        print(printable(f"burnin history: skipped {skipped.path}: {skipped.reason}"), file=sys.stderr)
    say(f"burnin history import: {result.runs} runs ({result.verdicts} verdicts) and {result.actions} gate actions "
        f"added, {result.runs_known} runs and {result.actions_known} actions already there (history: "
        f"{store.path})")
    return 0
