"""A fabric group's job of the sweep: one allocation of several idle nodes, the fabric suite's measurements in it.

The group is held through the Slurm launcher as a node's job is (``salloc --no-shell --exclusive`` in the site's
partition and QOS, the lowest priority, a short ``--immediate``), the collector gathers every member's facts
again in it (each must name the host Slurm knows its node by), and the fabric phase measures the members as
``burnin run --via slurm --suite fabric`` does (single-node runs, the multi-node all_reduce, localisation when
it falls short), its steps in that same allocation (a second launcher over the job, as burnin run inside an
allocation). What it measured counts only when Slurm still reports the job ``RUNNING`` once the phase ended:
a group that was preempted, cancelled or timed out tested nothing. Judging is the caller's
(:func:`burnin.sweep.judge.judge_group`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from burnin.facts import Facts
from burnin.launch.base import Hold
from burnin.launch.gather import collector_args, facts_from_result
from burnin.launch.log import CommandLog
from burnin.launch.slurm import SlurmLauncher
from burnin.sweep.node_job import START_WAIT_S, Ending, JobBook, ended_state, own_facts
from burnin.topology.model import Topology
from burnin.transport.slurm_jobs import SlurmJobs

if TYPE_CHECKING:
    from burnin.fabric.phase import FabricOptions

FABRIC_LOG = "fabric-commands.log"


@dataclass(frozen=True)
class GroupEnd:
    """How a group's job ended: every member's facts (with the fabric phase's sections) when it measured them."""

    nodes: tuple[str, ...]
    label: str
    ending: Ending
    job_id: str | None = None
    facts: dict[str, Facts] = field(default_factory=dict)
    why: str = ""


@dataclass(frozen=True)
class GroupSpec:
    """What a group's job runs: its name, where its results go, the collector's sources and bound, the fabric
    phase's options (:class:`burnin.fabric.phase.FabricOptions`)."""

    label: str
    out_dir: Path
    sources: str
    timeout_s: float
    time_limit_s: float
    topology: Topology
    options: FabricOptions


def run_group_job(jobs: SlurmJobs, nodes: Sequence[str], spec: GroupSpec, *, host_names: Mapping[str, str],
                  book: JobBook, log: CommandLog) -> GroupEnd:
    """Hold ``nodes`` together, gather and measure them there, read how the job stands, release it. Never raises
    for a node's or Slurm's failure: every way it can end is a :class:`GroupEnd`."""
    members = tuple(nodes)
    launcher = SlurmLauncher(jobs, log=log)
    try:
        failure = launcher.hold(members, Hold(spec.label, f"the fabric group {spec.label}",
                                              time_limit_s=spec.time_limit_s, wait_s=START_WAIT_S, exclusive=True))
        job_id = launcher.job_id
        if failure is not None or job_id is None:
            return GroupEnd(members, spec.label, "not-started", why=failure or "no job granted")
        for node in members:
            book.add(node, job_id)
        if book.closed.is_set():
            return GroupEnd(members, spec.label, "ended", job_id, why="the window closed before its job could run")
        gathered = launcher.collect(list(members), collector_args(spec.sources, spec.timeout_s),
                                    timeout_s=spec.timeout_s)
        facts = {node: own_facts(facts_from_result(gathered[node]), host_names.get(node)) for node in members}
        _measure(jobs, job_id, facts, spec)
        info, error = ended_state(jobs.client, job_id)
        if info is None or not info.running:
            state = info.state if info is not None else f"unknown ({error})"
            if state == "PREEMPTED":
                return GroupEnd(members, spec.label, "preempted", job_id, why=f"group job {job_id} preempted")
            if book.closed.is_set():
                return GroupEnd(members, spec.label, "ended", job_id,
                                why=f"the window closed while group job {job_id} ran ({state})")
            return GroupEnd(members, spec.label, "ended", job_id,
                            why=f"group job {job_id} ended {state} before it was judged")
        return GroupEnd(members, spec.label, "tested", job_id, facts)
    finally:
        launcher.close()
        for node in members:
            book.remove(node)


def _measure(jobs: SlurmJobs, job_id: str, facts: dict[str, Facts], spec: GroupSpec) -> None:
    """The fabric phase over the members, its steps in the group's job; its sections merged into ``facts``."""
    import dataclasses

    from burnin.checks.fabric import failed_alone
    from burnin.dispatch.base import preset_from_facts
    from burnin.fabric.phase import run_fabric_phase

    spec.out_dir.mkdir(parents=True, exist_ok=True)
    inside = dataclasses.replace(jobs, job_id=job_id)  # steps go into the group's job: no allocation of its own
    phase_launcher = SlurmLauncher(inside, preset=preset_from_facts(facts), log=CommandLog(spec.out_dir / FABRIC_LOG))
    run_fabric_phase(phase_launcher, facts, topology=spec.topology, out_dir=spec.out_dir, options=spec.options,
                     failed_alone=failed_alone)
