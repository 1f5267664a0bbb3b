"""``burnin run``: take nodes through the suites and gate them into the pool."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from burnin.cli.main import EXIT_INTERNAL, EXIT_OK, EXIT_REJECTED


def add_arguments(parser: argparse.ArgumentParser) -> None:
    target = parser.add_argument_group("nodes")
    target.add_argument("--sim", nargs="?", type=int, const=8, metavar="N",
                        help="run on N simulated nodes sim01..simNN (default 8)")
    target.add_argument("--fault", action="append", default=[], metavar="NODE:FAULT",
                        help="inject a simulator fault, e.g. sim03:nvlink-down (repeatable; see `burnin faults`)")
    parser.add_argument("--topology", default="hgx-h100-8gpu", metavar="NAME|FILE",
                        help="node type to judge against (see `burnin topologies`)")
    parser.add_argument("--suite", action="append", default=None, metavar="NAME",
                        help="suite to run (default: node)")
    parser.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help="output folder (default: reports/<run-id>)")
    parser.add_argument("-k", dest="keyword", default=None, metavar="EXPR",
                        help="only run tests matching this pytest -k expression")
    parser.add_argument("--timeout", type=float, default=120.0, metavar="S",
                        help="per-node timeout for gathering facts (default 120)")


def _default_out() -> Path:
    return Path("reports") / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())


def _dispatcher(args: argparse.Namespace, topology_name: str, out_dir: Path) -> object:
    from burnin.errors import UsageError

    if args.sim is not None:
        from burnin.dispatch.sim import SimDispatcher, parse_fault_args
        from burnin.nodes import sim_names
        from burnin.topology import find_topology

        names = sim_names(args.sim)
        faults = parse_fault_args(args.fault, names)
        return SimDispatcher(out_dir / "sim", find_topology(topology_name), names, faults)
    if args.fault:
        raise UsageError("--fault needs --sim (faults are injected into simulated nodes)")
    raise UsageError("no nodes: pass --sim [N]")


def run(args: argparse.Namespace) -> int:
    from burnin.cli.progress import Progress
    from burnin.cli.summary import print_summary
    from burnin.session import SuiteError, execute
    from burnin.topology import find_topology

    topology = find_topology(args.topology)  # validate before touching any node
    topology_ref = args.topology
    out_dir = args.out or _default_out()
    dispatcher = _dispatcher(args, topology_ref, out_dir)
    suites = args.suite or ["node"]
    started = time.monotonic()
    nodes = dispatcher.nodes  # type: ignore[attr-defined]
    with Progress(total_nodes=len(nodes)) as progress:
        try:
            result = execute(
                dispatcher,  # type: ignore[arg-type]
                topology=topology_ref, out_dir=out_dir, suites=suites, keyword=args.keyword,
                timeout=args.timeout, on_gathered=progress.node_gathered, on_test=progress.test_done,
            )
        except SuiteError as exc:
            print(f"burnin run: {exc}", file=sys.stderr)
            return EXIT_INTERNAL
        finally:
            dispatcher.close()  # type: ignore[attr-defined]
    print_summary(result, topology.name, time.monotonic() - started)
    return EXIT_OK if all(d.admitted for d in result.decisions.values()) else EXIT_REJECTED
