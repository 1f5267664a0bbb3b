"""What the storage suite's measurements share: recording why a node was not measured."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from burnin.facts import Facts
from burnin.topology.model import Topology


def mark_unavailable(facts: Mapping[str, Facts], nodes: Sequence[str], section: str, reason: str) -> None:
    """Every node's ``section`` says why it holds no measurement (its check reads it as incomplete)."""
    for node in nodes:
        facts[node].data[section] = {"unavailable": reason}


def no_fabric(topology: Topology) -> str:
    return f"topology {topology.name} declares no storage fabric"
