"""The soak's one seam to the nodes: run a command on some nodes, take a sample of the nodes.

:class:`SoakNodes` is all the scheduler knows of nodes: the launcher the dispatcher
``--sim`` / ``--via`` chose builds (:mod:`burnin.launch`), held for the whole soak
(:func:`open_nodes`; through Slurm one exclusive allocation, the collector shipped
once, a node Slurm will start no job on left in the soak, unreachable with the
cause). A stage's command is a command per node, every node at once, each node's
failure or hang its own; a sample is the collector launched on the nodes asked for.
"""

from __future__ import annotations

from collections.abc import Sequence

from burnin.facts import Facts
from burnin.launch.base import HOLD_WAIT_S, Hold, Launcher, NodeCommand, PlanItem
from burnin.launch.gather import collector_args, facts_from_result
from burnin.transport.base import CommandResult

SAMPLE_SOURCES = "nvml,gpu-telemetry,host-health,kernel-events,dmon,infiniband"
SDC_SOURCES = "nvml,sdc"
"""GPU-14 after each GPU stress stage: the SDC workload on every GPU, and NVML to place its GPUs."""


class SoakNodes:
    """The soak's nodes through its launcher (see the module docstring)."""

    def __init__(self, launcher: Launcher, nodes: Sequence[str]) -> None:
        self.nodes: list[str] = list(nodes)
        self._launcher = launcher

    def run(self, nodes: Sequence[str], argv: Sequence[str], *, timeout: float,
            stdin: bytes | None = None) -> dict[str, CommandResult]:
        """Run ``argv`` on every node of ``nodes`` at once; one result each (never raises for one node)."""
        return self._launcher.per_node([NodeCommand(node, tuple(argv), timeout, stdin=stdin) for node in nodes])

    def sample(self, *, timeout: float, nodes: Sequence[str] | None = None,
               sources: str = SAMPLE_SOURCES) -> dict[str, Facts]:
        """A monitoring sample of ``nodes`` (default: every node; an unreachable node gets Facts saying why);
        ``sources``: the collector's (the SDC workload after a GPU stage: :data:`SDC_SOURCES`)."""
        wanted = list(self.nodes if nodes is None else nodes)
        results = self._launcher.collect(wanted, collector_args(sources, timeout), timeout_s=timeout)
        return {node: facts_from_result(results[node]) for node in wanted}

    def ended(self) -> str | None:
        """Why the nodes' hold ended under the soak (its Slurm allocation cancelled, preempted, timed out); None
        while it holds. Asks the scheduler: call it once commands failed on every node, not every round."""
        return self._launcher.ended()

    def close(self) -> None:
        """Remove what was shipped and give the nodes back (also after an interrupt)."""
        self._launcher.close()


class HoldEnded(Exception):
    """The soak's hold on its nodes ended before the soak did: nothing more can be measured there. The soak
    stops as an interrupted one does (its checkpoint stays; ``--resume`` goes on in a new allocation)."""

    def __init__(self, why: str, at_s: float, duration_s: float) -> None:
        from burnin.soak.plan import hms

        super().__init__(f"the soak's allocation ended at +{hms(at_s)} of {hms(duration_s)}: {why}")


def open_nodes(launcher: Launcher, nodes: Sequence[str], *, hold_s: float,
               plan: Sequence[PlanItem] = ()) -> tuple[SoakNodes, str | None]:
    """The soak's nodes held through ``launcher`` for ``hold_s`` (what the soak may still need), told the
    ``plan``; with why they could not be held (then the launcher is closed already)."""
    how = Hold("soak", "the soak", time_limit_s=hold_s, wait_s=HOLD_WAIT_S, exclusive=True, tasks_per_node=1,
               collects=True)
    failure = launcher.hold(list(nodes), how, plan)
    if failure is not None:
        launcher.close()
    return SoakNodes(launcher, nodes), failure
