"""What changed between two runs (``burnin diff``), and measurements falling steadily (TREND findings).

A diff names only changes: nodes newly failing a check, newly admitted, newly incomplete, and measurements
that moved by more than a tolerance between the two runs, over the nodes both runs judged. A trend is a
node's measurement falling run after run over its last N runs, by more than a tolerance in all, while the
check may still pass; a run in which the check measured nothing (incomplete, NaN) breaks the series: a
missing measurement is never a fall.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass

from burnin.history.query import Problem, Run, node_states, problems, runs
from burnin.history.store import FAIL, STATUS_NAMES, HistoryError, Store

DEFAULT_TOLERANCE = 0.05
DEFAULT_TREND_RUNS = 5
DEFAULT_TREND_DROP = 0.05


def number(value: float) -> str:
    """``362``, ``333.9``: one decimal at most, as the checks write throughputs."""
    return f"{value:.1f}".rstrip("0").rstrip(".")


@dataclass(frozen=True, slots=True)
class Moved:
    node: str
    check: str
    before: float
    after: float
    unit: str

    @property
    def change(self) -> float:
        return (self.after - self.before) / self.before if self.before else float("inf")

    def text(self) -> str:
        return (f"{self.node} {self.check} {number(self.before)} -> {number(self.after)} {self.unit} "
                f"({100 * self.change:+.1f}%)")


@dataclass
class Diff:
    before: Run
    after: Run
    nodes: list[str]
    """The nodes both runs judged."""
    newly_failing: dict[str, list[Problem]]
    newly_admitted: list[str]
    newly_incomplete: dict[str, list[str]]
    moved: list[Moved]
    only_before: list[str]
    only_after: list[str]

    @property
    def empty(self) -> bool:
        return not (self.newly_failing or self.newly_admitted or self.newly_incomplete or self.moved)


def default_pair(store: Store) -> tuple[Run, Run]:
    """The last run and the latest run before it over the same nodes (not dry runs, nor partial ones: they judged
    a subset of the checks; a run killed before its end is one)."""
    recorded = [r for r in runs(store) if not (r.dry_run or r.partial) and r.kind != "probe"]
    if len(recorded) < 2:
        raise HistoryError(f"{len(recorded)} run(s) in {store.path}: a diff needs two")
    after = recorded[-1]
    nodes_after = set(node_states(store, after))
    for before in reversed(recorded[:-1]):
        if set(node_states(store, before)) == nodes_after:
            return before, after
    raise HistoryError(f"no run before run {after.id} judged the same {len(nodes_after)} nodes: "
                       "name the two runs (burnin diff RUN_A RUN_B)")


def _values(store: Store, run: int) -> dict[tuple[int, int], tuple[float, int | None]]:
    return {(node, check): (float(value), unit) for node, check, value, unit in store.db.execute(
        "SELECT node, check_id, value, unit FROM verdicts WHERE run = ? AND value IS NOT NULL", (run,))}


def diff(store: Store, before: Run, after: Run, *, tolerance: float = DEFAULT_TOLERANCE) -> Diff:
    states_before, states_after = node_states(store, before), node_states(store, after)
    shared = sorted(set(states_before) & set(states_after))
    failing: dict[str, list[Problem]] = {}
    admitted: list[str] = []
    incomplete: dict[str, list[str]] = {}
    problems_after: dict[str, list[Problem]] = defaultdict(list)
    for problem in problems(store, after.id):
        problems_after[problem.node].append(problem)
    for node in shared:
        old, new = states_before[node], states_after[node]
        fresh = [c for c in new.failed if c not in old.failed]
        if fresh:
            found = {p.check: p for p in problems_after[node] if p.status == STATUS_NAMES[FAIL]}
            failing[node] = [found.get(c) or Problem(after.id, after.started, node, c, "fail", "", "", "", None, None)
                             for c in fresh]
        if new.admitted and not old.admitted:
            admitted.append(node)
        unmeasured = [c for c in new.incomplete if c not in old.incomplete and c not in new.failed]
        if unmeasured and not new.admitted:
            incomplete[node] = unmeasured
    names, checks, units = store.names("node_names"), store.names("check_names"), store.names("unit_names")
    values_before = _values(store, before.id)
    shared_set = set(shared)
    moved = []
    for key, (value, unit) in _values(store, after.id).items():
        old_value = values_before.get(key)
        if old_value is None or old_value[1] != unit or names[key[0]] not in shared_set:
            continue
        if old_value[0] > 0 and abs(value - old_value[0]) / old_value[0] > tolerance:
            moved.append(Moved(names[key[0]], checks[key[1]], old_value[0], value,
                               "" if unit is None else units.get(unit, "")))
    moved.sort(key=lambda m: (m.node, m.check))
    return Diff(before, after, shared, failing, admitted, incomplete, moved,
                sorted(set(states_before) - set(states_after)), sorted(set(states_after) - set(states_before)))


@dataclass(frozen=True, slots=True)
class Trend:
    node: str
    check: str
    unit: str
    values: tuple[float, ...]
    runs: tuple[int, ...]
    slope: float
    """Change per run, from a least-squares fit."""
    status: str
    """The check's verdict in the last run (a trend matters most while it still passes)."""

    @property
    def change(self) -> float:
        return (self.values[-1] - self.values[0]) / self.values[0]

    def text(self) -> str:
        rate = 100 * self.slope / self.values[0]
        return (f"TREND {self.node} {self.check} {number(self.values[0])} -> {number(self.values[-1])} {self.unit} "
                f"over the last {len(self.values)} runs ({100 * self.change:+.1f}%, {rate:+.1f}% per run), "
                f"{_STANDING.get(self.status, self.status)}")


_STANDING = {"pass": "still passing", "fail": "now failing"}


def falling(values: list[float | None], *, drop: float = DEFAULT_TREND_DROP) -> float | None:
    """The least-squares slope of ``values`` when they fall steadily by more than ``drop`` in all: every value
    present and above 0, no step up by more than half the mean step down, the fit and the ends both down by more
    than ``drop`` of the first value; None otherwise."""
    if len(values) < 3 or any(v is None or not v > 0 for v in values):
        return None
    series = [float(v) for v in values if v is not None]
    n = len(series)
    mean_x, mean_y = (n - 1) / 2, sum(series) / n
    slope = sum((i - mean_x) * (y - mean_y) for i, y in enumerate(series)) / sum((i - mean_x) ** 2 for i in range(n))
    first = series[0]
    if slope >= 0 or -slope * (n - 1) / first <= drop or (first - series[-1]) / first <= drop:
        return None
    steps = [b - a for a, b in itertools.pairwise(series)]
    if max(steps) > -slope / 2:
        return None
    return slope


def trends(store: Store, *, node: str | None = None, last: int = DEFAULT_TREND_RUNS,
           drop: float = DEFAULT_TREND_DROP) -> list[Trend]:
    """Measurements falling steadily over each node's last ``last`` runs (of ``node`` only, if named)."""
    node_id = None if node is None else store.find_name("node_names", node)
    if node is not None and node_id is None:
        return []
    if node_id is not None:
        run_ids = [int(r) for (r,) in store.db.execute(
            "SELECT run FROM decisions WHERE node = ? ORDER BY run DESC LIMIT ?", (node_id, last))]
    else:
        run_ids = [r.id for r in runs(store) if not r.dry_run][-last * 2:][::-1]
    measured = sorted({int(c) for run in run_ids for (c,) in store.db.execute(
        "SELECT DISTINCT check_id FROM verdicts WHERE run = ? AND value IS NOT NULL", (run,))})
    if not measured:
        return []
    series: dict[tuple[int, int], list[tuple[int, float | None, int, int | None]]] = defaultdict(list)
    among = ", ".join("?" * len(measured))  # only the checks that measure a number: every verdict of theirs
    for run in sorted(run_ids):
        query = f"SELECT node, check_id, value, status, unit FROM verdicts WHERE run = ? AND check_id IN ({among})"  # noqa: S608
        params: tuple[object, ...] = (run, *measured)
        if node_id is not None:
            query += " AND node = ?"
            params = (*params, node_id)
        for n, c, value, status, unit in store.db.execute(query, params):
            series[(n, c)].append((run, value, status, unit))
    names, checks, units = store.names("node_names"), store.names("check_names"), store.names("unit_names")
    found = []
    for (n, c), points in series.items():
        tail = points[-last:]
        if len(tail) < last or all(value is None for _, value, _, _ in tail):
            continue
        unit_ids = {unit for _, _, _, unit in tail}
        slope = falling([value for _, value, _, _ in tail], drop=drop) if len(unit_ids) == 1 else None
        if slope is None:
            continue
        unit = next(iter(unit_ids))
        found.append(Trend(names[n], checks[c], "" if unit is None else units.get(unit, ""),
                           tuple(float(v) for _, v, _, _ in tail if v is not None),
                           tuple(r for r, _, _, _ in tail), slope, STATUS_NAMES[tail[-1][2]]))
    return sorted(found, key=lambda t: (t.change, t.node, t.check))
