"""The checks of a large fleet judged in worker processes (``--burnin-jobs N`` with ``--burnin-lean``).

Checks are pure functions of a node's facts and its node type, and cost about
two thirds of a lean run's time. From :data:`POOL_MIN_NODES` nodes on, the
plugin starts ``N`` workers (:class:`burnin.transport.workers.WorkerPool`)
when the session starts, so they load the checks while pytest collects, then
hands them each node's facts file and the check ids its tests ask a verdict
of, in the order the tests run, as soon as every test is collected. Each worker reads the file as the plugin
reads it and returns the node's verdicts; the ``verdict`` fixture takes its
verdict from there. A node a worker could not judge (any error, a worker that
died) is judged by the plugin itself, as without workers, so the verdicts are
the same either way. This module imports no pytest: a worker loads only what
judging needs.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from burnin.errors import BurninError
from burnin.evaluate.verdict import Verdict
from burnin.facts import Facts
from burnin.topology.model import Topology

JOBS_OPTION = "--burnin-jobs"
POOL_MIN_NODES = 96
"""Below this many nodes a lean run judges in its own process: starting a worker costs about what judging
90 nodes' checks does."""
POOL_WINDOW = 64
"""Nodes handed to each worker ahead of the node being judged: the workers start when every test is collected
and run ahead while pytest orders the tests (a node's verdicts are some 90 KB: memory stays a few MB)."""

NodeTask = tuple[str, str, tuple[str, ...], str]
"""(facts file, node, check ids, node type) for :func:`judge_node`."""

_WORKER_CHECKS: dict[str, Any] = {}
_WORKER_TOPOLOGIES: dict[str, Topology] = {}


def start_judge_worker(topologies: tuple[str, ...]) -> None:
    """A judging worker's start: the check registry and the run's node types, loaded once."""
    from burnin.checks import load_all
    from burnin.topology.load import find_topology

    _WORKER_CHECKS.update(load_all())
    for name in topologies:
        with contextlib.suppress(BurninError):  # the caller says it, when it judges that node itself
            _WORKER_TOPOLOGIES[name] = find_topology(name)


def judge_node(task: NodeTask) -> tuple[str, dict[str, Verdict] | None]:
    """In a worker: the node's verdicts of ``checks``, from its facts file read as the plugin reads it; None
    when anything is amiss (the caller then judges the node itself and says what)."""
    path, node, checks, topology_name = task
    try:
        topology = _WORKER_TOPOLOGIES[topology_name]
        facts_file = Path(path)
        facts = Facts.load(facts_file) if facts_file.exists() else Facts.unreachable_node(
            node, "no facts were gathered")
        return node, {check: _WORKER_CHECKS[check].func(facts, topology) for check in checks}
    except Exception:  # noqa: BLE001  # judged again by the caller, whose errors are the run's
        return node, None
