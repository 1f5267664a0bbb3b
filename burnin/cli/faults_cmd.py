"""``burnin faults``: the simulator's faults, each with the check that must catch it."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print as JSON")
    parser.add_argument("--markdown", action="store_true", help="print docs/faults.md's table of faults")
    parser.add_argument("--update", metavar="PAGE", default=None,
                        help="with --markdown: write the table into PAGE between its markers (docs/faults.md)")


def run(args: argparse.Namespace) -> int:
    import json

    from burnin.errors import UsageError
    from burnin.sim import FAULTS

    if args.update is not None and not args.markdown:
        raise UsageError("--update PAGE writes the --markdown table: add --markdown")
    if args.markdown:
        from pathlib import Path

        from burnin.sim import faults_doc

        if args.update is None:
            print(faults_doc.table(FAULTS.values()), end="")
            return 0
        page = Path(args.update)
        try:
            text = page.read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"--update {page}: {exc.strerror or exc}") from None
        page.write_text(faults_doc.update(text, FAULTS.values()), encoding="utf-8")
        return 0
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
