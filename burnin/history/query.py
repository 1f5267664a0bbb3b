"""Asking the history: runs, a node's timeline, where a check failed, and what changed between two runs.

Reads a :class:`~burnin.history.store.Store`; what it returns are plain records for the command line to print
(and to write as JSON). A run that never ended (killed outright, or stopped before its gate) has no
decisions: each node it recorded is *incomplete* in it, with the verdicts it judged before it stopped.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from burnin.history.store import FAIL, INCOMPLETE, STATUS_NAMES, HistoryError, Store, safe_text

NOT_ENDED = "RUN-END"
"""The pseudo check an unfinished run's nodes are incomplete for: the run stopped before judging them all."""
NOT_ENDED_REASON = "the run stopped before its end (killed?): its gate never judged the node"


@dataclass(frozen=True, slots=True)
class Run:
    id: int
    kind: str
    started: float
    finished: float | None
    out_dir: str
    topology: str
    nodes: int
    partial: bool
    interrupted: bool
    dry_run: bool

    @property
    def state(self) -> str:
        if self.finished is None:
            return "incomplete (never ended: killed?)"
        for flag, text in ((self.dry_run, "dry run"), (self.interrupted, "interrupted"), (self.partial, "partial")):
            if flag:
                return text
        return "complete"


_RUN_COLUMNS = "id, kind, started, finished, out_dir, topology, nodes, partial, interrupted, dry_run"


def _run(row: tuple[object, ...]) -> Run:
    rid, kind, started, finished, out_dir, topology, nodes, partial, interrupted, dry_run = row
    return Run(int(str(rid)), str(kind), float(str(started)), None if finished is None else float(str(finished)),
               str(out_dir), str(topology), int(str(nodes)), bool(partial), bool(interrupted), bool(dry_run))


def runs(store: Store) -> list[Run]:
    """Every recorded run, oldest first."""
    return [_run(row) for row in store.db.execute(f"SELECT {_RUN_COLUMNS} FROM runs ORDER BY started, id")]  # noqa: S608


def find_run(store: Store, key: str) -> Run:
    """A run by its number or its output folder; HistoryError naming what was asked when there is none."""
    text = key.strip()
    if text.lstrip("#").isdigit():
        row = store.db.execute(f"SELECT {_RUN_COLUMNS} FROM runs WHERE id = ?",  # noqa: S608
                               (int(text.lstrip("#")),)).fetchone()
    else:
        from pathlib import Path

        folders = {text, str(Path(text).resolve()) if text else text, text.rstrip("/")}
        row = next((r for f in folders for r in store.db.execute(
            f"SELECT {_RUN_COLUMNS} FROM runs WHERE out_dir = ? OR origin = ? ORDER BY id DESC LIMIT 1",  # noqa: S608
            (safe_text(f), safe_text(f)))), None)
    if row is None:
        raise HistoryError(f"no run {safe_text(key, 200)!r} in {safe_text(str(store.path), 200)} "
                           "(a run number from `burnin history --runs`, or a run's output folder)")
    return _run(row)


@dataclass
class NodeState:
    """How one run left one node."""

    admitted: bool
    failed: list[str] = field(default_factory=list)
    incomplete: list[str] = field(default_factory=list)
    reason: str = ""

    @property
    def verdict(self) -> str:
        return "admitted" if self.admitted else "rejected" if self.failed else "incomplete"


def node_states(store: Store, run: Run) -> dict[str, NodeState]:
    """Every node of ``run`` and how the run left it (from its gate; from its verdicts if it never ended)."""
    names = store.names("node_names")
    states: dict[str, NodeState] = {}
    for node, admitted, failed, incomplete, reason in store.db.execute(
            "SELECT node, admitted, failed, incomplete, reason FROM decisions WHERE run = ?", (run.id,)):
        states[names[node]] = NodeState(bool(admitted), _split(failed), _split(incomplete), str(reason))
    if run.finished is not None:
        return states
    checks = store.names("check_names")
    for node, check, status in store.db.execute(
            "SELECT node, check_id, status FROM verdicts WHERE run = ?", (run.id,)):
        state = states.setdefault(names[node], NodeState(False, [], [NOT_ENDED], NOT_ENDED_REASON))
        if status == FAIL:
            state.failed.append(checks[check])
        elif status == INCOMPLETE:
            state.incomplete.append(checks[check])
    return states


def _split(text: object) -> list[str]:
    return [part for part in str(text or "").split(",") if part]


@dataclass(frozen=True, slots=True)
class Problem:
    """A check that failed or was incomplete on a node in a run, with what it measured."""

    run: int
    at: float
    node: str
    check: str
    status: str
    measured: str
    expected: str
    reason: str
    value: float | None
    unit: str | None


def problems(store: Store, run: int, node: str | None = None, check: str | None = None) -> list[Problem]:
    """The failed and incomplete verdicts of a run (of one node, of one check)."""
    names, checks, units = store.names("node_names"), store.names("check_names"), store.names("unit_names")
    started = store.db.execute("SELECT started FROM runs WHERE id = ?", (run,)).fetchone()
    at = float(started[0]) if started else 0.0
    query = ("SELECT v.node, v.check_id, v.status, v.value, v.unit, d.measured, d.expected, d.reason "
             "FROM verdicts v LEFT JOIN details d ON d.id = v.detail WHERE v.run = ? AND v.status IN (1, 2)")
    params: tuple[object, ...] = (run,)
    for column, table, name in (("node", "node_names", node), ("check_id", "check_names", check)):
        if name is None:
            continue
        number = store.find_name(table, name)
        if number is None:
            return []
        query += f" AND v.{column} = ?"
        params = (*params, number)
    return [Problem(run, at, names[n], checks[c], STATUS_NAMES[s], m or "", e or "", r or "", value,
                    None if u is None else units.get(u))
            for n, c, s, value, u, m, e, r in store.db.execute(query, params)]


@dataclass(frozen=True, slots=True)
class Action:
    at: float
    action: str
    checks: str
    reason: str
    source: str


@dataclass(frozen=True, slots=True)
class WatchIncident:
    at: float
    kind: str
    check: str
    action: str
    detail: str
    source: str


@dataclass
class TimelineEntry:
    run: Run
    state: NodeState
    problems: list[Problem]


@dataclass
class Timeline:
    node: str
    entries: list[TimelineEntry]
    actions: list[Action]
    incidents: list[WatchIncident] = field(default_factory=list)


def timeline(store: Store, node: str) -> Timeline:
    """Every run that judged ``node`` (its verdict and failed checks with their measurements), every gate
    action on it and every watch incident; HistoryError when the history never saw the node."""
    node_id = store.find_name("node_names", node)
    if node_id is None:
        raise HistoryError(f"node {safe_text(node, 100)!r} is not in {safe_text(str(store.path), 200)}")
    by_id = {r.id: r for r in runs(store)}
    entries: list[TimelineEntry] = []
    decided: set[int] = set()
    for run_id, admitted, failed, incomplete, reason in store.db.execute(
            "SELECT run, admitted, failed, incomplete, reason FROM decisions WHERE node = ? ORDER BY run",
            (node_id,)).fetchall():
        decided.add(run_id)
        state = NodeState(bool(admitted), _split(failed), _split(incomplete), str(reason))
        found = [] if admitted else problems(store, run_id, node)
        entries.append(TimelineEntry(by_id[run_id], state, found))
    for run in by_id.values():  # runs that never ended: what they judged of the node before they stopped
        if run.finished is None and run.id not in decided:
            unfinished = node_states(store, run).get(node)
            if unfinished is not None:
                entries.append(TimelineEntry(run, unfinished, problems(store, run.id, node)))
    entries.sort(key=lambda e: (e.run.started, e.run.id))
    actions = [Action(float(at), str(a), str(c), str(r), str(s)) for at, a, c, r, s in store.db.execute(
        "SELECT at, action, check_ids, reason, source FROM actions WHERE node = ? ORDER BY at", (node_id,))]
    incidents = [WatchIncident(float(at), str(k), str(c), str(a), str(d), str(s))
                 for at, k, c, a, d, s in store.db.execute("SELECT at, kind, check_id, action, detail, source FROM "
                                                           "incidents WHERE node = ? ORDER BY at, id", (node_id,))]
    return Timeline(node, entries, actions, incidents)


@dataclass
class CheckHistory:
    check: str
    runs: int
    """Runs recorded in the history (of any check)."""
    problems: list[Problem]

    def by_node(self) -> dict[str, dict[str, int]]:
        counts: dict[str, dict[str, int]] = defaultdict(lambda: {"fail": 0, "incomplete": 0})
        for problem in self.problems:
            counts[problem.node][problem.status] += 1
        return dict(sorted(counts.items(), key=lambda item: (-item[1]["fail"], -item[1]["incomplete"], item[0])))


def check_history(store: Store, check: str) -> CheckHistory:
    """Where and how often ``check`` failed (or could not be measured)."""
    check_id = store.find_name("check_names", check)
    if check_id is None:
        raise HistoryError(f"check {safe_text(check, 60)!r} was never recorded in "
                           f"{safe_text(str(store.path), 200)}")
    run_ids = [int(r) for (r,) in store.db.execute(
        "SELECT DISTINCT run FROM verdicts WHERE check_id = ? AND status IN (1, 2) ORDER BY run", (check_id,))]
    found = [p for run in run_ids for p in problems(store, run, check=check)]
    recorded = store.db.execute("SELECT count(*) FROM runs").fetchone()[0]
    return CheckHistory(check, int(recorded), found)
