"""Node-type expectations: YAML files validated into frozen models.

Import the loaders from :mod:`burnin.topology.load` (pydantic, full errors) or
:mod:`burnin.topology.fast` (cached, for the health probe); this package
itself stays light.
"""

from __future__ import annotations

from burnin.topology.model import Reference, Topology


def find_topology(name_or_file: str) -> Topology:
    """Load and validate a topology by name or file (see :mod:`burnin.topology.load`)."""
    from burnin.topology.load import find_topology as load

    return load(name_or_file)


__all__ = ["Reference", "Topology", "find_topology"]
