"""``burnin report RUN_DIR``: render a run's report.html again from what the run left in its folder.

It reads gate.json (required), verdicts.json, facts/, fabric.json and the
optional run.json and soak.json, and rewrites RUN_DIR/report.html. Nothing
is measured or judged again: the verdicts are the run's. A folder that a run
or soak still owns is refused (exit 2): that run writes its report itself
when it ends, and the folder has one owner.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="RUN_DIR", type=Path,
                        help="a run's output folder (the --out of burnin run; holds gate.json)")


def run(args: argparse.Namespace) -> int:
    from burnin.errors import UsageError
    from burnin.outdir import own
    from burnin.report.html import render

    run_dir: Path = args.run_dir
    if not run_dir.is_dir():
        raise UsageError(f"{run_dir} is not a folder: pass a run's output folder (the --out of burnin run)")
    with own(run_dir, ["burnin", *sys.argv[1:]], flag=""):
        path = render(run_dir)
    print(f"report: {path}")
    return 0
