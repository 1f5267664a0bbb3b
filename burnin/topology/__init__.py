"""Node-type expectations: YAML files validated into frozen models."""

from burnin.topology.load import find_topology, list_topologies, load_topology
from burnin.topology.model import Reference, Topology

__all__ = ["Reference", "Topology", "find_topology", "list_topologies", "load_topology"]
