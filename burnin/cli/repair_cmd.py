"""``burnin repair NODESET``: the repair ladder for nodes burnin drained, and their return to service (docs/repair.md).

For each node burnin took out (a ``burnin:`` reason in Slurm): the next step of its incident class's ladder
(reset the GPU, reboot through Slurm, send to the vendor), then the acceptance suites again; back in service
only on a pass, else the next step. An operator's drain is never touched. ``--dry-run`` prints the step each
node would take and its commands, and changes nothing. Exit 0 when every node it repaired is back in service
(or there was nothing to repair), 1 when a node stays out (sent to the vendor, or still failing), 2 on a
usage or settings error.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from burnin.dispatch.base import Dispatcher
    from burnin.topology.model import Topology

VIAS = ("slurm", "ssh", "sim")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from burnin.phases import add_arguments as add_phase_arguments

    parser.add_argument("nodes", metavar="NODESET", help="nodes to repair, e.g. gpu[012-015] (only those burnin "
                                                         "drained are touched)")
    parser.add_argument("--via", choices=VIAS, default="slurm",
                        help="how commands and the acceptance reach the nodes (default slurm; Slurm is always "
                             "where the drain reasons are read, the reboot asked and the node resumed)")
    parser.add_argument("--rack", type=Path, metavar="DIR",
                        help="sim: the simulated rack's folder (nodes/<name>/, as `burnin sim up --state` makes)")
    parser.add_argument("--ssh-config", type=Path, metavar="FILE", help="ssh: the ssh_config to resolve nodes with")
    parser.add_argument("--topology", default="hgx-h100-8gpu", metavar="NAME|FILE",
                        help="node type to judge against (see `burnin topologies`)")
    parser.add_argument("--settings", type=Path, metavar="FILE",
                        help="the site's repair settings (default: $BURNIN_REPAIR_CONFIG, else repair.yaml in the "
                             "state directory; defaults when there is none)")
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help="where the acceptance runs go (default: reports/repair-<run-id>)")
    parser.add_argument("--bundles", type=Path, metavar="DIR",
                        help="where vendor bundles go (default: repair-bundles/ in the state directory)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the step each node would take and its commands; change and record nothing")
    add_phase_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from burnin.counters import state_dir
    from burnin.errors import UsageError
    from burnin.nodes import expand, validate_name
    from burnin.outdir import new_run_id
    from burnin.phases import phases_for
    from burnin.repair import settings as repair_settings
    from burnin.repair.executor import Repair, repair_node
    from burnin.repair.journal import Journal
    from burnin.repair.reach import DispatcherReach
    from burnin.topology.load import find_topology
    from burnin.transport.slurm import SlurmClient

    nodes = [validate_name(n) for n in expand(args.nodes)]
    if not nodes:
        raise UsageError("the node set is empty")
    if args.via == "sim" and args.rack is None:
        raise UsageError("--via sim needs --rack DIR (the simulated rack's folder)")
    if args.via != "sim" and args.rack is not None:
        raise UsageError("--rack goes with --via sim")
    settings = repair_settings.load(args.settings)
    topology = find_topology(args.topology)
    suites = list(settings.acceptance.suites)
    phases = phases_for(args, suites)
    out_dir = args.out or Path("reports") / f"repair-{new_run_id()}"
    reach = DispatcherReach(_opener(args, topology), topology=args.topology, suites=suites,
                            keyword=settings.acceptance.keyword, phases=phases, work_dir=out_dir / "steps")
    journal = Journal()
    repair = Repair(settings, reach, SlurmClient(), journal, out_dir,
                    args.bundles or state_dir() / "repair-bundles", dry_run=args.dry_run)
    results = [repair_node(repair, node) for node in nodes]
    for note in journal.notes:
        print(note)
    out = [r for r in results if r.result in ("vendor", "stuck")]
    resumed = [r.node for r in results if r.result == "resumed"]
    if not args.dry_run:
        print(f"burnin repair: back in service: {', '.join(resumed) or '-'}; still out: "
              f"{', '.join(f'{r.node} ({r.result})' for r in out) or '-'}")
    return 1 if out else 0


def _opener(args: argparse.Namespace, topology: Topology) -> Callable[[list[str], Path], Dispatcher]:
    """How a dispatcher over some nodes is opened for ``--via``."""

    def sim(nodes: list[str], out_dir: Path) -> Dispatcher:
        from burnin.dispatch.sim import SimDispatcher
        from burnin.errors import UsageError

        missing = [n for n in nodes if not (args.rack / "nodes" / n / "node.json").is_file()]
        if missing:
            raise UsageError(f"--rack {args.rack}: no simulated node {', '.join(missing)} there")
        return SimDispatcher(args.rack, topology, nodes, {}, render=False)

    def ssh(nodes: list[str], out_dir: Path) -> Dispatcher:
        from burnin.dispatch.ssh import SshDispatcher
        from burnin.nodes import fold

        return SshDispatcher.for_nodes(hosts=fold(nodes), ssh_config=args.ssh_config,
                                       default_topology=args.topology)

    def slurm(nodes: list[str], out_dir: Path) -> Dispatcher:
        from burnin.dispatch.slurm import SlurmDispatcher

        out_dir.mkdir(parents=True, exist_ok=True)
        return SlurmDispatcher(nodes, recheck_drained=True, log_file=out_dir / "slurm-commands.log")

    return {"sim": sim, "ssh": ssh, "slurm": slurm}[args.via]
