"""The node suite's phase: count, over the run's nodes of each type, who runs which inventory (INV-11), and
which GPUs returned which SDC digests (GPU-14).

Nothing is launched: every node's facts are in, so the phase reads each
reachable node's inventory and records into every node's facts how many nodes
of its type run each driver, VBIOS, HCA firmware, ... (:mod:`burnin.checks.fleet`),
and how many GPUs of its group returned each digest of the SDC workload the
collector ran (:mod:`burnin.checks.sdc`). The node suite's INV-11 and GPU-14 then
judge each node against those counts.
"""

from __future__ import annotations

from typing import Any

from burnin.phases import Phase, PhaseContext


class FleetPhase(Phase):
    suite = "node"

    def run(self, context: PhaseContext, options: Any) -> None:
        from burnin.checks.fleet import SECTION, fleet_sections
        from burnin.topology.load import find_topology
        from burnin.topology.model import Topology

        # Each node's type, as the dispatcher's inventory names it (the run's topology by default).
        by_node: dict[str, str] = getattr(context.dispatcher, "topology_by_node", None) or {}
        loaded: dict[str, Topology] = {}
        topologies: dict[str, Topology] = {}
        for node in context.facts:
            name = by_node.get(node)
            if name is None:
                topologies[node] = context.topology
                continue
            if name not in loaded:
                loaded[name] = find_topology(name)
            topologies[node] = loaded[name]
        for node, section in fleet_sections(context.facts, topologies).items():
            context.facts[node].data[SECTION] = section
        from burnin.checks.sdc import SECTION as SDC_SECTION
        from burnin.checks.sdc import sdc_sections

        for node, section in sdc_sections(context.facts).items():
            context.facts[node].data[SDC_SECTION] = section


PHASE = FleetPhase()
