"""``burnin faults``: the simulator's faults, each with the check that must catch it."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print as JSON")


def run(args: argparse.Namespace) -> int:
    import json

    from burnin.sim import FAULTS

    rows = [
        {"fault": spec.name, "check": spec.check_id, "default_target": spec.default_target or "node",
         "description": spec.description}
        for spec in FAULTS.values()
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    width = max(22, *(len(row["fault"]) for row in rows))
    for row in rows:
        print(f"{row['fault']:{width}} {row['check']:8} @{row['default_target']:10} {row['description']}")
    return 0
