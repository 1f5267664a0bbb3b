"""The check registry: every registered check by its catalog id, the checks' applicability rules, and the
modules that register them (imported by name, so this module imports no check module itself).

:mod:`burnin.checks.base`'s ``@check`` decorator fills :data:`CHECKS`; :func:`load_all` imports the
registering modules listed here. Adding a check module is one line in :data:`_NODE_MODULES` or
:data:`_WORKLOAD_MODULES` (docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from burnin.evaluate.verdict import Verdict
from burnin.facts import Facts
from burnin.topology.model import Topology

CheckFunction = Callable[[Facts, Topology], Verdict]


@dataclass(frozen=True, slots=True)
class CheckSpec:
    check_id: str
    title: str
    fast: bool
    func: CheckFunction
    references: tuple[str, ...] = ()
    """Names in ``topology.references`` the check reads (burnin.checks.references)."""
    sources: tuple[str, ...] = ()
    """Where its facts come from: collector sources (``nvml``, ``pci``, ``dmesg``...) or a phase (``fabric``)."""
    evidence: tuple[str, ...] = ()
    """Facts sections a suite's phase adds, which the check also judges when they are there (STO-04 the storage
    suite's pings, ``storage_pathmtu``) without needing them to judge at all (the probe judges it without)."""


CHECKS: dict[str, CheckSpec] = {}

#: check id -> the node type's own reason the check does not apply to it (None: it applies).
APPLICABILITY: dict[str, Callable[[Topology], str | None]] = {}

# Modules whose checks read only what the collector gathers (the probe picks from these: probe_check_ids)...
_NODE_MODULES = (
    "burnin.checks.inventory",
    "burnin.checks.firmware",
    "burnin.checks.gpu",
    "burnin.checks.host",
    "burnin.checks.host_config",
    "burnin.checks.pci_census",
    "burnin.checks.infiniband",
    "burnin.checks.ib_subnet",
    "burnin.checks.hca",
    "burnin.checks.software",
    "burnin.checks.storage",
    "burnin.checks.dcgm",
)
# ...and those that judge what a suite's phase recorded (workloads it ran, the fleet's inventory counts).
_WORKLOAD_MODULES = ("burnin.checks.fabric", "burnin.checks.fabric_gdr", "burnin.checks.fabric_nvlink",
                     "burnin.checks.workload",
                     "burnin.checks.storage_traffic", "burnin.checks.fleet", "burnin.checks.sdc")


def load_all(*, node_only: bool = False) -> dict[str, CheckSpec]:
    """Import the check modules (idempotent) and return the registry.

    ``node_only`` does not import the workload check modules, so the health
    probe does not import the fabric machinery it never uses; the registry it
    returns still holds every check imported so far (select by ``sources``).
    """
    for module in _NODE_MODULES if node_only else (*_NODE_MODULES, *_WORKLOAD_MODULES):
        # An import statement's own path (not importlib.import_module): `python -X importtime` sees it.
        __import__(module)
    return CHECKS
