"""``burnin checks``: the check catalog, read from the check registry, the suites, the faults and the topologies."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topology", metavar="NAME|FILE",
                        help="show this node type's thresholds (with their sources) under each check")
    form = parser.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="print the catalog as JSON")
    form.add_argument("--markdown", action="store_true",
                      help="print docs/checks.md (every shipped node type's thresholds)")


def run(args: argparse.Namespace) -> int:
    import json
    import os
    import sys

    from burnin.report import catalog

    if args.topology:
        from burnin.topology.load import find_topology

        topologies = [find_topology(args.topology)]
    else:
        topologies = catalog.shipped_topologies()
    entries = catalog.build(topologies)
    if args.json:
        text = json.dumps([e.to_json() for e in entries], indent=1) + "\n"
    elif args.markdown:
        text = catalog.markdown(entries, [t.name for t in topologies])
    else:
        text = catalog.text(entries, topologies[0].name if args.topology else None)
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # `burnin checks | head`: the reader has what it wanted
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the exit flush goes nowhere
        os.close(devnull)
    return 0
