"""``burnin soak``: hours of load on every node at once while every health signal is watched (BRN-01..07).

Exit status as ``burnin run``: 0 every node admitted, 1 some node rejected, 2
usage or configuration error, 3 interrupted (the checkpoint stays: ``--resume
OUT`` goes on) or internal error.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from burnin.argtypes import seconds
from burnin.cli.main import EXIT_INTERNAL, EXIT_OK, EXIT_REJECTED

if TYPE_CHECKING:
    from burnin.dispatch.base import Dispatcher
    from burnin.gate.decide import NodeDecision
    from burnin.gate.registry import Gate
    from burnin.soak.monitor import Event
    from burnin.soak.plan import SoakSettings
    from burnin.soak.scheduler import SoakContext
    from burnin.soak.state import SoakState
    from burnin.topology.model import Topology

SIM_RACK = "sim"
"""Where a dispatcher keeps its nodes across ``--resume`` (the simulated rack), under the output folder."""
HOLD_SLACK_S = 600.0
"""Beyond the soak's own deadline: how much longer a Slurm allocation is asked for."""
DEFAULT_FANOUT = 64


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from burnin.dispatch import registry as dispatchers
    from burnin.gate.registry import NO_GATE, gate_names

    dispatchers.add_arguments(parser.add_argument_group("nodes"))
    parser.add_argument("--duration", metavar="TIME", help="how long every node is soaked: 24h, 90m, 2d, ...")
    parser.add_argument("--interval", type=seconds, default=None, metavar="S",
                        help="seconds between samples (default: the settings' 30 s; simulated: 1/60 of the soak)")
    parser.add_argument("--config", type=Path, metavar="FILE",
                        help="site settings YAML: stages, tools, tolerances (see docs/soak.md)")
    parser.add_argument("--topology", default="hgx-h100-8gpu", metavar="NAME|FILE", help="node type")
    parser.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help="output folder (default: reports/soak-<time>)")
    parser.add_argument("--resume", type=Path, metavar="RUN_DIR",
                        help="continue the soak checkpointed in RUN_DIR (its own nodes, faults and settings)")
    parser.add_argument("--sample-timeout", type=seconds, default=60.0, metavar="S",
                        help="per-node timeout of one monitoring sample (default 60)")
    gate = parser.add_argument_group("gate")
    gate.add_argument("--gate", choices=gate_names(), default=NO_GATE,
                      help="slurm: drain a node the moment it fails, and at the end drain rejected nodes and "
                           "resume burnin-drained healthy ones")
    gate.add_argument("--dry-run", action="store_true", help="print the gate's commands instead of running them")


def _dispatch_defaults() -> dict[str, Any]:
    """Every registered dispatcher's options (``--via`` included) with their defaults, by dest."""
    from burnin.dispatch import registry as dispatchers

    parser = argparse.ArgumentParser(add_help=False)
    dispatchers.add_arguments(parser.add_argument_group("nodes"))
    return vars(parser.parse_args([]))


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def _command(args: argparse.Namespace, duration_s: float) -> dict[str, Any]:
    """What --resume needs to rebuild the soak: the dispatcher's options as given (files made absolute)."""
    from burnin.dispatch.registry import selected

    def path(value: Path | None) -> str | None:
        return str(value.resolve()) if value is not None else None

    dispatch: dict[str, Any] = {}
    paths: list[str] = []
    for dest in _dispatch_defaults():
        value = getattr(args, dest, None)
        if isinstance(value, Path):
            value = path(value)
            paths.append(dest)
        dispatch[dest] = value
    return {"via": selected(args), "dispatch": dispatch, "dispatch_paths": paths, "sim": args.sim,
            "faults": list(args.fault), "topology": args.topology, "config": path(args.config),
            "duration_s": duration_s, "gate": args.gate, "dry_run": args.dry_run,
            "sample_timeout": args.sample_timeout}


def _namespace(command: dict[str, Any]) -> argparse.Namespace:
    """The dispatcher's options of a checkpointed soak, as argparse gave them."""
    values = _dispatch_defaults()
    if "dispatch" in command:
        values.update(command["dispatch"])
        paths = list(command.get("dispatch_paths", ()))
    else:  # a checkpoint of a soak that spelled out its options (sim or ssh)
        values.update({"sim": command.get("sim"), "fault": list(command.get("faults") or []),
                       "via": command.get("via"), "hosts": command.get("hosts"),
                       "inventory": command.get("inventory"), "ssh_config": command.get("ssh_config"),
                       "accept_new_host_keys": bool(command.get("accept_new_host_keys")),
                       "fanout": command.get("fanout") or DEFAULT_FANOUT})
        paths = ["inventory", "ssh_config"]
    for dest in paths:
        if values.get(dest) is not None:
            values[dest] = Path(values[dest])
    return argparse.Namespace(**values, gate=command["gate"], dry_run=bool(command["dry_run"]))


def _simulated(command: dict[str, Any]) -> bool:
    if "simulated" in command:
        return bool(command["simulated"])
    return command.get("sim") is not None


def _check(args: argparse.Namespace) -> None:
    from burnin.dispatch.registry import choose
    from burnin.errors import UsageError

    if args.resume is not None:
        given = [_flag(dest) for dest, default in _dispatch_defaults().items() if getattr(args, dest) != default]
        given += [flag for flag, value in (("--duration", args.duration), ("--config", args.config),
                                           ("--out", args.out), ("--interval", args.interval)) if value]
        if given:
            raise UsageError(f"--resume takes the soak's own settings: drop {', '.join(given)}")
        return
    if args.duration is None:
        raise UsageError("--duration is required (e.g. --duration 24h)")
    choose(args)  # "no nodes", or another dispatcher's options given


def _prepare_out(out_dir: Path, owned: contextlib.ExitStack) -> None:
    """Create the folder and take it for this soak (held until ``owned`` closes); refuse one that holds a
    soak already, or that another living run or soak owns."""
    from burnin.errors import UsageError
    from burnin.outdir import make_folder, own
    from burnin.soak.state import STATE_FILE

    make_folder(out_dir)
    owned.enter_context(own(out_dir, ["burnin", *sys.argv[1:]]))  # before the look: two soaks never both pass it
    if (out_dir / STATE_FILE).exists():
        raise UsageError(f"--out {out_dir} holds a soak already: continue it with --resume {out_dir}")


def _own_resumed(out_dir: Path, owned: contextlib.ExitStack) -> None:
    """``--resume``: take the soak's folder (held until ``owned`` closes), refused while its owner lives.

    A folder without a checkpoint is left untouched: loading it says what is wrong.
    """
    from burnin.outdir import own
    from burnin.soak.state import STATE_FILE

    if (out_dir / STATE_FILE).is_file():
        owned.enter_context(own(out_dir, ["burnin", *sys.argv[1:]], flag="--resume"))


def _dispatcher(options: argparse.Namespace, topology: Topology, topology_ref: str, out_dir: Path) -> Dispatcher:
    """The dispatcher ``--sim`` / ``--via`` names, from the registry, as ``burnin run`` opens it."""
    from burnin.dispatch.base import DispatchContext
    from burnin.dispatch.registry import open_dispatcher

    context = DispatchContext(topology, topology_ref, out_dir, ("soak",), state_dir=out_dir / SIM_RACK)
    return open_dispatcher(options, context)


def _context(settings: SoakSettings, topology: Topology, sample_timeout: float) -> SoakContext:
    from burnin.checks.base import parse_cpulist
    from burnin.soak.monitor import Limits, gpu_names
    from burnin.soak.scheduler import SoakContext

    devices = sorted(topology.gpus.devices, key=lambda d: d.bus_id)
    sockets = {node: max(1, len(parse_cpulist(cpus)) // 2) for node, cpus in sorted(topology.numa.cpulists.items())}
    return SoakContext(settings=settings, limits=Limits.from_settings(settings.tolerances, topology),
                       gpu_names=tuple(f"gpu{d.index}" for d in devices), bus_names=gpu_names(topology),
                       compute_hcas=tuple(h.name for h in topology.compute_hcas), sockets=sockets,
                       sample_timeout_s=sample_timeout, topology=topology)


def _gate(name: str) -> Gate | None:
    from burnin.gate.registry import NO_GATE, find_gate

    return None if name == NO_GATE else find_gate(name)


def _drainer(gate: Gate | None, dry_run: bool) -> Any:
    """Under ``--gate``: take a node out of the pool the moment it fails."""
    if gate is None:
        return None

    def on_fatal(node: str, events: list[Event]) -> None:
        first = events[0]
        gate.drain(node, f"{first.check} {first.subject} {first.measured} at +{_hms(first.t)}", dry_run=dry_run)

    return on_fatal


def _hms(value: float) -> str:
    from burnin.soak.plan import hms

    return hms(value)


def run(args: argparse.Namespace) -> int:
    with contextlib.ExitStack() as owned:  # the output folder's one owner, until the soak has ended
        return _run(args, owned)


def _run(args: argparse.Namespace, owned: contextlib.ExitStack) -> int:
    from burnin.outdir import new_run_id
    from burnin.soak.plan import check_interval, default_interval, load_settings, parse_duration
    from burnin.soak.state import SoakState, Store
    from burnin.topology.load import find_topology

    _check(args)
    state: SoakState | None = None
    if args.resume is not None:
        out_dir = args.resume
        _own_resumed(out_dir, owned)
        store = Store(out_dir)
        state = store.load()
        command = state.command
        options = _namespace(command)
    else:
        duration_s = parse_duration(args.duration)
        _check_faults(args.fault, duration_s)
        load_settings(args.config)
        find_topology(args.topology)
        out_dir = args.out or Path("reports") / new_run_id("soak-")
        _prepare_out(out_dir, owned)
        command = _command(args, duration_s)
        store = Store(out_dir)
        options = args
    settings = load_settings(Path(command["config"]) if command["config"] else None)
    topology = find_topology(command["topology"])
    gate = _gate(command["gate"])
    started = time.monotonic()
    from burnin.dispatch.base import left_on_nodes as shipped_and_left
    from burnin.soak.nodes import HoldEnded

    left_on_nodes: dict[str, list[str]] = {}
    ended: HoldEnded | None = None
    if state is None or not state.finished:
        dispatcher = _dispatcher(options, topology, command["topology"], out_dir)
        try:
            from burnin.dispatch.base import simulated_time_of

            advance = simulated_time_of(dispatcher, float(command["duration_s"]))
            if state is None:
                simulated = advance is not None
                if args.interval is not None:
                    check_interval(args.interval, float(command["duration_s"]), simulated=simulated)
                interval_s = args.interval or default_interval(float(command["duration_s"]), simulated, settings)
                command.update(interval_s=interval_s, simulated=simulated)
                state = SoakState(command=command, duration_s=float(command["duration_s"]), interval_s=interval_s,
                                  nodes={}, run_id=out_dir.name)
                if not command["dry_run"] and not _accept(state, dispatcher, command["topology"], out_dir):
                    return EXIT_INTERNAL
            _soak(state, store, dispatcher, advance, settings, topology, out_dir,
                  on_fatal=_drainer(gate, bool(command["dry_run"])))
        except HoldEnded as exc:
            ended = exc
        finally:
            dispatcher.close()
        left_on_nodes = shipped_and_left(dispatcher)  # an allocation that ended before its clean-up step
    from burnin.cli.summary import say_left_on_nodes

    if ended is not None:  # as an interrupt: the checkpoint stays, --resume goes on in a new allocation
        say_left_on_nodes(left_on_nodes, shipped_by="the soak", ended="its allocation ended",
                          recorded_in="slurm-commands.log")
        print(f"burnin soak: {ended}; the checkpoint stays: burnin soak --resume {out_dir} goes on in a new one",
              file=sys.stderr)
        return EXIT_INTERNAL
    assert state is not None  # it exists once a soak ran (HoldEnded comes from _soak, which needs it)
    decisions = _judge(state, store, settings, topology, out_dir, command)
    if not command["dry_run"]:
        from burnin.history.importer import record_finished

        record_finished(out_dir, kind="soak")  # the soak's own verdicts (BRN and all) beside its acceptance run's
    _print_summary(state, decisions, topology.name, time.monotonic() - started, out_dir)
    say_left_on_nodes(left_on_nodes, shipped_by="the soak", ended="its allocation ended",
                      recorded_in="slurm-commands.log")
    if gate is not None:
        gate.apply(decisions, dry_run=bool(command["dry_run"]))
    rejected = [n for n, d in decisions.items() if not d.admitted]
    return EXIT_REJECTED if rejected else EXIT_OK


def _check_faults(faults: list[str], duration_s: float) -> None:
    """A fault that unfolds at a soak minute must fall within the soak (an Xid after its end is never seen)."""
    if not faults:
        return
    from burnin.errors import UsageError
    from burnin.sim import parse_fault_spec

    for value in faults:
        _, found, spec = value.partition(":")
        if not found:
            continue  # the dispatcher names what is wrong with it
        fault = parse_fault_spec(spec)
        minute = getattr(fault, "minute", None)
        if minute is not None and minute * 60 > duration_s:
            raise UsageError(f"--fault {value}: minute {minute} is past the soak's end ({_hms(duration_s)}), "
                             "so nothing would ever catch it")


def _accept(state: SoakState, dispatcher: Dispatcher, topology_ref: str, out_dir: Path) -> bool:
    """The node suite on every node first (burnin/soak/acceptance.py): a node it rejects is not soaked, and the
    soak's gate judges its verdicts with the soak's. False (said in one line) when pytest could not run."""
    from burnin.cli.interrupt import raise_if_received
    from burnin.nodes import fold
    from burnin.phases import PhaseRun, load_phase
    from burnin.session import SuiteError, execute
    from burnin.soak.acceptance import ACCEPTANCE_DIR, SUITE, admit

    phase = load_phase(SUITE)  # as `burnin run` runs the suite: its phase (INV-11's fleet counts), then its tests
    try:
        result = execute(dispatcher, topology=topology_ref, out_dir=out_dir / ACCEPTANCE_DIR, suites=(SUITE,),
                         phases=[PhaseRun(phase)] if phase is not None else [])
    except SuiteError as exc:
        raise_if_received()
        print(f"burnin soak: acceptance: {exc}", file=sys.stderr)
        return False
    held = admit(state, list(dispatcher.nodes), result.decisions, out_dir)  # checkpointed with the soak's first round
    print(f"soak acceptance: the node suite judged {len(state.nodes)} nodes; "
          + (f"not soaked: {fold(held)} ({len(held)})" if held else "every node goes on to soak"),
          file=sys.stderr, flush=True)
    return True


def _soak(state: SoakState, store: Any, dispatcher: Dispatcher, advance: Callable[[float], None] | None,
          settings: SoakSettings, topology: Topology, out_dir: Path, *,
          on_fatal: Callable[[str, list[Event]], None] | None) -> None:
    from burnin.errors import UsageError
    from burnin.soak.clock import RealClock, SimClock
    from burnin.soak.nodes import open_nodes
    from burnin.soak.progress import progress_for
    from burnin.soak.scheduler import DEADLINE_FACTOR, Soak, plan_items, restart
    from burnin.soak.state import HELD, RUNNING, NodeProgress

    if state.nodes and all(p.status == HELD for p in state.nodes.values()):
        state.finished = True  # acceptance held every node back: nothing to soak, no allocation to take
        store.save(state)
        return
    if not state.nodes:
        state.nodes = {name: NodeProgress(name) for name in dispatcher.nodes}
    context = _context(settings, topology, float(state.command["sample_timeout"]))
    launcher = dispatcher.launcher({})
    if state.command["dry_run"]:  # a launcher that prints the plan below and holds (and runs) nothing
        from burnin.launch.dryrun import DryRunLauncher
        from burnin.soak.plan import DRY_RUN_REASON

        launcher = DryRunLauncher(launcher, print, DRY_RUN_REASON)
    hold_s = max(0.0, DEADLINE_FACTOR * state.duration_s - state.now) + HOLD_SLACK_S
    plan = plan_items(context, list(state.nodes), duration_s=state.duration_s, interval_s=state.interval_s)
    nodes, failure = open_nodes(launcher, list(dispatcher.nodes), hold_s=hold_s, plan=plan)
    if failure is not None:
        if state.command["dry_run"]:
            return  # every check is then incomplete, saying the commands were printed (burnin.soak.verdicts)
        raise UsageError(failure)
    try:
        samples, results = store.samples(state), store.results(state)
        if advance is not None:
            clock: Any = SimClock(state.now, advance)
        else:
            clock = RealClock(state.now)
            gap = time.time() - state.saved_wall if state.saved_wall else 0.0
            limit = settings.tolerances.max_gap_intervals * state.interval_s
            if state.saved_wall and gap > limit:
                for progress in state.nodes.values():
                    if progress.status == RUNNING:
                        restart(progress, state.now, f"the soak was not monitored for {_hms(gap)} "
                                                     "(controller down)")
        store.save(state)  # a checkpoint before the first step: an allocation that ends at once can be resumed
        soak = Soak(nodes, state, store, clock, context, sink=progress_for(), on_fatal=on_fatal, samples=samples,
                    results=results)
        soak.run()
    finally:
        nodes.close()


def _judge(state: SoakState, store: Any, settings: SoakSettings, topology: Topology, out_dir: Path,
           command: dict[str, Any]) -> dict[str, NodeDecision]:
    from burnin.soak import acceptance
    from burnin.soak.verdicts import Judge, write_outputs

    accepted = acceptance.outcomes(state, out_dir)
    samples, results = store.samples(state), store.results(state)
    judge = Judge(state, samples, results, settings, topology, command["config"] or "the default settings")
    outcomes = judge.outcomes()
    meta = {"topology": topology.name, "duration_s": state.duration_s, "interval_s": state.interval_s,
            "simulated": _simulated(command),
            "acceptance": f"{acceptance.ACCEPTANCE_DIR}/gate.json" if state.acceptance is not None else None}
    return write_outputs(out_dir, state, outcomes, judge.series, meta=meta, acceptance=accepted)


def _condense(reasons: tuple[str, ...]) -> list[str]:
    """``BRN-02 not judged: X`` lines that share their cause become one ``BRN-02,BRN-03 not judged: X``."""
    marker = " not judged: "
    grouped: dict[str, list[str]] = {}
    lines: list[str] = []
    for reason in reasons:
        check, sep, cause = reason.partition(marker)
        if not sep:
            lines.append(reason)
            continue
        if cause not in grouped:
            lines.append(marker + cause)
        grouped.setdefault(cause, []).append(check)
    return [",".join(grouped[line.removeprefix(marker)]) + line if line.startswith(marker) else line
            for line in lines]


def _print_summary(state: SoakState, decisions: dict[str, NodeDecision], topology: str, elapsed_s: float,
                   out_dir: Path) -> None:
    from burnin.nodes import fold
    from burnin.text import printable

    clock = "simulated" if _simulated(state.command) else "soaked"
    print(f"burnin soak: {len(decisions)} nodes ({topology}), {_hms(state.duration_s)} {clock} in {elapsed_s:.1f} s")
    for node, decision in decisions.items():
        if decision.admitted:
            continue
        parts = [f"failed {','.join(decision.failed)}"] if decision.failed else []
        parts += [f"incomplete {','.join(decision.incomplete)}"] if decision.incomplete else []
        print(printable(f"REJECTED {node}: {'; '.join(parts)}"))
        for reason in _condense(decision.reasons):
            print(printable(f"    {reason}"))
    admitted = [n for n, d in decisions.items() if d.admitted]
    rejected = [n for n, d in decisions.items() if not d.admitted]
    print(f"admitted: {fold(admitted) or '-'} ({len(admitted)})")
    print(f"rejected: {fold(rejected) or '-'} ({len(rejected)})")
    print(f"results:  {out_dir / 'gate.json'}, {out_dir / 'verdicts.json'}, {out_dir / 'series.json'}")
    sys.stdout.flush()
