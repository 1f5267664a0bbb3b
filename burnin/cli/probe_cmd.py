"""``burnin probe``: the health-probe backend (Slurm HealthCheckProgram, node agents).

Exit 0 healthy, 1 a check failed, 2 something could not be measured.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from burnin.gate.registry import Gate
    from burnin.probe import ProbeResult


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topology", default=os.environ.get("BURNIN_TOPOLOGY", "hgx-h100-8gpu"),
                        metavar="NAME|FILE", help="node type (default: $BURNIN_TOPOLOGY or hgx-h100-8gpu)")
    from burnin.argtypes import seconds

    parser.add_argument("--timeout", type=seconds, default=5.0, metavar="S", help="per-source timeout (default 5)")
    parser.add_argument("--drain", action="store_true",
                        help="on a failure, take this node out of the pool (Slurm: drain it with reason "
                             "'burnin: <ids> <cause>')")
    parser.add_argument("--undrain", action="store_true",
                        help="when healthy, put this node back, but only from a drain that burnin set for "
                             "checks the probe runs")
    parser.add_argument("--gate", default="slurm", metavar="NAME",
                        help="the gate --drain and --undrain act through (default slurm; see burnin.gate.registry)")
    parser.add_argument("--json", action="store_true", help="print every verdict as JSON instead of one line")
    parser.add_argument("--baseline", action="store_true",
                        help="record the node's error counters now; later probes judge their growth since then "
                             "(until the next reboot)")
    parser.add_argument("--metrics", type=Path, metavar="FILE",
                        help="also write the verdicts and measurements as a Prometheus textfile "
                             "(e.g. node_exporter's textfile folder/burnin.prom), atomically")


def run(args: argparse.Namespace) -> int:
    from burnin.probe import EXIT_FAIL, EXIT_OK, run_probe
    from burnin.topology.fast import find_topology_fast

    if args.drain or args.undrain:
        _check_gate(args.gate)  # a wrong name is a usage error before probing
    result = run_probe(find_topology_fast(args.topology), timeout=args.timeout, record_baseline=args.baseline)
    if args.json:
        import json

        print(json.dumps({"node": result.node, "exit": result.exit_code,
                          "verdicts": [v.to_json() for v in result.verdicts]}, indent=1))
    else:
        print(result.line())
    sys.stdout.flush()
    # Act before reporting: nothing the metrics writer meets may keep a failing node in the pool.
    if args.drain and result.exit_code == EXIT_FAIL:
        _gate(args.gate).drain(result.node, result.drain_reason())
    elif args.undrain and result.exit_code == EXIT_OK:
        # only for the checks the probe judged: a node drained for a check it does not run stays drained
        _gate(args.gate).resume(result.node, passed=[v.check_id for v in result.verdicts if v.passed])
    if args.metrics is not None:
        _write_metrics(args.metrics, result)
    return result.exit_code


def _check_gate(name: str) -> None:
    from burnin.errors import UsageError
    from burnin.gate.registry import GATES

    if name not in GATES:
        raise UsageError(f"--gate {name!r}: unknown gate (known: {', '.join(GATES)})")


def _gate(name: str) -> Gate:
    """The gate, imported only once the probe has something for it to do."""
    from burnin.gate.registry import find_gate

    return find_gate(name)


def _write_metrics(path: Path, result: ProbeResult) -> None:
    """The textfile, written atomically, after the verdict was acted on; whatever stops it is reported on
    one line, and the verdict (the exit code) stands."""
    import time

    from burnin.probe import metrics_text
    from burnin.report.metrics import write_textfile
    from burnin.text import printable

    try:
        write_textfile(path, metrics_text(result, timestamp=time.time()))
    except OSError as exc:
        print(printable(f"burnin probe: --metrics {path}: cannot write it ({exc.strerror or exc})"), file=sys.stderr)
    except Exception as exc:  # noqa: BLE001 - the textfile is a report: the verdict and the drain stand
        print(printable(f"burnin probe: --metrics {path}: not written ({type(exc).__name__}: {exc})"),
              file=sys.stderr)
