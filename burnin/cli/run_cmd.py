"""``burnin run``: take nodes through the suites and gate them into the pool."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from burnin.cli.argtypes import positive_int, seconds
from burnin.cli.main import EXIT_INTERNAL, EXIT_OK, EXIT_REJECTED

if TYPE_CHECKING:
    from burnin.topology.model import Topology


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
    target.add_argument("--fanout", type=positive_int, default=64, metavar="N",
                        help="ssh: nodes in flight at once (default 64)")
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
    parser.add_argument("--timeout", type=seconds, default=120.0, metavar="S",
                        help="per-node timeout for gathering facts (default 120)")
    fabric = parser.add_argument_group("fabric suite")
    fabric.add_argument("--localize", action="store_true",
                        help="fabric: name bad nodes by pairwise runs even when the multi-node run passes")
    fabric.add_argument("--fabric-config", type=Path, metavar="FILE",
                        help="fabric: site settings YAML (tools, launcher, sizes; see docs/fabric.md)")


def _default_out() -> Path:
    return Path("reports") / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())


def _check_arguments(args: argparse.Namespace, suites: list[str]) -> None:
    """Usage errors that argparse cannot see, found before any node is touched."""
    from burnin.errors import UsageError

    if args.keyword is not None:
        _check_keyword(args.keyword)
    if "fabric" not in suites:
        for flag, given in (("--fabric-config", args.fabric_config is not None), ("--localize", args.localize)):
            if given:
                raise UsageError(f"{flag} applies to the fabric suite only: add --suite fabric")
    if args.fabric_config is not None and not args.fabric_config.is_file():
        raise UsageError(f"--fabric-config {args.fabric_config}: no such file")


def _check_keyword(expression: str) -> None:
    """A ``-k`` expression pytest cannot parse is a usage error now, not a failed run after gathering."""
    from burnin.errors import UsageError

    try:
        from _pytest.mark import expression as pytest_expression
    except ImportError:  # pytest's private module moved: pytest itself reports it later
        return
    parse_error = getattr(pytest_expression, "ParseError", SyntaxError)  # pytest < 9: ParseError
    try:
        pytest_expression.Expression.compile(expression)
    except (SyntaxError, parse_error) as exc:
        raise UsageError(f"-k {expression!r}: not a valid expression ({exc})") from None


def _prepare_out(out_dir: Path) -> list[Path]:
    """Create the output folder (an existing file or an unwritable place is a usage error).

    Returns the folders it created, so a run that stops before writing anything
    can remove them again.
    """
    import tempfile

    from burnin.errors import UsageError

    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"--out {out_dir}: exists and is not a folder")
    created = [p for p in (out_dir, *out_dir.parents) if not p.exists()]
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out_dir):
            pass
    except OSError as exc:
        _remove_empty(created)
        raise UsageError(f"--out {out_dir}: cannot write there ({exc.strerror or exc})") from None
    return created


def _remove_empty(folders: list[Path]) -> None:
    for folder in folders:  # deepest first
        try:
            folder.rmdir()
        except OSError:
            return


def _dispatcher(args: argparse.Namespace, topology: Topology, out_dir: Path) -> object:
    from burnin.errors import UsageError

    topology_name = args.topology
    if args.sim is not None:
        from burnin.dispatch.sim import SimDispatcher, parse_fault_args, scratch_dir
        from burnin.nodes import sim_names

        names = sim_names(args.sim)
        faults = parse_fault_args(args.fault, names)
        return SimDispatcher(scratch_dir(), topology, names, faults, owned=True)
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
    from burnin.cli.interrupt import raise_if_received
    from burnin.cli.progress import Progress
    from burnin.cli.summary import print_summary
    from burnin.fabric.phase import FabricOptions
    from burnin.session import SuiteError, execute
    from burnin.topology.load import find_topology

    suites = args.suite or ["node"]
    _check_arguments(args, suites)
    topology = find_topology(args.topology)  # validate before touching any node
    _refuse_partial_gate(args.gate, args.keyword and f"-k {args.keyword!r} selects a subset of the checks")
    topology_ref = args.topology
    out_dir = args.out or _default_out()
    created = _prepare_out(out_dir)
    try:
        dispatcher = _dispatcher(args, topology, out_dir)
    except BaseException:
        _remove_empty(created)
        raise
    try:  # from here on the dispatcher is closed (scratch removed, allocation released) whatever happens
        fabric = FabricOptions(args.fabric_config, args.localize) if "fabric" in suites else None
        started = time.monotonic()
        with Progress(total_nodes=len(dispatcher.nodes)) as progress:  # type: ignore[attr-defined]
            result = execute(
                dispatcher,  # type: ignore[arg-type]
                topology=topology_ref, out_dir=out_dir, suites=suites, keyword=args.keyword,
                timeout=args.timeout, on_gathered=progress.node_gathered, on_test=progress.test_done,
                fabric=fabric,
            )
    except SuiteError as exc:
        raise_if_received()  # pytest stopped on SIGINT/SIGTERM: report the interrupt, not pytest
        print(f"burnin run: {exc}", file=sys.stderr)
        return EXIT_INTERNAL
    finally:
        dispatcher.close()  # type: ignore[attr-defined]
    raise_if_received()
    from burnin.report.html import render

    render(result.out_dir)
    print_summary(result, topology.name, time.monotonic() - started)
    if args.gate == "slurm":
        from burnin.gate.slurm import apply_gate

        _refuse_partial_gate(args.gate, _partial_reason(result.gate))

        apply_gate(result.decisions, dry_run=args.dry_run)
    return EXIT_OK if all(d.admitted for d in result.decisions.values()) else EXIT_REJECTED
