"""``burnin run``: take nodes through the suites and gate them into the pool."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from burnin.argtypes import positive_int, seconds
from burnin.cli.main import EXIT_INTERNAL, EXIT_OK, EXIT_REJECTED

if TYPE_CHECKING:
    from collections.abc import Mapping

    from burnin.dispatch.base import Dispatcher, PhaseEnded
    from burnin.gate.decide import NodeDecision
    from burnin.gate.registry import Gate
    from burnin.outdir import Ownership
    from burnin.phases import PhaseRun
    from burnin.topology.model import Topology


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from burnin.cli.history_cmd import drop_fraction
    from burnin.dispatch import registry as dispatchers
    from burnin.gate.registry import NO_GATE, gate_names
    from burnin.phases import add_arguments as add_phase_arguments

    dispatchers.add_arguments(parser.add_argument_group("nodes"))
    gate = parser.add_argument_group("gate")
    gate.add_argument("--gate", choices=gate_names(), default=NO_GATE,
                      help="act on the verdicts: slurm drains rejected nodes and resumes burnin-drained healthy ones")
    gate.add_argument("--dry-run", action="store_true",
                      help="act on nothing: gather facts (read-only) and judge them, print every command the "
                           "suites' phases and the gate would run instead of running it; admits nobody")
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
    history = parser.add_argument_group("history")
    history.add_argument("--fail-on-trend", type=drop_fraction, default=None, metavar="FRACTION",
                         help="fail a node whose measurement (a bandwidth, a link speed) fell steadily by more than "
                              "this (5%% or 0.05) over its last runs in the history, though it still passes "
                              "(default: trends are only reported, by burnin history --trends)")
    history.add_argument("--trend-runs", type=_trend_runs, default=5, metavar="N",
                         help="with --fail-on-trend: the trend spans the node's last N runs, this one included "
                              "(at least 3; default 5)")
    add_phase_arguments(parser)


def _trend_runs(text: str) -> int:
    """``--trend-runs``: a trend needs at least 3 runs (two points are a step, not a trend)."""
    value = positive_int(text)
    if value < 3:
        raise argparse.ArgumentTypeError(f"{text!r}: a trend spans at least 3 runs")
    return value


def _default_out() -> Path:
    """``reports/<run-id>``: the second and a random part, so two runs started at once never share it."""
    from burnin.outdir import new_run_id

    return Path("reports") / new_run_id()


def _check_arguments(args: argparse.Namespace, suites: list[str]) -> list[PhaseRun]:
    """Usage errors that argparse cannot see, found before any node is touched; the run's phases."""
    from burnin.phases import phases_for

    if args.keyword is not None:
        _check_keyword(args.keyword)
    return phases_for(args, suites)


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


def _prepare_out(out_dir: Path) -> tuple[list[Path], Ownership]:
    """Create the output folder and take it for this run (an existing file, an unwritable place or a
    folder another living run or soak owns is a usage error).

    Returns the folders it created, so a run that stops before writing anything
    can remove them again, and the run's hold on the folder, released when it ends.
    """
    from burnin.errors import UsageError
    from burnin.outdir import make_folder, own

    created = [p for p in (out_dir, *out_dir.parents) if not p.exists()]
    try:
        make_folder(out_dir)
        return created, own(out_dir, _command_line())
    except OSError as exc:
        _remove_empty(created)
        raise UsageError(f"--out {out_dir}: cannot write there ({exc.strerror or exc})") from None
    except UsageError:
        _remove_empty(created)
        raise


def _remove_empty(folders: list[Path]) -> None:
    for folder in folders:  # deepest first
        try:
            folder.rmdir()
        except OSError:
            return


def _dispatcher(args: argparse.Namespace, topology: Topology, out_dir: Path, suites: list[str]) -> Dispatcher:
    from burnin.dispatch.base import DispatchContext
    from burnin.dispatch.registry import open_dispatcher

    return open_dispatcher(args, DispatchContext(topology, args.topology, out_dir, tuple(suites)))


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
    from burnin.topology.load import find_topology

    suites = args.suite or ["node"]
    phases = _check_arguments(args, suites)
    topology = find_topology(args.topology)  # validate before touching any node
    gate = _gate(args.gate)
    _refuse_partial_gate(args.gate, args.keyword and f"-k {args.keyword!r} selects a subset of the checks")
    out_dir = args.out or _default_out()
    created, ownership = _prepare_out(out_dir)
    with ownership:  # one owner until the run has written its last file and acted on its gate
        return _run_owned(args, out_dir, created, ownership, topology=topology, gate=gate, phases=phases,
                          suites=suites)


def _run_owned(args: argparse.Namespace, out_dir: Path, created: list[Path], ownership: Ownership, *,
               topology: Topology, gate: Gate | None, phases: list[PhaseRun], suites: list[str]) -> int:
    from burnin.cli.interrupt import raise_if_received
    from burnin.cli.progress import Progress
    from burnin.cli.summary import print_summary, say_hold_ended, say_left_on_nodes
    from burnin.dispatch.base import hold_ended, phase_ended
    from burnin.dispatch.base import left_on_nodes as shipped_and_left
    from burnin.errors import UsageError
    from burnin.session import SuiteError, execute

    topology_ref = args.topology
    started_at = time.time()
    try:
        dispatcher = _dispatcher(args, topology, out_dir, suites)
    except BaseException:
        ownership.release()  # the lock file goes, so a folder this run created is empty again
        _remove_empty(created)
        raise
    try:  # from here on the dispatcher is closed (scratch removed, allocation released) whatever happens
        started = time.monotonic()
        with Progress(total_nodes=len(dispatcher.nodes)) as progress:
            result = execute(
                dispatcher,
                topology=topology_ref, out_dir=out_dir, suites=suites, keyword=args.keyword,
                timeout=args.timeout, on_gathered=progress.node_gathered, on_test=progress.test_done,
                phases=phases, dry_run=args.dry_run, trend_limit=args.fail_on_trend, trend_runs=args.trend_runs,
            )
    except SuiteError as exc:
        raise_if_received()  # pytest stopped on SIGINT/SIGTERM: report the interrupt, not pytest
        print(f"burnin run: {exc}", file=sys.stderr)
        return EXIT_INTERNAL
    finally:
        dispatcher.close()
    raise_if_received()
    left_on_nodes = shipped_and_left(dispatcher)  # an allocation that ended before its clean-up step
    ended = _not_measured(hold_ended(dispatcher), phase_ended(dispatcher), result.decisions)
    from burnin.report.html import render
    from burnin.report.runinfo import write_run_json

    duration = time.monotonic() - started
    refused: UsageError | None = None
    if gate is not None:  # act before reporting: a report that cannot be written never leaves a bad node in
        try:
            _refuse_partial_gate(args.gate, _partial_reason(result.gate))
        except UsageError as exc:
            refused = exc  # said after the reports: a partial run still writes them all
        else:
            try:  # a node whose allocation ended before it was measured is left as it is (not its doing)
                gate.apply({node: decision for node, decision in result.decisions.items() if node not in ended},
                           dry_run=args.dry_run)
            except UsageError as exc:  # the gate's credentials may not act (Kubernetes RBAC): after the reports
                refused = exc
    write_run_json(result.out_dir, argv=_command_line(), suites=suites, started=started_at, duration_s=duration,
                   left_on_nodes=left_on_nodes, not_measured=ended)
    try:
        render(result.out_dir)
    except OSError as exc:  # the verdicts, gate.json and the gate's actions stand; only the page is missing
        print(f"burnin run: report.html not written: {exc.strerror or exc} ({result.out_dir / 'report.html'})",
              file=sys.stderr)
    print_summary(result, topology.name, duration)
    say_hold_ended(ended, gated=gate is not None)
    say_left_on_nodes(left_on_nodes, shipped_by="the run", ended="its allocation ended",
                      recorded_in="run.json: left_on_nodes")
    if refused is not None:
        raise refused
    return EXIT_OK if all(d.admitted for d in result.decisions.values()) else EXIT_REJECTED


def _not_measured(gathered: Mapping[str, str], phases: Mapping[str, PhaseEnded],
                  decisions: Mapping[str, NodeDecision]) -> dict[str, str]:
    """The nodes the gate leaves as they are, with why: those whose allocation ended under the run (a scancel, a
    preemption) and that failed nothing it measured. ``gathered``: nodes whose collector had not answered when
    it ended (nothing of theirs was measured); ``phases``: nodes of a phase's allocation that ended, left alone
    only when every check they are incomplete for reads what an ended phase was to measure there (its
    ``Hold.measures``: a fabric phase cut short excuses NCCL-03, not a Megatron run's MEG-01 nor what the gather
    could not read). A check that failed before the end was measured: gated."""
    from burnin.checks import load_all

    registry = load_all()

    def unmeasured_by(check_id: str, ended: PhaseEnded) -> bool:
        spec = registry.get(check_id)
        return spec is not None and not ended.measures.isdisjoint((*spec.sources, *spec.evidence))

    left: dict[str, str] = {}
    for node, decision in decisions.items():
        if decision.failed:
            continue
        if node in gathered:
            left[node] = gathered[node]
        elif node in phases and all(unmeasured_by(check, phases[node]) for check in decision.incomplete):
            left[node] = phases[node].why
    return left


def _gate(name: str) -> Gate | None:
    """The ``--gate`` implementation (None: ``--gate none``), found before any node is touched."""
    from burnin.gate.registry import NO_GATE, find_gate

    return None if name == NO_GATE else find_gate(name)


def _command_line() -> list[str]:
    """How burnin was called, for run.json (``burnin run ...`` whatever the entry point)."""
    return ["burnin", *sys.argv[1:]]
