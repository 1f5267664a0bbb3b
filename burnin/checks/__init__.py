"""The node checks of the catalog, by stable id (INV-01, GPU-10, IB-02, ...).

Each check is a pure function ``(facts, topology) -> Verdict``. The registry is
explicit: every module that defines checks is listed in ``_MODULES``.
"""

from __future__ import annotations

import importlib

from burnin.checks.base import CHECKS, CheckSpec, evaluate

# Modules whose checks read only what the collector gathers (the health probe's set)...
_NODE_MODULES = (
    "burnin.checks.inventory",
    "burnin.checks.gpu",
    "burnin.checks.host",
    "burnin.checks.infiniband",
    "burnin.checks.storage",
)
# ...and those that judge workloads run by a suite's measurement phase.
_WORKLOAD_MODULES = ("burnin.checks.fabric", "burnin.checks.fabric_gdr", "burnin.checks.workload")


def load_all(*, node_only: bool = False) -> dict[str, CheckSpec]:
    """Import the check modules (idempotent) and return the registry.

    ``node_only`` skips the workload checks, so the health probe does not
    import the fabric machinery it never uses.
    """
    for module in _NODE_MODULES if node_only else (*_NODE_MODULES, *_WORKLOAD_MODULES):
        importlib.import_module(module)
    return CHECKS


__all__ = ["CHECKS", "CheckSpec", "evaluate", "load_all"]
