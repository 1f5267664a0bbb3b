"""The checks of a large fleet judged in worker processes (``--burnin-jobs N`` with ``--burnin-lean``).

Checks are pure functions of a node's facts and its node type, and cost about
two thirds of a lean run's time. From :data:`POOL_MIN_NODES` nodes on, the
plugin starts ``N`` workers (:class:`burnin.transport.workers.WorkerPool`)
when the session starts, through :class:`FleetJudging`, and hands them nodes
in the run's order of nodes (the order the tests run in): each worker reads a
node's facts file as the plugin reads it and returns the node's verdicts; the
``verdict`` fixture takes its verdict from there.

The first :data:`POOL_WINDOW` nodes a worker are handed out at once, while
pytest still collects the tests: which checks a node's tests ask a verdict of
is not known yet, so those nodes are judged against every registered check
(those beyond a suite's own cost little: their facts are absent). Once every
test is collected (or, with ``-k``/``-m``, selected) the plugin says which
checks each node's tests ask (:meth:`FleetJudging.ask`): the nodes no worker
has begun yet, and those handed out from then on, are judged against those
alone. A node's verdicts come back pickled and are unpickled when the plugin
reads them (in its own thread, node by node). Nodes go out :data:`POOL_CHUNK` to a task (a task handed out
costs the plugin's thread a wake-up of the pool's). A node a worker could not
judge (any error, a worker that died) is judged by the plugin itself, as
without workers, so the verdicts are the same either way. This module
imports no pytest: a worker loads only what judging needs.
"""

from __future__ import annotations

import contextlib
import pickle
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from burnin.evaluate.verdict import Verdict
from burnin.facts import Facts
from burnin.topology.model import Topology

if TYPE_CHECKING:
    from burnin.transport.workers import Ordered, WorkerPool

JOBS_OPTION = "--burnin-jobs"
POOL_MIN_NODES = 96
"""Below this many nodes a lean run judges in its own process: starting a worker costs about what judging
90 nodes' checks does."""
POOL_WINDOW = 256
"""Nodes handed to each worker ahead of the node whose verdicts are read (the workers run ahead while pytest
collects and orders the tests, which reads none): a node's verdicts come back pickled, some 25 KB, and are
unpickled when read, so memory stays a few MB a worker."""
POOL_CHUNK = 8
"""Nodes a task: each task handed out wakes the pool's threads in the plugin's process (a write to a pipe, then
a wait for the GIL), 1,024 a fleet of 1,024 nodes one by one."""

NodeTask = tuple[str, str, tuple[str, ...] | None, str]
"""(facts file, node, check ids (None: every registered check), node type) for :func:`judge_node`."""
ChunkTask = tuple[NodeTask, ...]

_WORKER_CHECKS: dict[str, Any] = {}
_WORKER_TOPOLOGIES: dict[str, Topology] = {}


def start_judge_worker(topologies: dict[str, Topology]) -> None:
    """A judging worker's start: the check registry, loaded once, and the run's node types as the caller
    loaded them (they come pickled: a worker imports neither YAML nor pydantic, some 0.3 s a worker)."""
    from burnin.checks import load_all

    _WORKER_CHECKS.update(load_all())
    _WORKER_TOPOLOGIES.update(topologies)


def judge_node(task: NodeTask) -> tuple[str, dict[str, Verdict] | None]:
    """In a worker: the node's verdicts of ``checks``, from its facts file read as the plugin reads it; None
    when anything is amiss (the caller then judges the node itself and says what). Without ``checks``, the
    verdict of every registered check, but of one that raised (the caller judges that one, if asked)."""
    path, node, checks, topology_name = task
    try:
        topology = _WORKER_TOPOLOGIES[topology_name]
        facts_file = Path(path)
        facts = Facts.load(facts_file) if facts_file.exists() else Facts.unreachable_node(
            node, "no facts were gathered")
        if checks is not None:
            return node, {check: _WORKER_CHECKS[check].func(facts, topology) for check in checks}
    except Exception:  # noqa: BLE001  # judged again by the caller, whose errors are the run's
        return node, None
    verdicts: dict[str, Verdict] = {}
    for check, spec in _WORKER_CHECKS.items():
        with contextlib.suppress(Exception):
            verdicts[check] = spec.func(facts, topology)
    return node, verdicts


def judge_nodes(chunk: ChunkTask) -> list[tuple[str, bytes | None]]:
    """:func:`judge_node` of each task, each node's verdicts pickled (the caller unpickles a node's when it
    reads that node, not as they come in)."""
    judged = []
    for task in chunk:
        node, verdicts = judge_node(task)
        judged.append((node, None if verdicts is None else pickle.dumps(verdicts, protocol=pickle.HIGHEST_PROTOCOL)))
    return judged


PRESTART_MIN_NODES = 32
"""From this many nodes on, ``burnin run`` starts the judging workers before it gathers (:func:`start_judges`): their
start (a fresh interpreter each, the checks imported: ~0.3 s of CPU a worker) then overlaps the gather, which waits
on the nodes, and the checks of 32 nodes and more judge in about half the time on two cores (bench/fanout)."""
STARTED_JUDGES = "burnin-started-judges"
"""The name under which a session finds the workers started for it (:class:`StartedJudges`) among its plugins."""


class StartedJudges:
    """Judging workers started before the session that judges (while the facts are still being gathered).

    Given to :func:`burnin.session.run_suites`, which registers it as :data:`STARTED_JUDGES`; the plugin's
    session judges with them whatever the number of nodes. The caller that started them closes them."""

    def __init__(self, pool: WorkerPool, topologies: dict[str, Topology]) -> None:
        self.pool = pool
        self.topologies = topologies

    def close(self) -> None:
        self.pool.close()


def start_judges(jobs: int, topology_names: Iterable[str]) -> StartedJudges | None:
    """``jobs`` judging workers started now, knowing the node types among ``topology_names`` that load (a node of
    another type is judged by the session itself); None when they cannot start (the session then judges alone)."""
    from burnin.topology.load import find_topology
    from burnin.transport.workers import WorkerPool

    topologies: dict[str, Topology] = {}
    for name in sorted(set(topology_names)):
        with contextlib.suppress(Exception):  # its nodes are judged by the session, where the error is the run's
            topologies[name] = find_topology(name)
    pool = WorkerPool(jobs, start_judge_worker, (topologies,))
    try:
        pool.start()
    except Exception:  # noqa: BLE001  # no process left, a broken pool: judged in the session, as ever
        pool.close()
        return None
    return StartedJudges(pool, topologies)


class FleetJudging:
    """The workers judging a fleet's checks, and their verdicts node by node in the run's order of nodes."""

    def __init__(self, jobs: int, facts_dir: Path, nodes: Iterable[str], topology_of: Callable[[str], str],
                 topologies: dict[str, Topology], *, started: StartedJudges | None = None) -> None:
        """Start ``jobs`` workers (they load the checks while the caller goes on) judging against ``topologies``
        (node type -> its topology: a node of a type left out is judged by the caller); raises when they
        cannot start. ``started``: workers started before the session (:func:`start_judges`), used instead,
        judging against the node types they were started with."""
        self._facts_dir, self._topology_of = facts_dir, topology_of
        self._nodes = list(dict.fromkeys(nodes))
        self._place = {node: index for index, node in enumerate(self._nodes)}
        self._asked: dict[str, tuple[str, ...]] | None = None  # node -> the checks its tests ask (None: unknown)
        self._results: Ordered[ChunkTask, list[tuple[str, bytes | None]]] | None = None
        self._chunk: Iterator[tuple[str, bytes | None]] = iter(())  # the nodes of the chunk being read
        self._last: tuple[str, dict[str, Verdict] | None] | None = None  # the last node they judged
        if started is not None:
            self._pool: WorkerPool | None = started.pool
            return
        from burnin.transport.workers import WorkerPool

        self._pool = WorkerPool(jobs, start_judge_worker, (topologies,))
        try:
            self._pool.start()
        except BaseException:
            self.close()
            raise

    @property
    def handed_out(self) -> bool:
        """Whether the workers have nodes to judge."""
        return self._results is not None

    def start(self) -> None:
        """Hand out the first nodes now, each to be judged against every registered check."""
        self._hand_out()

    def ask(self, checks: dict[str, tuple[str, ...]]) -> None:
        """The checks each node's tests ask a verdict of: the nodes handed out from now on, and those handed out
        before that no worker has begun, are judged against those alone; a node no test asks one of not at all."""
        self._asked = checks
        if self._results is not None:
            try:
                self._results.take_back(self._rechunk)
            except Exception:  # noqa: BLE001  # a pool that broke since it started: the caller judges, as ever
                self.close()
        self._hand_out()

    def _hand_out(self) -> None:
        if self._pool is None or self._results is not None:
            return
        try:
            self._results = self._pool.ordered(judge_nodes, self._chunks(),
                                               window=POOL_WINDOW * self._pool.jobs // POOL_CHUNK)
        except Exception:  # noqa: BLE001  # a pool that broke since it started: the caller judges, as ever
            self.close()

    def _chunks(self) -> Iterator[ChunkTask]:
        chunk: list[NodeTask] = []
        for node in self._nodes:
            task = self._task(node)
            if task is not None:
                chunk.append(task)
                if len(chunk) == POOL_CHUNK:
                    yield tuple(chunk)
                    chunk = []
        if chunk:
            yield tuple(chunk)

    def _rechunk(self, chunk: ChunkTask) -> ChunkTask | None:
        """A chunk handed out before the checks were known, against the checks its nodes' tests ask."""
        tasks = tuple(task for task in (self._task(node) for _, node, _, _ in chunk) if task is not None)
        return tasks or None

    def _task(self, node: str) -> NodeTask | None:
        """The node's task: against the checks its tests ask (None: they ask none), or every registered check
        while that is not known."""
        checks = None if self._asked is None else self._asked.get(node)
        if self._asked is not None and not checks:
            return None
        return str(self._facts_dir / f"{node}.json"), node, checks, self._topology_of(node)

    def verdict(self, node: str, check: str) -> Verdict | None:
        """The workers' verdict of ``check`` on ``node`` (None: the caller judges it, as without workers).

        Nodes are asked for in the run's order; a node passed over (its tests deselected) is skipped."""
        place = self._place.get(node)
        if self._results is None or place is None:
            return None
        while self._last is None or self._place[self._last[0]] < place:
            try:
                found = next(self._chunk, None)
                if found is None:
                    self._chunk = iter(next(self._results))
                    continue
                name, pickled = found
                self._last = name, None if pickled is None else pickle.loads(pickled)  # noqa: S301  # our workers'
            except StopIteration:
                self._results = None
                return None
            except Exception:  # noqa: BLE001  # a worker died: every node from here is judged by the caller
                self.close()
                return None
        name, verdicts = self._last
        return verdicts.get(check) if name == node and verdicts is not None else None

    def close(self) -> None:
        """Stop the workers (what they still hold is not waited for)."""
        if self._pool is not None:
            self._pool.close()
        self._pool = self._results = self._last = None
        self._chunk = iter(())
