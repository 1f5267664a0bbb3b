"""The node checks of the catalog, by stable id (INV-01, GPU-10, IB-02, ...).

Each check is a pure function ``(facts, topology) -> Verdict``. The registry is
explicit: every module that defines checks is listed in ``_MODULES``.
"""

from __future__ import annotations

import importlib

from burnin.checks.base import CHECKS, CheckSpec, evaluate

_MODULES = (
    "burnin.checks.inventory",
    "burnin.checks.gpu",
    "burnin.checks.host",
    "burnin.checks.infiniband",
)


def load_all() -> dict[str, CheckSpec]:
    """Import every check module (idempotent) and return the registry."""
    for module in _MODULES:
        importlib.import_module(module)
    return CHECKS


__all__ = ["CHECKS", "CheckSpec", "evaluate", "load_all"]
