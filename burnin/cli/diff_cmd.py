"""``burnin diff [RUN_A] [RUN_B]``: what changed between two runs, from the history database.

Without runs named, the last run and the latest run before it over the same nodes. It prints only changes:
nodes newly failing a check (with what it measured), newly admitted, newly incomplete, and measurements that
moved by more than ``--tolerance`` (``sim04 NCCL-03 362 -> 338 GB/s (-6.6%)``). Exit 0; 2 on a history that
cannot be read or a run it does not hold (one line).
"""

from __future__ import annotations

import argparse
import json
import sys

from burnin.cli.history_cmd import drop_fraction


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from burnin.cli.history_db import add_history_argument

    parser.add_argument("runs", nargs="*", metavar="RUN",
                        help="two runs (a number from `burnin history --runs`, or a run's output folder); "
                             "default: the last run and the latest one before it over the same nodes")
    add_history_argument(parser)
    parser.add_argument("--tolerance", type=drop_fraction, default=0.05, metavar="FRACTION",
                        help="report a measurement that moved by more than this (default 5%%)")
    parser.add_argument("--json", action="store_true", help="print the changes as JSON")


def run(args: argparse.Namespace) -> int:
    from burnin.errors import UsageError

    if len(args.runs) not in (0, 2):  # before the history's modules: a usage error costs nothing
        raise UsageError(f"name two runs or none, not {len(args.runs)}")
    from burnin.cli.history_db import open_store, problem_text, say
    from burnin.history.compare import default_pair, diff
    from burnin.history.query import find_run
    from burnin.history.records import time_text
    from burnin.nodes import fold

    with open_store(args) as store:
        if args.runs:
            before, after = find_run(store, args.runs[0]), find_run(store, args.runs[1])
        else:
            before, after = default_pair(store)
        changes = diff(store, before, after, tolerance=args.tolerance)
    if args.json:
        document = {
            "before": {"run": before.id, "out_dir": before.out_dir, "started": time_text(before.started)},
            "after": {"run": after.id, "out_dir": after.out_dir, "started": time_text(after.started)},
            "newly_failing": {n: [{"check": p.check, "measured": p.measured, "reason": p.reason} for p in found]
                              for n, found in changes.newly_failing.items()},
            "newly_admitted": changes.newly_admitted,
            "newly_incomplete": changes.newly_incomplete,
            "moved": [{"node": m.node, "check": m.check, "before": m.before, "after": m.after, "unit": m.unit}
                      for m in changes.moved],
            "tolerance": args.tolerance,
        }
        sys.stdout.write(json.dumps(document, indent=1) + "\n")
        return 0
    say(f"burnin diff: run {before.id} ({time_text(before.started)}) -> run {after.id} ({time_text(after.started)}), "
        f"{len(changes.nodes)} nodes in both")
    if changes.only_before or changes.only_after:
        say(f"not compared: only in run {before.id}: {fold(changes.only_before) or '-'}; only in run {after.id}: "
            f"{fold(changes.only_after) or '-'}")
    if changes.empty:
        say("no change")
    for node, found in changes.newly_failing.items():
        say(f"newly failing {node}: {','.join(p.check for p in found)}")
        for problem in found:
            say(f"    {problem_text(problem)}")
    if changes.newly_admitted:
        say(f"newly admitted: {fold(changes.newly_admitted)}")
    for node, checks in changes.newly_incomplete.items():
        say(f"newly incomplete {node}: {','.join(checks)}")
    for moved in changes.moved:
        say(f"moved {moved.text()}")
    return 0
