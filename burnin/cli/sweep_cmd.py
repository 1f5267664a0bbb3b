"""``burnin sweep``: the node suite on a Slurm fleet's idle nodes, one small preemptible job per node, within a
window; each node gated as its own job ends (docs/sweep.md)."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from burnin.argtypes import seconds
from burnin.cli.main import EXIT_OK, EXIT_REJECTED

if TYPE_CHECKING:
    from burnin.sweep.plan import NodeRecord

DEFAULT_SHARE = 0.1
MAX_GROUP = 4096


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction (like 0.1)") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r}: a share of the partition is above 0 and at most 1")
    return value


def _group_size(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of nodes (like 4)") from None
    if value != 0 and not 2 <= value <= MAX_GROUP:
        raise argparse.ArgumentTypeError(f"{text!r}: a fabric group is 2 to {MAX_GROUP} nodes (0: no groups)")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from burnin.gate.registry import NO_GATE
    from burnin.sweep.window import clock, duration

    parser.add_argument("--nodes", required=True, metavar="NODESET", help="the nodes to sweep (gpu[001-128])")
    parser.add_argument("--partition", required=True, metavar="P",
                        help="the preemptible partition the sweep's jobs run in (lowest PriorityTier)")
    parser.add_argument("--qos", metavar="Q", help="the site's preemptible QOS for the sweep's jobs")
    window = parser.add_mutually_exclusive_group(required=True)
    window.add_argument("--until", type=clock, metavar="HH:MM", help="the window closes at this time of day")
    window.add_argument("--for", dest="for_s", type=duration, metavar="DURATION",
                        help="the window lasts this long (6h, 90m, 1h30m, seconds)")
    parser.add_argument("--max-share", type=_share, default=DEFAULT_SHARE, metavar="F",
                        help=f"at most this share of the partition's nodes in sweep jobs at once "
                             f"(default {DEFAULT_SHARE:g}; one job at least)")
    parser.add_argument("--gate", choices=[NO_GATE, "slurm"], default=NO_GATE,
                        help="slurm: drain a rejected node and resume one burnin drained, as each job ends")
    parser.add_argument("--topology", default="hgx-h100-8gpu", metavar="NAME|FILE",
                        help="node type to judge against (see `burnin topologies`)")
    parser.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help="the sweep's folder (default: reports/sweep-<run-id>); one sweep owns it")
    parser.add_argument("--timeout", type=seconds, default=120.0, metavar="S",
                        help="per-node timeout for gathering facts (default 120)")
    parser.add_argument("--poll", type=seconds, default=10.0, metavar="S",
                        help="how often node states are read while no job ends (default 10)")
    parser.add_argument("--collector", metavar="PATH",
                        help="collector zipapp already on the nodes (default: ship it with sbcast)")
    parser.add_argument("--fabric-group", type=_group_size, default=0, metavar="N",
                        help="also run the fabric suite's multi-node checks in one job over the admitted nodes "
                             "idle together, when at least N are (default 0: node suite only)")
    parser.add_argument("--fabric-config", type=Path, metavar="FILE",
                        help="fabric site settings YAML for the groups (docs/fabric.md); needs --fabric-group")


def run(args: argparse.Namespace) -> int:
    import shutil

    from burnin.errors import UsageError
    from burnin.nodes import expand
    from burnin.outdir import make_folder, new_run_id, own
    from burnin.sweep.loop import minimum_window
    from burnin.sweep.window import seconds_until
    from burnin.topology.load import find_topology

    topology = find_topology(args.topology)
    nodes = expand(args.nodes)
    if not nodes:
        raise UsageError("--nodes: the node set is empty")
    if shutil.which("salloc") is None:
        raise UsageError("salloc not found on PATH: burnin sweep needs Slurm's client commands "
                         "(Debian: apt-get install slurm-client)")
    if args.for_s is not None:
        window_s: float = args.for_s
    else:
        hour, minute = args.until
        window_s = seconds_until(hour, minute, datetime.now())
    needed_s = minimum_window(args.timeout)
    if window_s < needed_s:
        raise UsageError(f"the window ({window_s:.0f} s) is shorter than one node's job needs "
                         f"({needed_s:.0f} s: --timeout {args.timeout:g} and 60 s to start and end it)")
    if args.fabric_config is not None:
        if not args.fabric_group:
            raise UsageError("--fabric-config applies to fabric groups only: add --fabric-group N")
        if not args.fabric_config.is_file():
            raise UsageError(f"--fabric-config {args.fabric_config}: no such file")
    if args.fabric_group:  # the groups' settings are read once here: a bad file is exit 2 before any job
        from burnin.fabric.settings import load_settings

        if load_settings(args.fabric_config).launcher == "mpirun":
            raise UsageError("fabric setting launcher: mpirun: a sweep's groups run srun steps in their own job "
                             "(use launcher: srun or auto)")
    out_dir: Path = args.out or Path("reports") / new_run_id("sweep-")
    make_folder(out_dir)
    with own(out_dir, ["burnin", *sys.argv[1:]]):
        return _sweep(args, nodes, window_s, out_dir, topology.name)


def _sweep(args: argparse.Namespace, nodes: list[str], window_s: float, out_dir: Path, topology_name: str) -> int:
    from burnin.checks.storage import collector_sources
    from burnin.fabric.phase import FabricOptions
    from burnin.gate.registry import NO_GATE, find_gate
    from burnin.sweep.loop import SWEEP_FILE, Sweep, SweepConfig
    from burnin.topology.load import find_topology
    from burnin.transport.slurm import SlurmClient

    config = SweepConfig(
        nodes=nodes, partition=args.partition, window_s=window_s, share=args.max_share,
        topology_ref=args.topology, out_dir=out_dir,
        sources=collector_sources("all", [find_topology(args.topology)]), timeout_s=args.timeout,
        poll_s=args.poll, qos=args.qos, collector=args.collector,
        gate=None if args.gate == NO_GATE else find_gate(args.gate), fabric_group=args.fabric_group,
        fabric_options=FabricOptions(args.fabric_config))
    client = SlurmClient()
    sweep = Sweep(config, client, say=_say)
    try:
        records = sweep.run()
    finally:
        client.close()
    _summary(records, topology_name, out_dir / SWEEP_FILE, fabric=args.fabric_group >= 2)
    from burnin.cli.summary import say_left_on_nodes

    # a job preempted or cancelled before its clean-up step, its node never granted to the sweep again
    say_left_on_nodes(sweep.left_on_nodes(), shipped_by="the sweep", ended="their jobs ended",
                      recorded_in="sweep.json: left_on_nodes")
    every_admitted = all(r.status == "admitted" and (args.fabric_group < 2 or r.fabric == "passed")
                         for r in records.values())
    return EXIT_OK if every_admitted else EXIT_REJECTED


def _say(line: str) -> None:
    from burnin.cli.summary import _say as say

    say(line)


def _summary(records: dict[str, NodeRecord], topology: str, sweep_file: Path, *, fabric: bool = False) -> None:
    from burnin.nodes import fold
    from burnin.sweep.plan import NOT_TESTED, TESTED, counts, fabric_counts

    by = counts(records)
    tested = [n for s in TESTED for n in by[s]]
    untested = [n for s in NOT_TESTED for n in by[s]]
    _say(f"burnin sweep: {len(records)} nodes ({topology}): {len(tested)} tested, {len(untested)} not tested")
    for node in by["rejected"]:
        _say(f"REJECTED {node}: {records[node].why}")
    _say(f"admitted: {fold(by['admitted']) or '-'} ({len(by['admitted'])})")
    _say(f"rejected: {fold(by['rejected']) or '-'} ({len(by['rejected'])})")
    labels = {"busy": "busy all window", "preempted": "preempted", "down": "down", "ended": "job ended"}
    for status in NOT_TESTED:
        if by[status]:
            _say(f"not tested ({labels[status]}): {fold(by[status])} ({len(by[status])})")
            for node in by[status][:8] if status in ("down", "ended") else ():
                _say(f"    {node}: {records[node].why}")
    if fabric:
        fab = fabric_counts(records)
        labels = {"passed": "passed", "failed": "failed", "incomplete": "incomplete",
                  "preempted": "not tested (preempted)", "ended": "not tested (group job ended)",
                  "ungrouped": "not tested (no group)", "pending": "not tested (no group)"}
        shown = [f"{labels[s]} {fold(fab[s])} ({len(fab[s])})" for s in labels if fab[s]]
        _say(f"fabric:   {'; '.join(shown) or '-'}")
        for node in fab["incomplete"][:8]:
            _say(f"    {node}: {records[node].fabric_why}")
    _say(f"results:  {sweep_file}, {sweep_file.parent}/nodes/<node>/gate.json"
         + (f", {sweep_file.parent}/groups/<group>/gate.json" if fabric else ""))
