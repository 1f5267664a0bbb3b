"""``burnin topologies``: the known node types."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--check", metavar="NAME|FILE", help="validate one topology and print its summary")
    parser.add_argument("--from-facts", metavar="FILE",
                        help="draft a topology (YAML on stdout) from a known-good node's facts, e.g. "
                             "OUT/facts/NODE.json of a run; review it before use")
    parser.add_argument("--name", default=None, help="with --from-facts: the new topology's name")
    parser.add_argument("--base", default="hgx-h100-8gpu", metavar="NAME|FILE",
                        help="with --from-facts: topology whose thresholds are the starting point")


def run(args: argparse.Namespace) -> int:
    from burnin.checks import unjudgeable_checks
    from burnin.topology.load import find_topology, list_topologies

    if args.from_facts:
        return _draft(args)
    if args.check:
        topo = find_topology(args.check)
        print(f"{topo.name}: {topo.gpus.count} x {topo.gpus.model}, {len(topo.compute_hcas)} compute HCAs, "
              f"{len(topo.storage_hcas)} storage HCAs, {len(topo.references)} references: ok")
        for check_id, reason in unjudgeable_checks(topo).items():
            print(f"  cannot judge {check_id}: {reason} (it will be incomplete)")
        return 0
    for name, path in list_topologies().items():
        try:
            topo = find_topology(str(path))
            description = topo.description
            unjudgeable = unjudgeable_checks(topo)
            if unjudgeable:
                description += f" [cannot judge {', '.join(unjudgeable)}]"
        except Exception as exc:  # noqa: BLE001 - list the broken file, do not stop
            description = f"INVALID: {exc}"
        print(f"{name:24} {description}  ({path})")
    return 0


def _draft(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    import yaml

    from burnin.errors import UsageError
    from burnin.facts import Facts
    from burnin.golden import draft_topology
    from burnin.topology.load import find_topology

    path = Path(args.from_facts)
    try:
        facts = Facts(path.stem, json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read facts {path}: {exc}") from None
    doc = draft_topology(facts, find_topology(args.base), args.name or f"{path.stem}-golden")
    print(f"# Drafted by `burnin topologies --from-facts {path}`: review every value before use.")
    print(yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=110), end="")
    return 0
