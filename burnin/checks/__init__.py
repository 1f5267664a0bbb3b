"""The node checks of the catalog, by stable id (INV-01, GPU-10, IB-02, ...).

Each check is a pure function ``(facts, topology) -> Verdict`` that declares
what it needs: its fact sources and the topology references it reads. The
registry is explicit: every module that defines checks is listed in
:mod:`burnin.checks.registry`.
"""

from __future__ import annotations

from collections.abc import Iterable

from burnin.checks.base import evaluate
from burnin.checks.references import missing_reason, missing_references
from burnin.checks.registry import CHECKS, CheckSpec, load_all
from burnin.topology.model import Topology

PHASE_SOURCES = ("fabric", "megatron", "placement", "storage_traffic", "fleet", "sdc_fleet")
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


__all__ = ["CHECKS", "PHASE_SOURCES", "CheckSpec", "evaluate", "load_all",
           "probe_check_ids", "unjudgeable_checks"]
