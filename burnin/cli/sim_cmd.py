"""``burnin sim up|down|fault``: simulated racks behind real sshd or real Slurm daemons."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

LAB_FILE = "lab.json"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="sim_command", metavar="ACTION", required=True)
    up = sub.add_parser("up", help="start simulated nodes")
    kind = up.add_mutually_exclusive_group(required=True)
    kind.add_argument("--ssh", type=int, metavar="N", help="N nodes, each behind its own sshd on 127.0.1.x")
    kind.add_argument("--slurm", type=int, metavar="N", help="N nodes under a real slurmctld/slurmd cluster")
    up.add_argument("--fault", action="append", default=[], metavar="NODE:FAULT", help="inject a fault")
    up.add_argument("--state", type=Path, required=True, metavar="DIR", help="folder for all state")
    up.add_argument("--topology", default="hgx-h100-8gpu", metavar="NAME|FILE")
    up.add_argument("--netns", choices=("auto", "on", "off"), default="auto",
                    help="ssh: each node's fabric netdevs as real interfaces in a network namespace of its own "
                         "(auto: when root with ip and ping, and the topology has a storage fabric)")
    up.add_argument("--health-interval", type=int, default=30, metavar="S",
                    help="slurm: HealthCheckInterval in seconds (default 30)")
    up.add_argument("--watch", action="store_true",
                    help="slurm: also run `burnin watch` on every node (evicts within a second of a fault)")
    down = sub.add_parser("down", help="stop exactly what `sim up` started")
    down.add_argument("--state", type=Path, required=True, metavar="DIR")
    fault = sub.add_parser("fault", help="inject a fault into a running simulated node")
    fault.add_argument("--state", type=Path, required=True, metavar="DIR")
    fault.add_argument("node")
    fault.add_argument("fault", metavar="FAULT", help="fault name, e.g. xid:79 or nvlink-down@gpu2; 'clear' heals")


def _lab_kind(state: Path) -> str:
    from burnin.errors import UsageError

    lab_file = state / LAB_FILE
    if not lab_file.exists():
        raise UsageError(f"{state} holds no simulated rack (no {LAB_FILE}); start one with `burnin sim up`")
    try:
        lab = json.loads(lab_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"{lab_file}: cannot read it ({type(exc).__name__}); "
                         "stop the rack's processes by hand if any still run") from None
    kind = lab.get("kind") if isinstance(lab, dict) else None
    if kind not in ("ssh", "slurm"):
        raise UsageError(f"{lab_file}: unknown kind {kind!r}")
    return str(kind)


LAB_INSTALL = "pip install ./lab (the burnin-lab package in the burnin repository)"


def _lab(module: str) -> Any:
    """A module of the lab (``burnin_lab``): real sshd and Slurm daemons for simulated racks.

    The lab starts daemons and creates system users, so it is no part of the
    runtime package that goes on production controllers; it installs apart.
    """
    import importlib

    from burnin.errors import UsageError

    try:
        return importlib.import_module(f"burnin_lab.{module}")
    except ModuleNotFoundError as exc:
        if exc.name is not None and (exc.name == "burnin_lab" or exc.name.startswith(("burnin_lab.", "cryptography"))):
            raise UsageError(f"burnin sim needs the lab, which is not installed: {LAB_INSTALL}") from None
        raise


def _kernel_network(choice: str, topology: Any, count: int) -> bool:
    """Whether a lab rack gets real interfaces (``--netns``): auto takes them where the host and topology allow."""
    if choice == "off":
        return False
    if choice == "on":
        return True
    netns = _lab("netns")
    routing = topology.storage.routing if topology.storage is not None else None
    return (topology.storage is not None and (routing is None or routing.vrf is None)
            and count <= int(netns.MAX_NODES) and netns.unavailable() is None)


def run(args: argparse.Namespace) -> int:
    from burnin.dispatch.sim import parse_fault_args
    from burnin.nodes import sim_names
    from burnin.topology.load import find_topology

    if args.sim_command == "up":
        count = args.ssh if args.ssh is not None else args.slurm
        names = sim_names(count)
        faults = parse_fault_args(args.fault, names)
        topology = find_topology(args.topology)
        if args.ssh is not None:
            lab_ssh = _lab("ssh")
            if args.watch:
                from burnin.errors import UsageError

                raise UsageError("--watch needs --slurm: burnin watch acts through Slurm")
            kernel_network = _kernel_network(args.netns, topology, count)
            lab = lab_ssh.up(args.state, topology, names, faults, kernel_network=kernel_network)
            for note in lab.get("notes", []):
                print(f"burnin sim: {note}")
            if kernel_network:
                print("burnin sim: routes, MTUs and byte counters of the fabric netdevs are the kernel's "
                      "(a network namespace per node)")
        else:
            if args.netns == "on":
                from burnin.errors import UsageError

                raise UsageError("--netns on applies to --ssh racks only")
            lab_slurm = _lab("slurm")
            lab_slurm.up(args.state, topology, names, faults, health_interval=args.health_interval,
                         watch=[] if args.watch else None)
        print(f"burnin sim: {count} nodes up in {args.state} ({'ssh' if args.ssh is not None else 'slurm'})")
        if args.slurm is not None:
            for key, value in _lab("slurm").client_env(args.state).items():
                print(f"export {key}={value}")
        return 0
    kind = _lab_kind(args.state)
    if args.sim_command == "down":
        if kind == "ssh":
            _lab("ssh").down(args.state)
        else:
            _lab("slurm").down(args.state)
        print(f"burnin sim: {args.state} stopped")
        return 0
    _lab("common").inject_fault(args.state, args.node, args.fault)
    if args.fault == "clear":
        print(f"burnin sim: faults cleared on {args.node}")
    else:
        print(f"burnin sim: {args.fault} injected into {args.node}")
    return 0
