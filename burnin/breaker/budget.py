"""The breaker's budget, without side effects: what counts against it and whether one more node may go.

The shared state is Slurm's own: ``scontrol --oneliner show node`` lists every node, and a node
burnin drained carries a reason starting with ``burnin:`` stamped by slurmctld with its time
(``Reason=burnin: GPU-04 ... [root@2026-12-01T18:40:03]``, or a ``ReasonTime=`` field). The nodes
burnin drained within the window count; the limit is the larger of ``nodes`` and ``percent`` of
the nodes Slurm lists, plus what an operator allowed for the current window.

A drain whose time cannot be read counts (the breaker errs towards holding, never towards taking
more nodes out); so does one stamped in the future (a controller clock ahead of this host's).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from burnin.transport.slurm_jobs import parse_show_node

DEFAULT_NODES = 2
DEFAULT_PERCENT = 5.0
DEFAULT_WINDOW_S = 600.0

_STAMP_RE = re.compile(r"(?:^|\s)Reason=.*\[[^\]\s@]*@([^\]\s]+)\](?=\s|$)")
_REASON_TIME_RE = re.compile(r"(?:^|\s)ReasonTime=(\S+)")
_NAME_RE = re.compile(r"^NodeName=(\S+)")
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S"


@dataclass(frozen=True, slots=True)
class Settings:
    """At most the larger of ``nodes`` and ``percent``% of the nodes taken out per ``window_s`` seconds."""

    nodes: int = DEFAULT_NODES
    percent: float = DEFAULT_PERCENT
    window_s: float = DEFAULT_WINDOW_S
    record: frozenset[str] = frozenset()  # check ids in record mode (shadow): their drains are only recorded

    def record_only(self, checks: tuple[str, ...] | None) -> bool:
        """A drain for ``checks`` is only recorded when every one of them is in record mode (none unread)."""
        return bool(checks) and checks is not None and all(check in self.record for check in checks)

    def base_limit(self, total: int) -> int:
        return max(self.nodes, math.floor(total * self.percent / 100.0))

    def describe(self) -> str:
        return f"the larger of {self.nodes} nodes and {self.percent:g}% per {window_text(self.window_s)}"


@dataclass(frozen=True, slots=True)
class Allowance:
    """``burnin breaker allow N``: N more nodes until ``until`` (epoch seconds)."""

    extra: int
    granted: float
    until: float

    def active(self, now: float) -> bool:
        return self.granted <= now < self.until


@dataclass(frozen=True, slots=True)
class Drained:
    """A node Slurm shows drained with burnin's reason; ``at`` None when its time cannot be read."""

    name: str
    reason: str
    at: float | None


@dataclass(frozen=True, slots=True)
class Fleet:
    """What Slurm showed: how many nodes, and those burnin drained."""

    total: int
    drained: tuple[Drained, ...]

    def names(self) -> set[str]:
        return {node.name for node in self.drained}


@dataclass(slots=True)
class Budget:
    """The budget now: its limit and the nodes that count against it (name -> time, None unknown)."""

    limit: int
    settings: Settings
    total: int
    counted: dict[str, float | None] = field(default_factory=dict)
    out_already: set[str] = field(default_factory=set)  # drained by burnin before the window
    extra: int = 0

    @property
    def room(self) -> int:
        return max(0, self.limit - len(self.counted))

    def take(self, node: str, now: float) -> str | None:
        """Count ``node`` as taken out now; why not (the cause, one line) when the budget is spent.

        A node burnin holds out of service already (within the window or before it) costs nothing:
        draining it again for another reason takes nothing more out.
        """
        if node in self.counted or node in self.out_already:
            return None
        if len(self.counted) >= self.limit:
            return self.cause()
        self.counted[node] = now
        return None

    def cause(self) -> str:
        shown = ", ".join(f"{name}{_at(at)}" for name, at in sorted(self.counted.items())[:5])
        more = f" and {len(self.counted) - 5} more" if len(self.counted) > 5 else ""
        return (f"{len(self.counted)} of {self.limit} nodes taken out by burnin in the last "
                f"{window_text(self.settings.window_s)} ({shown}{more})")


def window_text(seconds: float) -> str:
    if seconds % 3600 == 0:
        return f"{seconds / 3600:g} h"
    if seconds % 60 == 0:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"


def _at(at: float | None) -> str:
    return " at an unreadable time" if at is None else time.strftime(" at %H:%M:%S", time.localtime(at))


def parse_time(text: str) -> float | None:
    """Slurm's ``2026-12-01T18:40:03`` (the controller's local time) as epoch seconds; None if unreadable."""
    try:
        return time.mktime(time.strptime(text, _TIME_FORMAT))
    except (ValueError, OverflowError):
        return None


def parse_fleet(text: str) -> Fleet:
    """``scontrol --oneliner show node`` output -> the node count and the nodes burnin drained, with times."""
    nodes = parse_show_node(text)
    stamps: dict[str, float | None] = {}
    for line in text.splitlines():
        name = _NAME_RE.match(line.strip())
        if name is None:
            continue
        stamp = _STAMP_RE.search(line) or _REASON_TIME_RE.search(line)
        stamps[name.group(1)] = parse_time(stamp.group(1)) if stamp else None
    drained = tuple(Drained(node.name, node.reason, stamps.get(node.name))
                    for node in nodes.values() if node.drained and node.ours)
    return Fleet(len(nodes), drained)


def budget(fleet: Fleet, settings: Settings, now: float, allowance: Allowance | None = None) -> Budget:
    """The budget at ``now``: burnin's drains within the window (or of unknown time) count against it."""
    extra = allowance.extra if allowance is not None and allowance.active(now) else 0
    result = Budget(settings.base_limit(fleet.total) + extra, settings, fleet.total, extra=extra)
    since = now - settings.window_s
    for node in fleet.drained:
        if node.at is None or node.at >= since:
            result.counted[node.name] = node.at
        else:
            result.out_already.add(node.name)
    return result


def admit(plan: Budget, nodes: Iterable[str], now: float) -> tuple[list[str], dict[str, str]]:
    """Which of ``nodes`` (in order) may be taken out, and the cause for each one held."""
    allowed: list[str] = []
    held: dict[str, str] = {}
    for node in nodes:
        cause = plan.take(node, now)
        if cause is None:
            allowed.append(node)
        else:
            held[node] = cause
    return allowed, held
