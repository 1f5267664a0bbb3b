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
    target.add_argument("--via", choices=("ssh", "slurm"), default=None,
                        help="dispatch to real nodes over SSH or through Slurm")
    target.add_argument("--hosts", metavar="NODESET", help="ssh: nodes to run on, e.g. rack12-n[01-32]")
    target.add_argument("--inventory", type=Path, metavar="FILE", help="ssh: inventory YAML (nodes, groups)")
    target.add_argument("--ssh-config", type=Path, metavar="FILE",
                        help="ssh: ssh_config to honour (default ~/.ssh/config)")
    target.add_argument("--accept-new-host-keys", action="store_true",
                        help="ssh: accept and record unknown host keys (like OpenSSH accept-new); "
                             "changed keys still fail")
    target.add_argument("--fanout", type=int, default=64, metavar="N", help="ssh: nodes in flight at once (default 64)")
    target.add_argument("--nodes", metavar="NODESET", help="slurm: nodes to run on (default: $SLURM_JOB_NODELIST)")
    target.add_argument("--partition", metavar="P", help="slurm: partition")
    target.add_argument("--reservation", metavar="R", help="slurm: reservation")
    target.add_argument("--collector", metavar="PATH",
                        help="slurm: collector zipapp already on the nodes (default: ship it with sbcast)")
    gate = parser.add_argument_group("gate")
    gate.add_argument("--gate", choices=("none", "slurm"), default="none",
                      help="act on the verdicts: slurm drains rejected nodes and resumes burnin-drained healthy ones")
    gate.add_argument("--dry-run", action="store_true", help="print the scontrol commands instead of running them")
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
    fabric = parser.add_argument_group("fabric suite")
    fabric.add_argument("--localize", action="store_true",
                        help="fabric: name bad nodes by pairwise runs even when the multi-node run passes")
    fabric.add_argument("--fabric-config", type=Path, metavar="FILE",
                        help="fabric: site settings YAML (tools, launcher, sizes; see docs/fabric.md)")


def _default_out() -> Path:
    return Path("reports") / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())


def _dispatcher(args: argparse.Namespace, topology_name: str, out_dir: Path) -> object:
    from burnin.errors import UsageError

    if args.sim is not None:
        from burnin.dispatch.sim import SimDispatcher, parse_fault_args, scratch_dir
        from burnin.nodes import sim_names
        from burnin.topology.load import find_topology

        names = sim_names(args.sim)
        faults = parse_fault_args(args.fault, names)
        return SimDispatcher(scratch_dir(), find_topology(topology_name), names, faults, owned=True)
    if args.fault:
        raise UsageError("--fault needs --sim (faults are injected into simulated nodes)")
    if args.via == "ssh":
        from burnin.dispatch.ssh import SshDispatcher

        return SshDispatcher.from_args(args, topology_name)
    if args.via == "slurm":
        from burnin.dispatch.slurm import SlurmDispatcher

        return SlurmDispatcher.from_args(args, topology_name, out_dir)
    raise UsageError("no nodes: pass --sim [N], --via ssh --hosts/--inventory, or --via slurm")


def _partial_reason(gate_doc: dict[str, object]) -> str | None:
    """Why gate.json says the run is partial (None: it judged every check)."""
    if not gate_doc.get("partial"):
        return None
    reasons = gate_doc.get("partial_reasons")
    return "; ".join(map(str, reasons)) if isinstance(reasons, list) and reasons else "gate.json says so"


def _refuse_partial_gate(gate: str, partial: str | None) -> None:
    """A gate acts only on a run that judged every check: refuse a partial one (exit 2, one line)."""
    from burnin.errors import UsageError

    if gate != "none" and partial:
        raise UsageError(f"--gate {gate} refuses a partial run ({partial}): "
                         "only a run that judged every check may drain or resume nodes")


def run(args: argparse.Namespace) -> int:
    from burnin.cli.progress import Progress
    from burnin.cli.summary import print_summary
    from burnin.fabric.phase import FabricOptions
    from burnin.session import SuiteError, execute
    from burnin.topology.load import find_topology

    topology = find_topology(args.topology)  # validate before touching any node
    _refuse_partial_gate(args.gate, args.keyword and f"-k {args.keyword!r} selects a subset of the checks")
    topology_ref = args.topology
    out_dir = args.out or _default_out()
    dispatcher = _dispatcher(args, topology_ref, out_dir)
    suites = args.suite or ["node"]
    fabric = FabricOptions(args.fabric_config, args.localize) if "fabric" in suites else None
    started = time.monotonic()
    nodes = dispatcher.nodes  # type: ignore[attr-defined]
    with Progress(total_nodes=len(nodes)) as progress:
        try:
            result = execute(
                dispatcher,  # type: ignore[arg-type]
                topology=topology_ref, out_dir=out_dir, suites=suites, keyword=args.keyword,
                timeout=args.timeout, on_gathered=progress.node_gathered, on_test=progress.test_done,
                fabric=fabric,
            )
        except SuiteError as exc:
            print(f"burnin run: {exc}", file=sys.stderr)
            return EXIT_INTERNAL
        finally:
            dispatcher.close()  # type: ignore[attr-defined]
    from burnin.report.html import render

    render(result.out_dir)
    print_summary(result, topology.name, time.monotonic() - started)
    if args.gate == "slurm":
        from burnin.gate.slurm import apply_gate

        _refuse_partial_gate(args.gate, _partial_reason(result.gate))

        apply_gate(result.decisions, dry_run=args.dry_run)
    return EXIT_OK if all(d.admitted for d in result.decisions.values()) else EXIT_REJECTED
