"""``burnin report RUN_DIR``: render a run's report.html again from what the run left in its folder.

It reads gate.json (required), verdicts.json, facts/, fabric.json and the
optional run.json and soak.json, and rewrites RUN_DIR/report.html. Nothing
is measured or judged again: the verdicts are the run's.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="RUN_DIR", type=Path,
                        help="a run's output folder (the --out of burnin run; holds gate.json)")


def run(args: argparse.Namespace) -> int:
    from burnin.errors import UsageError
    from burnin.report.html import render

    run_dir: Path = args.run_dir
    if not run_dir.is_dir():
        raise UsageError(f"{run_dir} is not a folder: pass a run's output folder (the --out of burnin run)")
    path = render(run_dir)
    print(f"report: {path}")
    return 0
