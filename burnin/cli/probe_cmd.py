"""``burnin probe``: the health-probe backend (Slurm HealthCheckProgram, node agents).

Exit 0 healthy, 1 a check failed, 2 something could not be measured.
"""

from __future__ import annotations

import argparse
import os
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topology", default=os.environ.get("BURNIN_TOPOLOGY", "hgx-h100-8gpu"),
                        metavar="NAME|FILE", help="node type (default: $BURNIN_TOPOLOGY or hgx-h100-8gpu)")
    from burnin.cli.argtypes import seconds

    parser.add_argument("--timeout", type=seconds, default=5.0, metavar="S", help="per-source timeout (default 5)")
    parser.add_argument("--drain", action="store_true",
                        help="on a failure, drain this node in Slurm with reason 'burnin: <ids> <cause>'")
    parser.add_argument("--undrain", action="store_true",
                        help="when healthy, resume this node, but only from a drain that burnin set")
    parser.add_argument("--json", action="store_true", help="print every verdict as JSON instead of one line")
    parser.add_argument("--baseline", action="store_true",
                        help="record the node's error counters now; later probes judge their growth since then "
                             "(until the next reboot)")


def run(args: argparse.Namespace) -> int:
    from burnin.probe import EXIT_FAIL, EXIT_OK, run_probe
    from burnin.topology.fast import find_topology_fast

    result = run_probe(find_topology_fast(args.topology), timeout=args.timeout, record_baseline=args.baseline)
    if args.json:
        import json

        print(json.dumps({"node": result.node, "exit": result.exit_code,
                          "verdicts": [v.to_json() for v in result.verdicts]}, indent=1))
    else:
        print(result.line())
    sys.stdout.flush()
    if args.drain and result.exit_code == EXIT_FAIL:
        from burnin.gate.slurm import drain

        drain(result.node, result.drain_reason())
    elif args.undrain and result.exit_code == EXIT_OK:
        from burnin.gate.slurm import resume_if_ours

        resume_if_ours(result.node)
    return result.exit_code
