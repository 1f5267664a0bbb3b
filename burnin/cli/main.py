"""``burnin`` command line: run, probe, parse, topologies, faults, sim.

Sub-commands import their modules lazily: ``burnin probe`` runs every few
minutes on production nodes and must start fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# verb -> (module with add_arguments/run, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("burnin.cli.run_cmd", "run the suites on nodes and gate them into the pool"),
    "probe": ("burnin.cli.probe_cmd", "health probe: fast read-only checks on this node, one line out"),
    "parse": ("burnin.cli.parse_cmd", "parse a tool's output into JSON"),
    "topologies": ("burnin.cli.info_cmd", "list the known node types"),
    "faults": ("burnin.cli.faults_cmd", "list the simulator's faults and the check that catches each"),
    "sim": ("burnin.cli.sim_cmd", "start, stop or fault simulated racks behind real sshd or Slurm"),
    "report": ("burnin.cli.report_cmd", "render a run's report.html again from its output folder"),
    "watch": ("burnin.cli.watch_cmd", "node daemon: evict or drain this node within a second of a GPU/IB fault"),
}

EXIT_OK, EXIT_REJECTED, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


def build_parser(verb: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="burnin",
        description="Acceptance, burn-in and health probes for bare-metal NVIDIA H100 GPU nodes.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        sub_parser = sub.add_parser(name, help=help_text, description=help_text)
        if verb is None or verb == name:
            importlib.import_module(module).add_arguments(sub_parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from burnin.errors import BurninError

    args_list = list(sys.argv[1:] if argv is None else argv)
    verb = next((a for a in args_list if not a.startswith("-")), None)
    parser = build_parser(verb if verb in COMMANDS else None)
    args = parser.parse_args(args_list)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    module = importlib.import_module(COMMANDS[args.command][0])
    try:
        code: int = module.run(args)
        return code
    except BurninError as exc:
        print(f"burnin {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"burnin {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    raise SystemExit(main())
