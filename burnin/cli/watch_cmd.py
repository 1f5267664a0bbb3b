"""``burnin watch``: the node-side event daemon (docs/watch.md).

Listens to NVML events and the kernel log, and within a second evicts (drain +
requeue the node's jobs, started again within seconds), drains, or only records.
Runs until SIGTERM/SIGINT; exit 0 then.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from burnin.watch.actions import Actor

DEFAULT_STATE_DIR = "/var/lib/burnin/watch"
ACTIONS = ("evict", "drain", "record")
LOG_FORMATS = ("auto", "kmsg", "dmesg", "syslog")  # burnin.watch.records.LogFormat


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds: {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--node", metavar="NAME",
                        help="this node's Slurm name (default: $BURNIN_SIM_NODE or the short hostname)")
    parser.add_argument("--state-dir", type=Path, default=None, metavar="DIR",
                        help=f"where the event journal events.jsonl lives (default {DEFAULT_STATE_DIR}, "
                             "or $STATE_DIRECTORY under systemd)")
    parser.add_argument("--kernel-log", metavar="PATH",
                        help="kernel log to follow: /dev/kmsg (default; on a simulated node its kmsg file), "
                             "a file of log lines, or 'none'")
    parser.add_argument("--kernel-log-format", choices=LOG_FORMATS, default="auto",
                        help="how to tell the kernel's own lines in a --kernel-log file (docs/watch.md): kmsg "
                             "records (facility 0), a dmesg capture (all lines), syslog (tag 'kernel' only), or "
                             "auto (the first line in one of these forms decides; default). /dev/kmsg is always kmsg")
    parser.add_argument("--no-nvml", action="store_true",
                        help="do not subscribe to NVML events (the fallback probe runs instead)")
    parser.add_argument("--probe-interval", type=_positive, default=60.0, metavar="S",
                        help="fallback: run the fast probe every S seconds while NVML events are "
                             "unavailable (default 60)")
    parser.add_argument("--dedupe-window", type=_positive, default=60.0, metavar="S",
                        help="sightings of one incident within S seconds of the last are one (default 60)")
    parser.add_argument("--ib-port-down", choices=ACTIONS, default="evict",
                        help="site policy for an IB port going down (default evict; 'drain' lets the job finish)")
    parser.add_argument("--topology", default=os.environ.get("BURNIN_TOPOLOGY", "hgx-h100-8gpu"),
                        metavar="NAME|FILE", help="node type for the fallback probe (default: $BURNIN_TOPOLOGY "
                                                  "or hgx-h100-8gpu)")
    parser.add_argument("--config", type=Path, metavar="FILE",
                        help="site settings (YAML): the stall detector's thresholds and policy alert|drain "
                             "(docs/watch.md, 'Stalled collectives'); default: the built-in ones")
    parser.add_argument("--metrics", type=Path, metavar="FILE",
                        help="write the stall detector's state as a Prometheus textfile after every sample "
                             "(e.g. node_exporter's textfile folder/burnin-watch.prom), atomically")
    parser.add_argument("--gate", choices=("slurm", "kubernetes"), default="slurm",
                        help="take the node out through Slurm (drain; evict requeues its jobs) or Kubernetes "
                             "(burnin's NoSchedule taint; evict: NoExecute; docs/kubernetes.md). Default slurm")
    parser.add_argument("--dry-run", action="store_true", help="print the Slurm commands (or Kubernetes patches) "
                                                               "instead of running them")


def _kernel_log(value: str | None) -> Path | None:
    if value == "none":
        return None
    if value:
        return Path(value)
    from burnin.collector import node_env

    return Path(node_env.kernel_log())  # a simulated node's own kmsg file, else /dev/kmsg


def _state_dir(value: Path | None) -> Path:
    if value is not None:
        return value
    systemd = os.environ.get("STATE_DIRECTORY", "").split(":")[0]
    return Path(systemd or DEFAULT_STATE_DIR)


def run(args: argparse.Namespace) -> int:
    import signal
    import threading

    from burnin.collector import node_env
    from burnin.errors import UsageError
    from burnin.nodes import validate_name
    from burnin.probe import local_node_name
    from burnin.topology.fast import find_topology_fast
    from burnin.watch.daemon import WatchConfig, Watcher
    from burnin.watch.events import Action, Policy
    from burnin.watch.records import LogFormat
    from burnin.watch.settings import load_settings

    node = validate_name(args.node or local_node_name())
    topology = find_topology_fast(args.topology)  # for the fallback probe: a wrong name is a usage error now
    settings = load_settings(args.config)
    state_dir = _state_dir(args.state_dir)
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create the state folder {state_dir}: {exc.strerror or exc}") from None
    config = WatchConfig(
        node=node, state_dir=state_dir, kernel_log=_kernel_log(args.kernel_log),
        kernel_log_format=LogFormat(args.kernel_log_format),
        root=node_env.root(), use_nvml=not args.no_nvml,
        probe_interval=args.probe_interval, dedupe_window=args.dedupe_window,
        policy=Policy(ib_port_down=Action[args.ib_port_down.upper()],
                      stall=Action.DRAIN if settings.stall.policy == "drain" else Action.RECORD),
        dry_run=args.dry_run, topology=args.topology, stall=settings.stall,
        compute_hcas=tuple(hca.name for hca in topology.compute_hcas) or None, metrics=args.metrics,
    )
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    return Watcher(config, actor=_actor(args.gate, node, dry_run=args.dry_run)).run(stop)


def _actor(gate: str, node: str, *, dry_run: bool) -> Actor:
    """What the watch acts through (``--gate``); Kubernetes reads its own Node once now (bad credentials or
    a wrong name: exit 2 at start, not at the first event)."""
    import sys

    from burnin.watch.actions import SlurmActor

    if gate == "kubernetes":
        from burnin.watch.actions_kubernetes import KubernetesActor

        actor = KubernetesActor(node, dry_run=dry_run, out=sys.stdout)
        actor.connect()
        return actor
    return SlurmActor(node, dry_run=dry_run, out=sys.stdout)
