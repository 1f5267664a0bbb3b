"""``burnin soak``: hours of load on every node at once while every health signal is watched (BRN-01..07).

Exit status as ``burnin run``: 0 every node admitted, 1 some node rejected, 2
usage or configuration error, 3 interrupted (the checkpoint stays: ``--resume
OUT`` goes on) or internal error.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from burnin.cli.argtypes import positive_int, seconds
from burnin.cli.main import EXIT_OK, EXIT_REJECTED

if TYPE_CHECKING:
    from burnin.gate.decide import NodeDecision
    from burnin.soak.monitor import Event
    from burnin.soak.plan import SoakSettings
    from burnin.soak.scheduler import SoakContext
    from burnin.soak.state import SoakState
    from burnin.topology.model import Topology

SIM_RACK = "sim"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    target = parser.add_argument_group("nodes")
    target.add_argument("--sim", nargs="?", type=int, const=8, metavar="N",
                        help="soak N simulated nodes sim01..simNN on a simulated clock (default 8)")
    target.add_argument("--fault", action="append", default=[], metavar="NODE:FAULT",
                        help="inject a simulator fault, e.g. sim03:xid-at:600:79 or sim07:thermal-creep "
                             "(repeatable; see `burnin faults`)")
    target.add_argument("--via", choices=("ssh",), default=None, help="soak real nodes over SSH")
    target.add_argument("--hosts", metavar="NODESET", help="ssh: nodes to soak, e.g. rack12-n[01-32]")
    target.add_argument("--inventory", type=Path, metavar="FILE", help="ssh: inventory YAML (nodes, groups)")
    target.add_argument("--ssh-config", type=Path, metavar="FILE", help="ssh: ssh_config to honour")
    target.add_argument("--accept-new-host-keys", action="store_true",
                        help="ssh: accept and record unknown host keys (changed keys still fail)")
    target.add_argument("--fanout", type=positive_int, default=64, metavar="N", help="ssh: nodes in flight at once")
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
    gate.add_argument("--gate", choices=("none", "slurm"), default="none",
                      help="slurm: drain a node the moment it fails, and at the end drain rejected nodes and "
                           "resume burnin-drained healthy ones")
    gate.add_argument("--dry-run", action="store_true", help="print the scontrol commands instead of running them")


def _command(args: argparse.Namespace, duration_s: float, interval_s: float) -> dict[str, Any]:
    """What --resume needs to rebuild the soak."""
    def path(value: Path | None) -> str | None:
        return str(value.resolve()) if value is not None else None

    return {"sim": args.sim, "faults": list(args.fault), "via": args.via, "hosts": args.hosts,
            "inventory": path(args.inventory), "ssh_config": path(args.ssh_config),
            "accept_new_host_keys": args.accept_new_host_keys, "fanout": args.fanout,
            "topology": args.topology, "config": path(args.config), "duration_s": duration_s,
            "interval_s": interval_s, "gate": args.gate, "dry_run": args.dry_run,
            "sample_timeout": args.sample_timeout}


def _check(args: argparse.Namespace) -> None:
    from burnin.errors import UsageError

    if args.resume is not None:
        given = [flag for flag, value in (("--sim", args.sim), ("--fault", args.fault), ("--via", args.via),
                                          ("--duration", args.duration), ("--config", args.config),
                                          ("--out", args.out), ("--interval", args.interval)) if value]
        if given:
            raise UsageError(f"--resume takes the soak's own settings: drop {', '.join(given)}")
        return
    if args.duration is None:
        raise UsageError("--duration is required (e.g. --duration 24h)")
    if args.sim is None and args.via is None:
        raise UsageError("no nodes: pass --sim [N] or --via ssh --hosts/--inventory")
    if args.sim is not None and args.via is not None:
        raise UsageError("--sim and --via exclude each other")
    if args.fault and args.sim is None:
        raise UsageError("--fault needs --sim (faults are injected into simulated nodes)")


def _prepare_out(out_dir: Path) -> None:
    import tempfile

    from burnin.errors import UsageError
    from burnin.soak.state import STATE_FILE

    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"--out {out_dir}: exists and is not a folder")
    if (out_dir / STATE_FILE).exists():
        raise UsageError(f"--out {out_dir} holds a soak already: continue it with --resume {out_dir}")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out_dir):
            pass
    except OSError as exc:
        raise UsageError(f"--out {out_dir}: cannot write there ({exc.strerror or exc})") from None


def _nodes(command: dict[str, Any], topology: Topology, out_dir: Path, duration_s: float) -> tuple[Any, Any]:
    """(SoakNodes, the simulated world or None)."""
    from burnin.soak.nodes import DispatcherNodes

    if command["sim"] is not None:
        from burnin.dispatch.sim import SimDispatcher, parse_fault_args
        from burnin.nodes import sim_names
        from burnin.sim.faults import validate_fault
        from burnin.sim.soak import SoakWorld, load_rack, split_faults

        names = sim_names(int(command["sim"]))
        faults = parse_fault_args(list(command["faults"]), names)
        checked = {node: [validate_fault(f, topology) for f in items] for node, items in faults.items()}  # type: ignore[arg-type]
        static, soak_faults = split_faults(checked)
        rack_faults: dict[str, list[object]] = {node: list(items) for node, items in static.items()}
        dispatcher = SimDispatcher(out_dir / SIM_RACK, topology, names, rack_faults, owned=False)
        world = SoakWorld(load_rack(out_dir / SIM_RACK, names), soak_faults, duration_s=duration_s)
        return DispatcherNodes(dispatcher, fanout=8), world
    from burnin.dispatch.ssh import SshDispatcher

    namespace = argparse.Namespace(hosts=command["hosts"], fanout=command["fanout"],
                                   inventory=Path(command["inventory"]) if command["inventory"] else None,
                                   ssh_config=Path(command["ssh_config"]) if command["ssh_config"] else None,
                                   accept_new_host_keys=command["accept_new_host_keys"])
    return DispatcherNodes(SshDispatcher.from_args(namespace, command["topology"]),
                           fanout=int(command["fanout"])), None


def _context(settings: SoakSettings, topology: Topology, sample_timeout: float) -> SoakContext:
    from burnin.checks.base import parse_cpulist
    from burnin.soak.monitor import Limits, gpu_names
    from burnin.soak.scheduler import SoakContext

    devices = sorted(topology.gpus.devices, key=lambda d: d.bus_id)
    sockets = {node: max(1, len(parse_cpulist(cpus)) // 2) for node, cpus in sorted(topology.numa.cpulists.items())}
    return SoakContext(settings=settings, limits=Limits.from_settings(settings.tolerances, topology),
                       gpu_names=tuple(f"gpu{d.index}" for d in devices), bus_names=gpu_names(topology),
                       compute_hcas=tuple(h.name for h in topology.compute_hcas), sockets=sockets,
                       sample_timeout_s=sample_timeout)


def _drainer(command: dict[str, Any]) -> Any:
    if command["gate"] != "slurm":
        return None
    from burnin.gate.slurm import drain

    def on_fatal(node: str, events: list[Event]) -> None:
        first = events[0]
        drain(node, f"{first.check} {first.subject} {first.measured} at +{_hms(first.t)}",
              dry_run=bool(command["dry_run"]))

    return on_fatal


def _hms(value: float) -> str:
    from burnin.soak.plan import hms

    return hms(value)


def run(args: argparse.Namespace) -> int:
    from burnin.soak.plan import default_interval, load_settings, parse_duration
    from burnin.soak.state import SoakState, Store
    from burnin.topology.load import find_topology

    _check(args)
    if args.resume is not None:
        out_dir = args.resume
        store = Store(out_dir)
        state = store.load()
        command = state.command
    else:
        duration_s = parse_duration(args.duration)
        settings = load_settings(args.config)
        find_topology(args.topology)
        interval_s = args.interval or default_interval(duration_s, args.sim is not None, settings)
        out_dir = args.out or Path("reports") / time.strftime("soak-%Y%m%dT%H%M%SZ", time.gmtime())
        _prepare_out(out_dir)
        command = _command(args, duration_s, interval_s)
        store = Store(out_dir)
        state = SoakState(command=command, duration_s=duration_s, interval_s=interval_s, nodes={},
                          run_id=out_dir.name)
    settings = load_settings(Path(command["config"]) if command["config"] else None)
    topology = find_topology(command["topology"])
    started = time.monotonic()
    if not state.finished:
        _soak(state, store, command, settings, topology, out_dir)
    decisions = _judge(state, store, settings, topology, out_dir, command)
    _print_summary(state, decisions, topology.name, time.monotonic() - started, out_dir)
    if command["gate"] == "slurm":
        from burnin.gate.slurm import apply_gate

        apply_gate(decisions, dry_run=bool(command["dry_run"]))
    rejected = [n for n, d in decisions.items() if not d.admitted]
    return EXIT_REJECTED if rejected else EXIT_OK


def _soak(state: SoakState, store: Any, command: dict[str, Any], settings: SoakSettings, topology: Topology,
          out_dir: Path) -> None:
    from burnin.soak.clock import RealClock, SimClock
    from burnin.soak.progress import progress_for
    from burnin.soak.scheduler import Soak, restart
    from burnin.soak.state import RUNNING, NodeProgress

    nodes, world = _nodes(command, topology, out_dir, state.duration_s)
    try:
        if not state.nodes:
            state.nodes = {name: NodeProgress(name) for name in nodes.nodes}
        samples, results = store.samples(state), store.results(state)
        if world is not None:
            clock: Any = SimClock(state.now, world.advance)
        else:
            clock = RealClock(state.now)
            gap = time.time() - state.saved_wall if state.saved_wall else 0.0
            limit = settings.tolerances.max_gap_intervals * state.interval_s
            if state.saved_wall and gap > limit:
                for progress in state.nodes.values():
                    if progress.status == RUNNING:
                        restart(progress, state.now, f"the soak was not monitored for {_hms(gap)} "
                                                     "(controller down)")
        soak = Soak(nodes, state, store, clock, _context(settings, topology, float(command["sample_timeout"])),
                    sink=progress_for(), on_fatal=_drainer(command), samples=samples, results=results)
        soak.run()
    finally:
        nodes.close()


def _judge(state: SoakState, store: Any, settings: SoakSettings, topology: Topology, out_dir: Path,
           command: dict[str, Any]) -> dict[str, NodeDecision]:
    from burnin.soak.verdicts import Judge, write_outputs

    samples, results = store.samples(state), store.results(state)
    judge = Judge(state, samples, results, settings, topology, command["config"] or "the default settings")
    outcomes = judge.outcomes()
    meta = {"topology": topology.name, "duration_s": state.duration_s, "interval_s": state.interval_s,
            "simulated": command["sim"] is not None}
    return write_outputs(out_dir, state, outcomes, judge.series, meta=meta)


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

    clock = "simulated" if state.command.get("sim") is not None else "soaked"
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
