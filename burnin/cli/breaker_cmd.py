"""``burnin breaker status|allow N|set``: the fleet-wide circuit breaker (docs/breaker.md).

``status`` shows the budget (the settings, the limit for the nodes Slurm lists), what counts against it
(the nodes burnin drained in the window, with their times), the room left and the nodes held in the
window. ``allow N`` widens the budget by N nodes at once, for one window from now. ``set`` writes the
site's settings. ``retry`` asks again for the drains of fatal events the breaker held (the watch's), once the
budget has room. Exit 0; 2 on a bad number or a settings file that cannot be read; 3 when Slurm cannot
be read for ``status``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value


def _percent(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"a percentage from 0 to 100, not {text}")
    return value


def _seconds(text: str) -> float:
    units = {"s": 1, "m": 60, "min": 60, "h": 3600}
    number = text.rstrip("minsh")
    unit = text[len(number):] or "s"
    try:
        value = float(number) * units[unit]
    except (ValueError, KeyError):
        raise argparse.ArgumentTypeError(f"a duration like 600, 10m or 1h, not {text!r}") from None
    if not value >= 1:
        raise argparse.ArgumentTypeError(f"at least one second, not {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    verbs = parser.add_subparsers(dest="breaker_verb", metavar="VERB", required=True)
    status = verbs.add_parser("status", help="the budget, the nodes that count against it, those held")
    status.add_argument("--json", action="store_true", help="print it as JSON")
    allow = verbs.add_parser("allow", help="N more nodes may be taken out, from now for one window")
    allow.add_argument("extra", type=_count, metavar="N")
    retry = verbs.add_parser("retry", help="ask again for the drains of fatal events the breaker held (the watch's)")
    retry.add_argument("--since", type=_seconds, default=3600.0,
                       help="holds from this far back: 600, 10m, 1h (default 1h)")
    retry.add_argument("--dry-run", action="store_true", help="print what it would drain; drain nothing")
    settings = verbs.add_parser("set", help="the site's settings (kept in breaker.json in the state directory)")
    settings.add_argument("--nodes", type=_count, help="at least this many nodes per window (default 2)")
    settings.add_argument("--percent", type=_percent, help="or this %% of the nodes, if more (default 5)")
    settings.add_argument("--window", type=_seconds, help="the window: 600, 10m, 1h (default 10m)")
    settings.add_argument("--record", metavar="IDS", help="check ids in record mode (shadow: their drains are only "
                                                          "recorded), comma-separated; '' for none")


def run(args: argparse.Namespace) -> int:
    if args.breaker_verb == "allow":
        return _allow(args.extra)
    if args.breaker_verb == "set":
        return _set(args)
    if args.breaker_verb == "retry":
        return _retry(since=args.since, dry_run=args.dry_run)
    return _status(as_json=args.json)


def _allow(extra: int) -> int:
    from burnin.breaker import state
    from burnin.breaker.budget import Allowance, window_text

    settings, _ = state.load()
    now = time.time()
    path = state.save(allowance=Allowance(extra, now, now + settings.window_s))
    print(f"burnin breaker: {extra} more node(s) may be taken out until "
          f"{time.strftime('%H:%M:%S', time.localtime(now + settings.window_s))} "
          f"(one window, {window_text(settings.window_s)}; {path})")
    return 0


def _set(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from burnin.breaker import state

    settings, _ = state.load()
    changes = {key: value for key, value in (("nodes", args.nodes), ("percent", args.percent),
                                              ("window_s", args.window)) if value is not None}
    settings = replace(settings, **changes)
    if args.record is not None:
        settings = replace(settings, record=frozenset(c.strip() for c in args.record.split(",") if c.strip()))
    path = state.save(settings=settings)
    record = f"; record mode: {','.join(sorted(settings.record))}" if settings.record else ""
    print(f"burnin breaker: at most {settings.describe()}{record} ({path})")
    return 0


def _status(*, as_json: bool) -> int:
    from burnin.breaker import state
    from burnin.breaker.budget import budget, window_text
    from burnin.breaker.guard import read_fleet
    from burnin.text import printable
    from burnin.transport.slurm import QUICK_TIMEOUT, SlurmClient

    settings, allowance = state.load()
    fleet, error = read_fleet(SlurmClient(), QUICK_TIMEOUT)
    if fleet is None:
        print(printable(f"burnin breaker: cannot read the nodes from Slurm: {error}"), file=sys.stderr)
        return 3
    now = time.time()
    plan = budget(fleet, settings, now, allowance)
    held = state.read_held(now - settings.window_s)
    if as_json:
        document = {
            "settings": {"nodes": settings.nodes, "percent": settings.percent, "window_s": settings.window_s,
                         "record": sorted(settings.record)},
            "nodes": fleet.total, "limit": plan.limit, "allowed_extra": plan.extra, "room": plan.room,
            "counted": [{"node": n, "drained_at": at} for n, at in sorted(plan.counted.items())],
            "held": held,
        }
        sys.stdout.write(json.dumps(document, indent=1) + "\n")
        return 0
    extra = f" + {plan.extra} allowed until {time.strftime('%H:%M:%S', time.localtime(allowance.until))}" \
        if allowance is not None and plan.extra else ""
    print(f"burnin breaker: at most {plan.limit} node(s) per {window_text(settings.window_s)} "
          f"({settings.describe()}, of {fleet.total} nodes{extra}); room for {plan.room} more")
    print(f"taken out by burnin in the last {window_text(settings.window_s)}: {len(plan.counted)}")
    for node, at in sorted(plan.counted.items()):
        when = "time unreadable (counted)" if at is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))
        print(f"  {node}  drained {when}")
    if settings.record:
        print(f"record mode (drains only recorded) for: {', '.join(sorted(settings.record))}")
    print(f"held by the breaker or recorded in the last {window_text(settings.window_s)}: {len(held)}")
    for entry in held:
        when = time.strftime("%H:%M:%S", time.localtime(entry["at"]))
        what = "recorded" if entry.get("mode") == "record" else "held"
        print(printable(f"  {entry.get('node')}  {when} {what} by {entry.get('by')}: {entry.get('cause')}"
                        f" [{entry.get('reason')}]", limit=400))
    return 0


def _retry(*, since: float, dry_run: bool) -> int:
    """Each held fatal event's drain through the gate's drain (the budget decides again); exit 1 when one is
    still held or could not be sent."""
    import io

    from burnin.breaker import state
    from burnin.breaker.retry import pending
    from burnin.gate.slurm import drain
    from burnin.text import printable

    waiting = pending(state.read_held(time.time() - since))
    if not waiting:
        print("burnin breaker: no fatal event held by the breaker to ask again for")
        return 0
    code = 0
    for item in waiting:
        err = io.StringIO()
        done = drain(item.node, item.reason, dry_run=dry_run, out=sys.stdout, err=err)
        when = time.strftime("%H:%M:%S", time.localtime(item.at))
        said = " ".join(err.getvalue().split())
        if done:
            print(printable(f"burnin breaker: {item.node}: held at {when}, now drained ({item.reason})"))
        elif said:
            code = 1
            print(printable(f"burnin breaker: {item.node}: held at {when}, not drained: {said}"))
        else:  # drained since, or held by someone else: the gate's rule leaves it as it is
            print(printable(f"burnin breaker: {item.node}: held at {when}; out of service already or "
                            "held by someone else, left as it is"))
    return code
