"""One node's job of the sweep: an allocation of that node alone, the collector in it, and how the job ended.

The job is held through the Slurm launcher (``salloc --no-shell --exclusive`` in the site's partition and QOS,
the lowest priority, a short ``--immediate``: a node taken meanwhile is not waited for), the collector runs
as one srun step in it, and the job is released. Its facts count only when Slurm still reports the job
``RUNNING`` once the collector has ended: a job that was preempted, cancelled or timed out (or that Slurm no
longer knows) tested nothing, whatever its output says; and a facts document must name the host Slurm knows
the node by (``NodeHostName``), or it is not this node's.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Literal

from burnin.facts import Facts
from burnin.launch.base import Hold
from burnin.launch.gather import collector_args, facts_from_result
from burnin.launch.log import CommandLog
from burnin.launch.slurm import SlurmLauncher
from burnin.transport.slurm import SlurmRunner
from burnin.transport.slurm_jobs import JobInfo, SlurmJobs, read_job

START_WAIT_S = 10.0
"""salloc's ``--immediate``: how long a job waits for its node (idle a moment ago) before it gives up."""
SETTLE_WAIT_S = 90.0
"""How long a job Slurm shows ``COMPLETING`` (its processes being killed: up to KillWait, 30 s by default, and
the epilog) is read again until it shows how it ended (PREEMPTED, CANCELLED ...). A bound, never a measurement."""
SETTLE_POLL_S = 0.2

Ending = Literal["tested", "preempted", "ended", "not-started"]


@dataclass(frozen=True, slots=True)
class JobEnd:
    """How one node's job ended: its facts when it tested the node, else why not."""

    node: str
    ending: Ending
    job_id: str | None = None
    facts: Facts | None = None
    why: str = ""


class JobBook:
    """The jobs of a sweep granted and not yet released, so a sweep that stops can cancel them all."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[str, str] = {}  # node -> job id
        self.closed = threading.Event()
        """Set when the sweep stops starting jobs: a job granted after it is released at once."""

    def add(self, node: str, job_id: str) -> None:
        with self._lock:
            self._jobs[node] = job_id

    def remove(self, node: str) -> None:
        with self._lock:
            self._jobs.pop(node, None)

    def open_jobs(self) -> dict[str, str]:
        with self._lock:
            return dict(self._jobs)


def own_facts(facts: Facts, host_name: str | None) -> Facts:
    """``facts`` when they name the host Slurm knows their node by (the short names compared); unreachable
    otherwise: a document that names another host, or none, is not this node's measurement."""
    if facts.unreachable:
        return facts
    said = facts.data.get("hostname")
    if host_name is None:
        return Facts.unreachable_node(facts.node, f"Slurm did not say {facts.node}'s host name: its facts "
                                                  "cannot be told apart from another node's")
    if not isinstance(said, str) or said.split(".")[0] != host_name.split(".")[0]:
        return Facts.unreachable_node(facts.node, f"the collector's output names host {said!r}, but Slurm runs "
                                                  f"{facts.node} on {host_name!r}: not this node's facts")
    return facts


def ended_state(client: SlurmRunner, job_id: str) -> tuple[JobInfo | None, str | None]:
    """The job's state once it says how it ended: Slurm shows a job whose processes it is still killing as
    ``COMPLETING`` whether it was preempted, cancelled or timed out, so that state is read again (at most
    :data:`SETTLE_WAIT_S`). A job that stays COMPLETING is reported so: not running, hence not tested."""
    deadline = time.monotonic() + SETTLE_WAIT_S
    while True:
        info, error = read_job(client, job_id)
        if info is None or info.state != "COMPLETING" or time.monotonic() > deadline:
            return info, error
        time.sleep(SETTLE_POLL_S)


def run_node_job(jobs: SlurmJobs, node: str, *, label: str, host_name: str | None, sources: str,
                 timeout_s: float, time_limit_s: float, book: JobBook, log: CommandLog) -> JobEnd:
    """Hold ``node`` alone, run the collector there, read how the job stands, release it. Never raises for a
    node's or Slurm's failure: every way it can end is a :class:`JobEnd`."""
    launcher = SlurmLauncher(jobs, log=log)
    try:
        failure = launcher.hold([node], Hold(label, f"the sweep of {node}", time_limit_s=time_limit_s,
                                              wait_s=START_WAIT_S, exclusive=True, tasks_per_node=1))
        job_id = launcher.job_id
        if failure is not None or job_id is None:
            return JobEnd(node, "not-started", why=failure or "no job granted")
        book.add(node, job_id)
        if book.closed.is_set():
            return JobEnd(node, "ended", job_id, why="the window closed before its job could run")
        result = launcher.collect([node], collector_args(sources, timeout_s), timeout_s=timeout_s)[node]
        info, error = ended_state(jobs.client, job_id)
        if info is None or not info.running:
            state = info.state if info is not None else f"unknown ({error})"
            if state == "PREEMPTED":
                return JobEnd(node, "preempted", job_id, why=f"job {job_id} preempted")
            if book.closed.is_set():
                return JobEnd(node, "ended", job_id, why=f"the window closed while job {job_id} ran ({state})")
            return JobEnd(node, "ended", job_id, why=f"job {job_id} ended {state} before it was judged")
        return JobEnd(node, "tested", job_id, own_facts(facts_from_result(result), host_name))
    finally:
        launcher.close()
        book.remove(node)
