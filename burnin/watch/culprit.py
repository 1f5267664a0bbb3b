"""Which node stalled first: the watch's stall records of several nodes, grouped into episodes, compared (pure).

Every node of a job whose collective stalls ends up stalled: the stuck rank's node and every node waiting on
it. The node whose compute HCAs' traffic counters stopped first is the likely culprit. A record says when its
node's counters were last seen changing: in ``(counters_changed_after, counters_changed_at]`` (two samples of
the watch); ``counters_changed_at`` None means they never moved while its watch ran (from ``watched_since``),
so they stopped at or before that, at an unknown time.

Episodes: the stalls whose spans overlap, merged: a span runs from the counters' stop to the stall's end (its
``stall-ended`` record; without one the stall is still on, or its watch stopped: open). In an episode of two
nodes or more, a node is named only when its counters stopped, with ``margin`` seconds to spare (clocks of two nodes
differ), before every other node's could have: its interval ends before each other one begins. Fail closed,
never blame: one node alone is not compared with anything; intervals that overlap, or a node whose counters
never moved while watched, name nobody; and any record that could not be read or trusted (a torn or garbled
line, a field missing, times out of order or in the future, a journal naming two nodes) names nobody at all,
and says why.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from burnin.history.records import finite_time, impossible_time, time_text

DEFAULT_MARGIN_S = 1.0


@dataclass(frozen=True, slots=True)
class StallRecord:
    node: str
    found_at: float
    since: float
    changed_at: float | None  # the sample that last saw the counters change; None: never while watched
    changed_after: float | None  # the sample before it
    watched_since: float
    action: str
    origin: str  # file:line
    ended_at: float | None = None  # its stall-ended record's time; None: still stalled (or its watch stopped)

    @property
    def stopped_from(self) -> float:
        """The earliest the counters may have stopped (-inf: never seen moving)."""
        return -math.inf if self.changed_after is None else self.changed_after

    @property
    def stopped_by(self) -> float:
        """The latest they may have stopped."""
        return self.watched_since if self.changed_at is None else self.changed_at


@dataclass(frozen=True, slots=True)
class Doubt:
    where: str
    why: str


@dataclass
class Episode:
    records: list[StallRecord] = field(default_factory=list)
    culprit: str | None = None
    verdict: str = ""

    @property
    def start(self) -> float:
        return min(r.stopped_by for r in self.records)


def _number(value: object) -> float | None:
    return None if value is None else finite_time(value)


def _record(entry: dict[str, Any], origin: str, now: float) -> StallRecord:
    """One stall entry of the journal, checked; ValueError says what is wrong with it."""
    stall = entry.get("stall")
    node = entry.get("node")
    if not isinstance(stall, dict) or not isinstance(node, str) or not node:
        raise ValueError("a stall entry without its node or its 'stall' figures")
    if stall.get("node") != node:
        raise ValueError(f"the entry names node {node!r}, its figures {stall.get('node')!r}")
    found, since, watched = (finite_time(stall.get(k)) for k in ("found_at", "since", "watched_since"))
    changed_at, changed_after = _number(stall.get("counters_changed_at")), _number(stall.get("counters_changed_after"))
    if found is None or since is None or watched is None:
        raise ValueError("found_at, since and watched_since must be times")
    if (stall.get("counters_changed_at") is None) != (stall.get("counters_changed_after") is None) or (
            stall.get("counters_changed_at") is not None and (changed_at is None or changed_after is None)):
        raise ValueError("counters_changed_at and counters_changed_after must be two times, or both null")
    moved = [changed_after, changed_at] if changed_at is not None and changed_after is not None else []
    order = [watched, *moved, since, found]
    if any(later < earlier for earlier, later in itertools.pairwise(order)) or (moved and not moved[0] < moved[1]):
        raise ValueError("times out of order (watched_since <= counters_changed_after < counters_changed_at "
                         "<= since <= found_at)")
    wrong = impossible_time(found, now)
    if wrong is not None:
        raise ValueError(f"found_at {wrong}")
    return StallRecord(node, found, since, changed_at, changed_after, watched, str(entry.get("action", "")), origin)


def read_stalls(lines: Sequence[str], origin: str, now: float) -> tuple[list[StallRecord], list[Doubt], set[str]]:
    """The stall records of one journal's lines, what could not be trusted, and the nodes it names."""
    records: list[StallRecord] = []
    doubts: list[Doubt] = []
    nodes: set[str] = set()
    ends: dict[float, float] = {}  # a stall's since -> when it ended
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{origin}:{number}"
        try:
            entry = json.loads(line)
        except ValueError:
            entry = None
        if not isinstance(entry, dict):
            doubts.append(Doubt(where, "not a JSON object: a torn or garbled line may have been a stall"))
            continue
        if isinstance(entry.get("node"), str):
            nodes.add(entry["node"])
        if entry.get("kind") == "stall-ended":
            figures = entry.get("stall")
            figures = figures if isinstance(figures, dict) else {}
            since, ended = finite_time(figures.get("since")), finite_time(figures.get("ended_at"))
            if since is None or ended is None:
                doubts.append(Doubt(where, "a stall-ended entry without its times"))
            else:
                ends[since] = ended
            continue
        if entry.get("kind") != "stall":
            continue
        try:
            records.append(_record(entry, where, now))
        except ValueError as exc:
            doubts.append(Doubt(where, str(exc)))
    records = [dataclasses.replace(r, ended_at=ends.get(r.since)) for r in records]
    if len(nodes) > 1:
        doubts.append(Doubt(origin, f"names {len(nodes)} nodes ({', '.join(sorted(nodes)[:5])}): a watch's "
                                    "journal is one node's"))
    return records, doubts, nodes


def episodes(records: Iterable[StallRecord]) -> list[Episode]:
    """Stalls whose spans (counters stopped .. stall ended, or open) overlap, merged; in time order."""
    found: list[Episode] = []
    end = -math.inf
    for record in sorted(records, key=lambda r: (r.stopped_by, r.node)):
        if not found or record.stopped_by > end:
            found.append(Episode())
            end = -math.inf
        found[-1].records.append(record)
        end = max(end, math.inf if record.ended_at is None else record.ended_at)
    return found


def judge(episode: Episode, doubts: Sequence[Doubt], margin_s: float = DEFAULT_MARGIN_S) -> Episode:
    """Name the node whose counters stopped first, or say why nobody can be named."""
    first: dict[str, StallRecord] = {}
    for record in sorted(episode.records, key=lambda r: r.stopped_by):
        first.setdefault(record.node, record)
    nodes = list(first.values())
    if doubts:
        episode.verdict = (f"no culprit named: {len(doubts)} record(s) could not be trusted "
                           f"(first: {doubts[0].where}: {doubts[0].why})")
        return episode
    if len(nodes) < 2:
        episode.verdict = f"only {nodes[0].node} stalled: nothing to compare it with"
        return episode
    never = [r.node for r in nodes if r.changed_at is None]
    for candidate in nodes:
        others = [r for r in nodes if r is not candidate]
        if all(candidate.stopped_by + margin_s < other.stopped_from for other in others):
            lead = min(other.stopped_from for other in others) - candidate.stopped_by
            episode.culprit = candidate.node
            episode.verdict = (f"likely culprit: {candidate.node} (its counters stopped first, at least "
                               f"{lead:.1f} s before any other node's)")
            return episode
    if never:
        episode.verdict = (f"no culprit named: the counters of {', '.join(never)} never moved while watched "
                           "(they stopped before the watch began, at an unknown time)")
    else:
        ordered = sorted(nodes, key=lambda r: r.stopped_by)
        episode.verdict = (f"no culprit named: {ordered[0].node} and {ordered[1].node} stopped too close together "
                           f"to tell apart (their intervals overlap within {margin_s:g} s)")
    return episode


def describe(record: StallRecord) -> str:
    if record.changed_at is None:
        moved = f"counters never moved while watched (since {time_text(record.watched_since)})"
    else:
        assert record.changed_after is not None
        moved = (f"counters last moved between {time_text(record.changed_after)} and "
                 f"{time_text(record.changed_at)}")
    ended = "still on (or its watch stopped)" if record.ended_at is None else f"over {time_text(record.ended_at)}"
    return f"{record.node}: {moved}; stall found {time_text(record.found_at)} ({record.action or '?'}), {ended}"
