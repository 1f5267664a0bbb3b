"""``burnin topologies``: the known node types."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--check", metavar="NAME|FILE", help="validate one topology and print its summary")


def run(args: argparse.Namespace) -> int:
    from burnin.topology.load import find_topology, list_topologies

    if args.check:
        topo = find_topology(args.check)
        print(f"{topo.name}: {topo.gpus.count} x {topo.gpus.model}, {len(topo.compute_hcas)} compute HCAs, "
              f"{len(topo.storage_hcas)} storage HCAs, {len(topo.references)} references: ok")
        return 0
    for name, path in list_topologies().items():
        try:
            description = find_topology(str(path)).description
        except Exception as exc:  # noqa: BLE001 - list the broken file, do not stop
            description = f"INVALID: {exc}"
        print(f"{name:24} {description}  ({path})")
    return 0
