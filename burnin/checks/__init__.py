"""The node checks of the catalog, by stable id (INV-01, GPU-10, IB-02, ...).

Each check is a pure function ``(facts, topology) -> Verdict`` that declares
what it needs: its fact sources and the topology references it reads. The
registry is explicit: every module that defines checks is listed below.
"""

from __future__ import annotations

from collections.abc import Iterable

from burnin.checks.base import CHECKS, CheckSpec, evaluate
from burnin.checks.references import missing_reason, missing_references
from burnin.topology.model import Topology

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
                     "burnin.checks.storage_traffic", "burnin.checks.fleet")


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


PHASE_SOURCES = ("fabric", "megatron", "placement", "storage_traffic", "fleet")
"""Fact sources that are a measurement phase's records, not something the collector reads."""


def probe_check_ids(cheap_sources: Iterable[str]) -> list[str]:
    """The health probe's set, derived from the declarations: every ``fast`` node check whose fact
    sources are all among ``cheap_sources`` (the collector's cheap node-local ones, FAST_SOURCES)."""
    cheap = set(cheap_sources)
    return [cid for cid, spec in load_all(node_only=True).items() if spec.fast and cheap.issuperset(spec.sources)]


def unjudgeable_checks(topology: Topology) -> dict[str, str]:
    """Check id -> why ``topology`` cannot judge it (a reference it reads is defined nowhere).

    The check itself says the same when it runs: incomplete, with that cause.
    """
    out: dict[str, str] = {}
    for check_id, spec in load_all().items():
        missing = missing_references(topology, spec.references)
        if missing:
            out[check_id] = missing_reason(topology, missing)
    return out


__all__ = ["CHECKS", "PHASE_SOURCES", "CheckSpec", "evaluate", "load_all", "probe_check_ids", "unjudgeable_checks"]
