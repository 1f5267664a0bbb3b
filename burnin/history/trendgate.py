"""A TREND that fails the node, by the site's choice (``burnin run --fail-on-trend 5%``).

By default a measurement falling steadily over a node's last runs is only reported (``burnin history
--trends``). A site that asks for it has the run judge, for each check that measured a number and passed on
a node, the series of the node's earlier runs in the history and this run's value: a steady fall beyond the
site's limit (:func:`burnin.history.compare.falling`, the same rule as the report's) fails the node for that
check, with a reason naming the node, the check, the series and the limit::

    TREND sim04 IB-02 400 -> 390 -> 380 -> 370 -> 360 Gb/s over 5 runs (-10.0%, site limit -5%)

The check id is the trending check's own: a gate drains the node with it (``burnin: IB-02 TREND ...``) and
resumes it only once a run judged that check passing without the fall. A node with fewer earlier runs than the
series needs, or a series with a run that measured nothing, is not judged: no failure, and no pass of anything
(:func:`judge` is pure; :func:`past_measurements` is the history read, done by the run's recorder).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from burnin.history.compare import falling, number
from burnin.history.store import Store

TREND_MARK = "TREND"
Point = tuple["float | None", "str | None"]
"""A run's measurement of one check on one node: value and unit (None, None: it measured nothing)."""


@dataclass(frozen=True, slots=True)
class TrendFailure:
    """A check of a node failed for its trend (the plugin turns it into a failed outcome of that check)."""

    node: str
    check: str
    reason: str
    measured: str
    expected: str


def limit_text(limit: float) -> str:
    return f"-{100 * limit:g}%"


def judge(node: str, check: str, past: Sequence[Point], current: Point, *, runs: int,
          limit: float) -> TrendFailure | None:
    """The trend failure of ``check`` on ``node`` when its last ``runs`` measurements (``past``, oldest first,
    then ``current``) fall steadily by more than ``limit``; None when they do not, or cannot be judged (too few
    runs, a run that measured nothing, units that differ)."""
    if runs < 3 or len(past) < runs - 1:
        return None
    points = [*past[len(past) - (runs - 1):], current]
    units = {unit for _, unit in points}
    if len(units) != 1 or None in units:
        return None
    values = [value for value, _ in points]
    if falling(values, drop=limit) is None:
        return None
    series = [float(v) for v in values if v is not None]
    unit = str(next(iter(units)))
    change = 100 * (series[-1] - series[0]) / series[0]
    shown = " -> ".join(number(v) for v in series)
    reason = (f"{TREND_MARK} {node} {check} {shown} {unit} over {runs} runs ({change:+.1f}%, "
              f"site limit {limit_text(limit)})")
    return TrendFailure(node, check, reason, f"{shown} {unit} over {runs} runs",
                        f"no steady fall beyond {100 * limit:g}% over {runs} runs (--fail-on-trend)")


def past_measurements(store: Store, nodes: Iterable[str], *, runs: int, exclude_run: int | None,
                      ) -> tuple[dict[tuple[str, str], list[Point]], dict[str, int]]:
    """Per (node, check) the measurements of the node's last ``runs`` earlier runs that judged it, oldest first
    (``(None, None)`` where a run measured nothing), and per node how many such runs there were. Runs that judged
    the node are those with its gate decision: not dry runs, not probes, not ``exclude_run`` (this run)."""
    units = store.names("unit_names")
    checks = store.names("check_names")
    series: dict[tuple[str, str], list[Point]] = {}
    counted: dict[str, int] = {}
    for node in nodes:
        node_id = store.find_name("node_names", node)
        if node_id is None:
            counted[node] = 0
            continue
        run_ids = [int(r) for (r,) in store.db.execute(
            "SELECT d.run FROM decisions d JOIN runs r ON r.id = d.run WHERE d.node = ? AND d.run != ? "
            "AND r.dry_run = 0 AND r.kind != 'probe' ORDER BY d.run DESC LIMIT ?",
            (node_id, -1 if exclude_run is None else exclude_run, runs))][::-1]
        counted[node] = len(run_ids)
        if not run_ids:
            continue
        values: dict[int, dict[int, Point]] = defaultdict(dict)
        among = ", ".join("?" * len(run_ids))
        for run, check, value, unit in store.db.execute(
                f"SELECT run, check_id, value, unit FROM verdicts WHERE node = ? AND run IN ({among})",  # noqa: S608
                (node_id, *run_ids)):
            values[int(check)][int(run)] = (None if value is None else float(value),
                                            None if unit is None else units.get(int(unit)))
        for check, by_run in values.items():
            series[(node, checks[check])] = [by_run.get(run, (None, None)) for run in run_ids]
    return series, counted
