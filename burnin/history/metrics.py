"""REL-01/REL-02 from observations: failures, outages, MTTR, availability and lemon nodes (pure).

Each node's observations in time order make a timeline. A rejection starts an
*outage* (the node is out of the pool) that lasts until the node is next
admitted; rejections in between belong to the same outage (a node rejected by
three nightly runs before its repair is one failure, not three). An outage in
which some check failed is a *failure attributed to the node*; one in which
checks were only incomplete (unreachable, not measured) is not attributed, but
it is still time out of the pool.

- node MTTR: mean duration of the node's closed outages (rejection to next admission);
- availability: time in the pool / time observed (from the node's first observation
  to the end of the history; each observation's state holds until the next one);
- lemon: at least ``k`` attributed failures starting within ``window`` seconds
  (check-catalog REL-02: 3 in 30 days [U]).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from burnin.history.records import Observation, Source

DAY_S = 86400.0
DEFAULT_LEMON_FAILURES = 3
DEFAULT_LEMON_WINDOW_S = 30 * DAY_S


@dataclass
class Outage:
    """From a rejection to the next admission (``end`` None: still out at the end of the history)."""

    start: float
    end: float | None = None
    failed: list[str] = field(default_factory=list)
    incomplete: list[str] = field(default_factory=list)
    reason: str = ""
    origins: list[str] = field(default_factory=list)
    sources: list[Source] = field(default_factory=list)

    @property
    def attributed(self) -> bool:
        return bool(self.failed)

    def add(self, observation: Observation) -> None:
        """One more rejection during this outage. The reason shown is the first failure's (else the first)."""
        if not self.reason or (observation.failed and not self.failed):
            self.reason = observation.reason
        self.failed += [c for c in observation.failed if c not in self.failed]
        self.incomplete += [c for c in observation.incomplete if c not in self.incomplete]
        if observation.origin and observation.origin not in self.origins:
            self.origins.append(observation.origin)
        if observation.source not in self.sources:
            self.sources.append(observation.source)


@dataclass(frozen=True, slots=True)
class Lemon:
    failures: int
    first: float
    last: float


@dataclass
class NodeHistory:
    node: str
    first_seen: float
    last_seen: float
    observations: int = 0
    outages: list[Outage] = field(default_factory=list)
    in_pool_s: float = 0.0
    observed_s: float = 0.0
    lemon: Lemon | None = None

    @property
    def failures(self) -> list[Outage]:
        return [o for o in self.outages if o.attributed]

    @property
    def repairs_s(self) -> list[float]:
        return [o.end - o.start for o in self.outages if o.end is not None]

    @property
    def mttr_s(self) -> float | None:
        repairs = self.repairs_s
        return sum(repairs) / len(repairs) if repairs else None

    @property
    def availability(self) -> float | None:
        return self.in_pool_s / self.observed_s if self.observed_s > 0 else None

    @property
    def out_since(self) -> float | None:
        """When the node left the pool, if it is still out at the end of the history."""
        return self.outages[-1].start if self.outages and self.outages[-1].end is None else None


def node_history(node: str, observations: Iterable[Observation], until: float) -> NodeHistory:
    """One node's timeline up to ``until`` (the end of the history)."""
    ordered = sorted(observations, key=lambda o: o.at)
    history = NodeHistory(node, ordered[0].at, ordered[-1].at, len(ordered))
    history.observed_s = max(0.0, until - history.first_seen)
    in_pool_since: float | None = None
    open_outage: Outage | None = None
    for observation in ordered:
        if observation.admitted:
            if open_outage is not None:
                open_outage.end = observation.at
                open_outage = None
            if in_pool_since is None:
                in_pool_since = observation.at
            continue
        if open_outage is None:
            open_outage = Outage(observation.at)
            history.outages.append(open_outage)
            if in_pool_since is not None:
                history.in_pool_s += observation.at - in_pool_since
                in_pool_since = None
        open_outage.add(observation)
    if in_pool_since is not None:
        history.in_pool_s += max(0.0, until - in_pool_since)
    return history


def find_lemon(failure_starts: list[float], k: int, window_s: float) -> Lemon | None:
    """The most failures starting within any ``window_s``, if at least ``k`` (the earliest such window)."""
    starts = sorted(failure_starts)
    best: Lemon | None = None
    for i, first in enumerate(starts):
        inside = [t for t in starts[i:] if t - first <= window_s]
        if len(inside) >= k and (best is None or len(inside) > best.failures):
            best = Lemon(len(inside), first, inside[-1])
    return best


@dataclass
class FleetHistory:
    nodes: dict[str, NodeHistory]
    start: float
    end: float
    lemon_failures: int
    lemon_window_s: float

    @property
    def failures(self) -> int:
        return sum(len(h.failures) for h in self.nodes.values())

    @property
    def failures_by_check(self) -> Counter[str]:
        """Attributed failures per check id (a failure naming two checks counts for both)."""
        return Counter(c for h in self.nodes.values() for o in h.failures for c in o.failed)

    @property
    def lemons(self) -> list[str]:
        return [n for n, h in self.nodes.items() if h.lemon is not None]

    @property
    def out_now(self) -> list[str]:
        return [n for n, h in self.nodes.items() if h.out_since is not None]

    @property
    def mttr_s(self) -> float | None:
        repairs = [r for h in self.nodes.values() for r in h.repairs_s]
        return sum(repairs) / len(repairs) if repairs else None

    @property
    def node_days_in_pool(self) -> float:
        return sum(h.in_pool_s for h in self.nodes.values()) / DAY_S

    @property
    def availability(self) -> float | None:
        observed = sum(h.observed_s for h in self.nodes.values())
        return sum(h.in_pool_s for h in self.nodes.values()) / observed if observed > 0 else None

    @property
    def failures_per_1000_node_days(self) -> float | None:
        """REL-02's node failure rate r (attributed failures per node-day in the pool), times 1000."""
        days = self.node_days_in_pool
        return 1000 * self.failures / days if days > 0 else None


def fleet_history(observations: Iterable[Observation], *, lemon_failures: int = DEFAULT_LEMON_FAILURES,
                  lemon_window_s: float = DEFAULT_LEMON_WINDOW_S) -> FleetHistory:
    """Every node's history over the whole period (from the first observation to the last)."""
    by_node: dict[str, list[Observation]] = {}
    for observation in observations:
        by_node.setdefault(observation.node, []).append(observation)
    if not by_node:
        raise ValueError("no observation")
    start = min(o.at for group in by_node.values() for o in group)
    end = max(o.at for group in by_node.values() for o in group)
    nodes: dict[str, NodeHistory] = {}
    for node in sorted(by_node):
        history = node_history(node, by_node[node], end)
        history.lemon = find_lemon([o.start for o in history.failures], lemon_failures, lemon_window_s)
        nodes[node] = history
    return FleetHistory(nodes, start, end, lemon_failures, lemon_window_s)
