"""The storage suite's measurements through the phase's launcher: STO-04's pings, then STO-03's writes and reads.

The phase holds its nodes first (through Slurm one allocation of them, a task per node, shared with other
jobs, or the allocation burnin runs in; nothing over SSH), declaring every command it will run; then each
node runs its commands one after the other (a step per command under Slurm), the nodes side by side. The
pings go first, so their few packets are not counted in STO-03's byte counters. Nodes that cannot be held
record why, so their checks are incomplete (under ``--dry-run`` the launcher prints the commands instead).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from burnin.facts import Facts
from burnin.launch.base import HOLD_WAIT_S, Hold, Launcher
from burnin.storage import pathmtu
from burnin.storage.common import mark_unavailable, no_fabric
from burnin.storage.measure import SECTION, StorageSettings, measure_traffic, phase_time_limit, traffic_plan
from burnin.storage.pathmtu_judge import SECTION as PATHMTU
from burnin.topology.model import Topology


def run_storage_phase(launcher: Launcher, facts: Mapping[str, Facts], nodes: Sequence[str], *, topology: Topology,
                      settings: StorageSettings) -> None:
    """Measure STO-04 and STO-03 on ``nodes`` and record both sections; the launcher is closed at the end."""
    try:
        fabric = topology.storage
        if fabric is None:
            for section in (PATHMTU, SECTION):
                mark_unavailable(facts, nodes, section, no_fabric(topology))
            return
        if not nodes:
            return
        how = Hold("storage", "the storage suite", time_limit_s=phase_time_limit(topology, settings),
                   wait_s=HOLD_WAIT_S, exclusive=False, tasks_per_node=1, measures=(PATHMTU, SECTION))
        plan = [*pathmtu.plan(nodes, fabric), *traffic_plan(nodes, topology, fabric, settings)]
        failure = launcher.hold(nodes, how, plan)
        if failure is not None:
            for section in (PATHMTU, SECTION):
                mark_unavailable(facts, nodes, section, failure)
            return
        pathmtu.measure_pathmtu(launcher, facts, nodes, fabric)
        measure_traffic(launcher, facts, nodes, topology=topology, fabric=fabric, settings=settings)
    finally:
        launcher.close()
