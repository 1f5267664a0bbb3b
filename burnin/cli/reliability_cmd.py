"""``burnin reliability``: the fleet's failure rate, job MTTF, MTTR, availability, repeat offenders and lemons,
from the history database (check-catalog REL-01/REL-02)."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from burnin.argtypes import positive_int
from burnin.cli.history_cmd import window

if TYPE_CHECKING:
    from burnin.parsers.sacctmgr import SlurmEvent

DEFAULT_GPUS = (1024, 16384)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from burnin.cli.history_db import add_history_argument

    add_history_argument(parser)
    parser.add_argument("--since", type=window, default=window("90d"), metavar="TIME",
                        help="the period up to now: 90d, 72h, ... (a bare number is days; default 90d)")
    parser.add_argument("--gpus", type=positive_int, action="append", default=None, metavar="N",
                        help="job size for the job MTTF and ETTR (repeatable; default 1024 and 16384)")
    parser.add_argument("--gpus-per-node", type=positive_int, default=8, metavar="N",
                        help="GPUs per node (default 8)")
    parser.add_argument("--checkpoint-interval", type=window, default=window("1h"), metavar="TIME",
                        help="checkpoint interval for the ETTR (default 1h)")
    parser.add_argument("--restart", type=window, default=window("10m"), metavar="TIME",
                        help="restart time after a failure, for the ETTR (default 10m)")
    parser.add_argument("--lemon-failures", type=positive_int, default=3, metavar="K",
                        help="a lemon node has at least K attributed failures within --lemon-window (default 3)")
    parser.add_argument("--lemon-window", type=window, default=window("30d"), metavar="TIME")
    parser.add_argument("--repeat", type=positive_int, default=2, metavar="K",
                        help="a repeat offender: the same check on the same GPU or HCA in K outages (default 2) "
                             "within --repeat-window (default 30d)")
    parser.add_argument("--repeat-window", type=window, default=window("30d"), metavar="TIME")
    parser.add_argument("--slurm-events", action=argparse.BooleanOptionalAction, default=None,
                        help="fold in Slurm's node events (sacctmgr show event: drains and downs burnin did not "
                             "record); default: when sacctmgr can be asked, else one line says why not; "
                             "--slurm-events: they must be read (exit 2 when they cannot)")


def _hours(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 3600:.1f} h"


def _slurm_events(args: argparse.Namespace, since: float) -> tuple[list[SlurmEvent] | None, str]:
    """Slurm's node events of the period (None and why, when they were not read)."""
    from burnin.cli.slurm_events import EVENTS_ENV, EventsUnavailable, read_events
    from burnin.errors import UsageError
    from burnin.transport.slurm import SlurmClient

    if args.slurm_events is False:
        return None, ""
    client = SlurmClient(EVENTS_ENV)
    try:
        return read_events(client, since), ""
    except EventsUnavailable as exc:
        if args.slurm_events:
            raise UsageError(f"Slurm node events (--slurm-events) not available: {exc}") from None
        return None, f"Slurm node events: not available ({exc}); these figures are burnin's history alone"
    finally:
        client.close()


def run(args: argparse.Namespace) -> int:
    from burnin.cli.history_db import open_store, say
    from burnin.errors import UsageError
    from burnin.history.document import duration_text, percent
    from burnin.history.records import time_text
    from burnin.history.reliability import CATEGORIES, ettr, reliability

    since = time.time() - args.since
    with open_store(args) as store:  # first: a history that cannot be read is the one error, sacctmgr not asked
        events, unavailable = _slurm_events(args, since)
        found = reliability(store, since=since, gpus_per_node=args.gpus_per_node,
                            lemon_failures=args.lemon_failures, lemon_window_s=args.lemon_window,
                            repeat_k=args.repeat, repeat_window_s=args.repeat_window, slurm_events=events)
    if found is None:
        raise UsageError(f"no complete run recorded since {time_text(since)} (see burnin history --runs)")
    fleet = found.fleet
    say(f"burnin reliability: {len(fleet.nodes)} nodes, {found.runs} runs, {found.node_days:.1f} node-days in the "
        f"pool, from {time_text(fleet.start)} to {time_text(fleet.end)}")
    rate = found.rate()
    say(f"failures: {fleet.failures} attributed; "
        f"{'-' if rate is None else f'{1000 * rate:.2f}'} per 1000 node-days")
    by_category = ", ".join(f"{name} {1000 * (found.rate(found.by_category[name]) or 0):.2f}"
                            for name in CATEGORIES if found.by_category.get(name))
    say(f"per 1000 node-days by category: {by_category or 'none'}")
    for gpus in args.gpus or DEFAULT_GPUS:
        mttf = found.job_mttf_s(gpus)
        expected = ettr(mttf, args.checkpoint_interval, args.restart)
        say(f"job MTTF at {gpus} GPUs: {_hours(mttf)} (1/(n*r)); ETTR {percent(expected)} with a checkpoint every "
            f"{duration_text(args.checkpoint_interval)} and {duration_text(args.restart)} to restart")
    say(f"MTTR {duration_text(fleet.mttr_s)}; availability {percent(fleet.availability)}")
    offenders = "; ".join(f"{r.node} {r.check} {r.subject} ({r.outages} times, {time_text(r.first)} .. "
                          f"{time_text(r.last)})" for r in found.repeat_offenders)
    say(f"repeat offenders (the same check on the same GPU or HCA {args.repeat} times within "
        f"{duration_text(args.repeat_window)}): {offenders or 'none'}")
    lemons = "; ".join(f"{n} ({h.lemon.failures} failures)" for n, h in fleet.nodes.items() if h.lemon is not None)
    say(f"lemons (>= {args.lemon_failures} failures within {duration_text(args.lemon_window)}): {lemons or 'none'}")
    slurm = found.slurm
    if slurm is not None:
        say(f"Slurm node events (sacctmgr): {slurm.read} read, {slurm.folded} counted as failures, {slurm.known} "
            f"drains burnin had recorded, {slurm.ignored} neither down nor drained or begun before the period")
    elif unavailable:
        say(unavailable)
    return 0
