"""Dispatch through Slurm: one allocation, one job step over all nodes.

``gather`` launches the collector through a :class:`~burnin.launch.slurm.SlurmLauncher`:
it allocates the nodes (or uses the allocation it runs in), ships the collector
zipapp with ``sbcast`` (unless ``--collector`` names one already on the nodes),
runs it in ONE ``srun`` step with one task per node, removes it in a second
short step, and releases the allocation. Each node's facts come back
through srun's labelled stdout; a node whose task fails or times out is
``unreachable`` (so ``incomplete``) on its own, and the other nodes go on.

Slurm starts no job on a drained node. A node that burnin itself drained is
rechecked when the run gates (``--gate slurm``, not ``--dry-run``): it is moved
into a maintenance reservation of its own, resumed there (so no other job can
land on it), checked, drained again with its old reason, and the reservation
is dropped (:class:`burnin.transport.slurm_jobs.Allocation`); the gate then
resumes it if it passed. Nodes held by anyone else, down or not responding are
not touched and come back ``unreachable``.

Phases launch through :meth:`SlurmDispatcher.launcher`: srun steps in an
allocation of their own (or the one burnin runs in), with the same recheck.
Every client command goes to ``OUT/slurm-commands.log`` (a phase's own to its log).
"""

from __future__ import annotations

import argparse
import os
import shutil
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from burnin.errors import UsageError

if TYPE_CHECKING:  # `burnin run --help` reads add_arguments only: the dispatcher's machinery is imported when used
    from burnin.dispatch.base import DispatchContext, PhaseEnded
    from burnin.facts import Facts
    from burnin.launch.log import CommandLog
    from burnin.launch.slurm import SlurmLauncher, Triage
    from burnin.transport.base import CommandResult
    from burnin.transport.slurm import SlurmClient
    from burnin.transport.slurm_jobs import SlurmJobs

# A resumed node shows idle* for a moment; if the health check drains it again meanwhile
# (it still fails a fast check), the recheck allocation can never start: do not wait long.
RECHECK_WAIT = 20.0
USAGE = "--via slurm [--nodes NODESET]"


def add_arguments(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--nodes", metavar="NODESET", help="slurm: nodes to run on (default: $SLURM_JOB_NODELIST)")
    group.add_argument("--partition", metavar="P", help="slurm: partition")
    group.add_argument("--reservation", metavar="R", help="slurm: reservation")
    group.add_argument("--collector", metavar="PATH",
                       help="slurm: collector zipapp already on the nodes (default: ship it with sbcast)")


def open_dispatcher(args: argparse.Namespace, context: DispatchContext) -> SlurmDispatcher:
    return SlurmDispatcher.from_args(args, context.topology_ref, context.out_dir)



class SlurmDispatcher:
    """Runs the collector on Slurm nodes; see the module docstring for the flow."""

    def __init__(
        self,
        nodes: list[str],
        *,
        job_id: str | None = None,
        partition: str | None = None,
        reservation: str | None = None,
        collector: str | None = None,
        recheck_drained: bool = False,
        stage_dir: str | None = None,
        client: SlurmClient | None = None,
        log_file: Path | None = None,
    ) -> None:
        """``stage_dir``: where the collector is shipped to (default :data:`burnin.launch.slurm.STAGE_DIR`)."""
        from burnin.launch.log import CommandLog
        from burnin.launch.slurm import STAGE_DIR
        from burnin.transport.slurm import SlurmClient

        self.nodes = nodes
        self.topology_by_node: dict[str, str] = {}
        self.job_id = job_id
        self.partition = partition
        self.reservation = reservation
        self.collector = collector
        self.recheck_drained = recheck_drained
        self.stage_dir = (STAGE_DIR if stage_dir is None else stage_dir).rstrip("/") or "/"
        self.client: SlurmClient = client or SlurmClient()
        self.log_file = log_file
        self._log = CommandLog(log_file)
        from burnin.transport.slurm_jobs import Leftovers

        self._leftovers = Leftovers()  # what an allocation that ended early left on its nodes, for the next one
        # node -> why its allocation ended under the gather before its collector answered (scancel, preemption)
        self._ended: dict[str, str] = {}
        self._phase_launchers: list[SlurmLauncher] = []  # handed out by launcher(): their allocations may end too
        # The gather's launchers still holding an allocation: close() releases them from the main thread, so
        # an interrupt that ends the process never leaves a job behind a worker thread that did not get there.
        self._holding: set[SlurmLauncher] = set()
        self._holding_lock = threading.Lock()

    @classmethod
    def from_args(cls, args: argparse.Namespace, topology_name: str, out_dir: Path) -> SlurmDispatcher:
        """Nodes from ``--nodes``, else the allocation this runs in (``SLURM_JOB_NODELIST``)."""
        from burnin.nodes import expand

        del topology_name  # every node is judged against the run's topology
        if shutil.which("srun") is None:
            raise UsageError("srun not found on PATH: --via slurm needs Slurm's client commands "
                             "(Debian: apt-get install slurm-client)")
        job_nodes = os.environ.get("SLURM_JOB_NODELIST", "")
        job_id = os.environ.get("SLURM_JOB_ID") or None
        if args.nodes:
            nodes = expand(args.nodes)
            inside = bool(job_id and job_nodes and set(nodes) <= set(expand(job_nodes)))
        elif job_nodes and job_id:
            nodes, inside = expand(job_nodes), True
        else:
            raise UsageError("--via slurm needs --nodes NODESET, or run inside an allocation "
                             "(salloc/sbatch set SLURM_JOB_NODELIST)")
        if not nodes:
            raise UsageError("--via slurm: the node set is empty")
        return cls(
            nodes,
            job_id=job_id if inside else None,
            partition=getattr(args, "partition", None),
            reservation=getattr(args, "reservation", None),
            collector=getattr(args, "collector", None),
            recheck_drained=getattr(args, "gate", "none") == "slurm" and not getattr(args, "dry_run", False),
            log_file=out_dir / "slurm-commands.log",
        )

    # -- gathering -------------------------------------------------------------------------

    def gather(self, *, sources: str = "all", timeout: float = 120.0,
               on_done: Callable[[str], None] | None = None) -> dict[str, Facts]:
        """The collector launched on every node Slurm runs a job on: the schedulable nodes in one allocation, the
        burnin-drained ones rechecked (``--gate slurm``) in one of their own, side by side."""
        from burnin.facts import Facts
        from burnin.launch.base import fan_out
        from burnin.launch.gather import collector_args, facts_from_result
        from burnin.launch.slurm import Triage, triage

        facts: dict[str, Facts] = {}

        def done(node: str, node_facts: Facts) -> None:
            facts[node] = node_facts
            if on_done is not None:
                on_done(node)

        if self.job_id:
            groups = [Triage(list(self.nodes))]
        else:
            nodes = triage(self.nodes, self._jobs(), log=self._log)
            groups = [Triage(nodes.usable), Triage([], recheck=nodes.recheck)]
            for node, reason in nodes.refused.items():
                done(node, Facts.unreachable_node(node, reason))
        args = collector_args(sources, timeout)
        ran = fan_out([g for g in groups if g.usable or g.recheck],
                      lambda group: self._gather_group(group, args, timeout), workers=2)
        for results in ran:
            for node, result in results.items():
                done(node, facts_from_result(result))
        return {node: facts[node] for node in self.nodes}

    def _gather_group(self, group: Triage, args: list[str], timeout: float) -> dict[str, CommandResult]:
        """One allocation of ``group`` (a recheck waits briefly: a node drained again meanwhile never starts one)."""
        from burnin.launch.base import SLACK_S, Hold, not_started
        from burnin.launch.slurm import SlurmLauncher

        nodes = [*group.usable, *group.recheck]
        launcher = SlurmLauncher(self._jobs(), log=self._log, stage_dir=self.stage_dir)
        with self._holding_lock:
            self._holding.add(launcher)
        how = Hold("recheck" if group.recheck else "collector", "", time_limit_s=2 * timeout + 4 * SLACK_S,
                   wait_s=min(timeout, RECHECK_WAIT) if group.recheck else timeout, exclusive=False,
                   tasks_per_node=1)
        try:
            failure = launcher.hold_triaged(group, how)
            if failure:
                return {node: not_started(node, ("srun",), failure) for node in nodes}
            results = launcher.collect(nodes, args, timeout_s=timeout)
        finally:
            with self._holding_lock:
                self._holding.discard(launcher)
            launcher.close()  # asks Slurm whether the allocation ended, when a step failed
        ended = launcher.ended_under()
        with self._holding_lock:  # the nodes whose collector had not answered when it ended
            self._ended.update({node: ended[node] for node, result in results.items()
                                if not result.ok and node in ended})
        return results

    def _jobs(self) -> SlurmJobs:
        from burnin.transport.slurm_jobs import SlurmJobs

        return SlurmJobs(self.client, job_id=self.job_id, partition=self.partition, reservation=self.reservation,
                         recheck_drained=self.recheck_drained, collector=self.collector, leftovers=self._leftovers)

    def launcher(self, facts: Mapping[str, Facts], *, log: CommandLog | None = None) -> SlurmLauncher:
        """srun steps from here, in an allocation of the caller's own (or the one burnin runs in); its commands
        go to ``log``, else to this dispatcher's own log."""
        from burnin.dispatch.base import preset_from_facts
        from burnin.launch.slurm import SlurmLauncher

        launcher = SlurmLauncher(self._jobs(), preset=preset_from_facts(facts), log=log or self._log,
                                 stage_dir=self.stage_dir)
        with self._holding_lock:
            self._phase_launchers.append(launcher)
        return launcher


    def close(self) -> None:
        with self._holding_lock:
            left, self._holding = list(self._holding), set()
        try:
            for launcher in left:  # an interrupted gather: its allocation is released here (scancel)
                launcher.close()
        finally:
            self.client.close()

    def hold_ended(self) -> dict[str, str]:
        """The nodes whose collector had not answered when their allocation ended under the gather, with why
        (burnin.dispatch.base.hold_ended)."""
        with self._holding_lock:
            return dict(self._ended)

    def phase_ended(self) -> dict[str, PhaseEnded]:
        """The nodes of a phase's allocation that ended under its steps, with why (``job 5 CANCELLED during the
        fabric phase``) and what those phases were to measure there (burnin.dispatch.base.phase_ended)."""
        with self._holding_lock:
            launchers = list(self._phase_launchers)
        from burnin.dispatch.base import PhaseEnded

        why_by_node: dict[str, str] = {}
        measures: dict[str, frozenset[str]] = {}
        for launcher in launchers:
            ended_measures = launcher.ended_measures()
            for node, why in launcher.ended_under().items():
                why_by_node.setdefault(node, why)
                measures[node] = measures.get(node, frozenset()) | ended_measures.get(node, frozenset())
        return {node: PhaseEnded(why, measures[node]) for node, why in why_by_node.items()}

    def left_on_nodes(self) -> dict[str, list[str]]:
        """What the run's allocations shipped and could not remove (burnin.dispatch.base.left_on_nodes)."""
        return self._leftovers.remaining()
