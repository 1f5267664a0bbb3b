"""The fleet's reliability from the history (check-catalog REL-01/REL-02): ``burnin reliability``.

Each recorded run's gate decisions (runs that judged every check: not partial, interrupted or dry runs), each
drain or eviction recorded as a gate action (out of the pool) and each resume (back in it) are observations of a
node; :mod:`.metrics` turns them into
outages, MTTR, availability and lemons. On top of that:

- the node failure rate ``r`` (attributed failures per node-day in the pool), in all and per category of the
  catalog's taxonomy (GPU, HBM/ECC, NVLink, IB, host, software), a failure's category being its first failed
  check's;
- the job MTTF at ``n`` GPUs, ``1 / (n * r_gpu)`` with ``r_gpu = r / GPUs per node`` (REL-02), and the
  expected effective training time ratio for a checkpoint interval and restart time (first order:
  ``ETTR = 1 - (T_restart + T_interval / 2) / MTTF``, catalog REL-02);
- repeat offenders: the same check failing on the same GPU or HCA of a node in ``k`` separate outages within
  ``window`` seconds;
- with Slurm's node events (``sacctmgr show event``, :mod:`.slurm_events`), each drain or down Slurm recorded
  that burnin did not record itself is a failure too (category from its reason), ended when Slurm saw the node
  back.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from burnin.history.metrics import DAY_S, FleetHistory, Outage, fleet_history
from burnin.history.records import Observation
from burnin.history.slurm_events import MATCH_WINDOW_S, SLURM_HOST, SLURM_OTHER, Folded, RecordedDrain, fold_events
from burnin.history.store import Store
from burnin.parsers.sacctmgr import SlurmEvent

CATEGORIES = ("GPU", "HBM/ECC", "NVLink", "IB", "host", "software", "other")
_BY_CHECK = {"GPU-01": "HBM/ECC", "GPU-02": "HBM/ECC", "GPU-03": "HBM/ECC", "GPU-10": "NVLink", "GPU-11": "NVLink",
             "INV-03": "software", "INV-05": "software", "INV-10": "software", "INV-11": "software",
             "INV-09": "IB", SLURM_HOST: "host", SLURM_OTHER: "other"}
_BY_FAMILY = {"GPU": "GPU", "INV": "GPU", "BRN": "GPU", "NVL": "NVLink", "IB": "IB", "NCCL": "IB", "TOP": "host",
              "STO": "host", "PIN": "host", "MEG": "software"}
_SUBJECT = re.compile(r"\b(gpu\d{1,3}|GPU\d{1,3}|mlx5_\d{1,3})\b")
OUT_OF_POOL_ACTIONS = ("drain", "evict", "taint")
BACK_IN_POOL_ACTIONS = ("resume", "untaint")
DEFAULT_GPUS_PER_NODE = 8


def category(check: str) -> str:
    """The taxonomy category of a check id (``other`` for a site's own check)."""
    return _BY_CHECK.get(check) or _BY_FAMILY.get(check.split("-", 1)[0], "other")


def job_mttf_s(gpus: int, failures_per_gpu_day: float) -> float | None:
    """REL-02's ``1 / (n * r)``, in seconds (None when nothing failed)."""
    rate = gpus * failures_per_gpu_day
    return DAY_S / rate if rate > 0 else None


def ettr(mttf_s: float | None, checkpoint_interval_s: float, restart_s: float) -> float | None:
    """First-order expected effective training time ratio (lost: the restart and half an interval per failure)."""
    if mttf_s is None:
        return 1.0
    return max(0.0, 1.0 - (restart_s + checkpoint_interval_s / 2) / mttf_s)


@dataclass(frozen=True, slots=True)
class RepeatOffender:
    node: str
    check: str
    subject: str
    outages: int
    first: float
    last: float


@dataclass
class Reliability:
    fleet: FleetHistory
    since: float
    runs: int
    gpus_per_node: int
    by_category: Counter[str] = field(default_factory=Counter)
    repeat_offenders: list[RepeatOffender] = field(default_factory=list)
    slurm: Folded | None = None
    """What Slurm's node events added (None: they were not read)."""

    @property
    def node_days(self) -> float:
        return self.fleet.node_days_in_pool

    def rate(self, failures: int | None = None) -> float | None:
        """Failures per node-day in the pool (all of them, or ``failures``)."""
        count = self.fleet.failures if failures is None else failures
        return count / self.node_days if self.node_days > 0 else None

    def job_mttf_s(self, gpus: int) -> float | None:
        rate = self.rate()
        return None if rate is None else job_mttf_s(gpus, rate / self.gpus_per_node)


def _ids(text: object) -> tuple[str, ...]:
    return tuple(c for c in str(text or "").split(",") if c)


def observations(store: Store, since: float) -> tuple[list[Observation], int]:
    """What changed each node's place in the pool since ``since``: its first and last decision, every rejection
    and the first admission after each, of every run that judged every check; and the drains, evictions and
    resumes. The nights a node was admitted again and again change nothing, and are not read one by one."""
    names = store.names("node_names")
    taken: list[Observation] = []
    runs = {int(rid): (float(at), str(out)) for rid, at, out in store.db.execute(
        "SELECT id, coalesce(finished, started), out_dir FROM runs WHERE finished IS NOT NULL AND partial = 0 "
        "AND interrupted = 0 AND dry_run = 0 AND kind != 'probe' AND coalesce(finished, started) >= ?", (since,))}
    if runs:
        first = min(runs)
        wanted: set[tuple[int, int]] = set()  # (run, node) of the decisions that matter
        for node, low, high in store.db.execute(
                "SELECT node, min(run), max(run) FROM decisions WHERE run >= ? GROUP BY node", (first,)):
            wanted.update(((int(low), int(node)), (int(high), int(node))))
        for run, node in store.db.execute("SELECT run, node FROM decisions WHERE admitted = 0 AND run >= ?",
                                          (first,)).fetchall():
            wanted.add((int(run), int(node)))
            back = store.db.execute("SELECT run FROM decisions WHERE node = ? AND run > ? AND admitted = 1 "
                                    "ORDER BY run LIMIT 1", (node, run)).fetchone()
            if back is not None:
                wanted.add((int(back[0]), int(node)))
        for run, node in sorted(wanted):
            found = runs.get(run)
            row = store.db.execute("SELECT admitted, failed, incomplete, reason FROM decisions WHERE run = ? AND "
                                   "node = ?", (run, node)).fetchone() if found is not None else None
            if found is None or row is None:
                continue
            admitted, failed, incomplete, reason = row
            failed_ids, incomplete_ids = _ids(failed), _ids(incomplete)
            taken.append(Observation(names[node], found[0], bool(admitted) and not failed_ids and not incomplete_ids,
                                     failed_ids, incomplete_ids, str(reason), found[1], "run"))
    for at, node, action, checks, reason, source in store.db.execute(
            "SELECT at, node, action, check_ids, reason, source FROM actions WHERE at >= ?", (since,)):
        if action in OUT_OF_POOL_ACTIONS or action in BACK_IN_POOL_ACTIONS:
            back_in = action in BACK_IN_POOL_ACTIONS
            taken.append(Observation(names[node], float(at), back_in, () if back_in else _ids(checks),
                                     (), str(reason), str(source), "watch"))
    return taken, len(runs)


def recorded_drains(store: Store, since: float) -> list[RecordedDrain]:
    """The drains, evictions and taints burnin recorded since ``since`` (a little before: a Slurm event of one
    may start before its record)."""
    names = store.names("node_names")
    marks = ",".join("?" * len(OUT_OF_POOL_ACTIONS))
    return [RecordedDrain(names[node], float(at), _ids(checks), str(reason or "")) for at, node, checks, reason in
            store.db.execute(f"SELECT at, node, check_ids, reason FROM actions WHERE at >= ? AND action IN ({marks})",  # noqa: S608 - placeholders only
                             (since - MATCH_WINDOW_S, *OUT_OF_POOL_ACTIONS))]


def _outage_at(outages: list[Outage], at: float) -> int | None:
    for index, outage in enumerate(outages):
        if outage.start <= at and (outage.end is None or at < outage.end):
            return index
    return None


def repeat_offenders(store: Store, fleet: FleetHistory, since: float, k: int, window_s: float) -> list[RepeatOffender]:
    """The same check failing on the same GPU or HCA of a node in at least ``k`` outages within ``window_s``."""
    names, checks = store.names("node_names"), store.names("check_names")
    starts = {int(r): float(at) for r, at in store.db.execute(
        "SELECT id, coalesce(finished, started) FROM runs WHERE started >= ?", (since,))}
    if not starts:
        return []
    seen: dict[tuple[str, str, str], dict[int, float]] = defaultdict(dict)
    for run, node, check, reason in store.db.execute(
            "SELECT v.run, v.node, v.check_id, d.reason FROM verdicts v INDEXED BY verdict_problems "
            "JOIN details d ON d.id = v.detail WHERE v.status IN (1, 2) AND v.run >= ? AND v.status = 1",
            (min(starts),)):
        at = starts.get(run)
        history = fleet.nodes.get(names[node])
        if at is None or history is None:
            continue
        outage = _outage_at(history.outages, at)
        if outage is None:
            continue
        for subject in dict.fromkeys(m.lower() for m in _SUBJECT.findall(str(reason or ""))):
            seen[(names[node], checks[check], subject)].setdefault(outage, history.outages[outage].start)
    found = []
    for (node, check, subject), outages in seen.items():
        times = sorted(outages.values())
        for i, first in enumerate(times):
            inside = [t for t in times[i:] if t - first <= window_s]
            if len(inside) >= k:
                found.append(RepeatOffender(node, check, subject, len(inside), first, inside[-1]))
                break
    return sorted(found, key=lambda r: (-r.outages, r.node, r.check, r.subject))


def reliability(store: Store, *, since: float, gpus_per_node: int = DEFAULT_GPUS_PER_NODE, lemon_failures: int = 3,
                lemon_window_s: float = 30 * DAY_S, repeat_k: int = 2, repeat_window_s: float = 30 * DAY_S,
                slurm_events: Iterable[SlurmEvent] | None = None) -> Reliability | None:
    """The fleet's reliability since ``since`` (None: nothing recorded in that time); ``slurm_events``: Slurm's
    node events of the period, folded in (None: not read)."""
    found, run_count = observations(store, since)
    folded = None
    if slurm_events is not None:
        folded = fold_events(slurm_events, recorded_drains(store, since), since)
        found += folded.observations
    if not found:
        return None
    fleet = fleet_history(found, lemon_failures=lemon_failures, lemon_window_s=lemon_window_s)
    result = Reliability(fleet, since, run_count, gpus_per_node, slurm=folded)
    for history in fleet.nodes.values():
        for outage in history.failures:
            result.by_category[category(outage.failed[0])] += 1
    result.repeat_offenders = repeat_offenders(store, fleet, since, repeat_k, repeat_window_s)
    return result
