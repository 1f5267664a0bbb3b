"""The history as JSON (``burnin history --json``) and the durations as people read them."""

from __future__ import annotations

from typing import Any

from burnin.history.load import Inputs
from burnin.history.metrics import DAY_S, FleetHistory, NodeHistory, Outage
from burnin.history.records import stamp

SCHEMA = 1


def duration_text(seconds: float | None) -> str:
    """``45 s``, ``12 min``, ``3.5 h``, ``2.1 d``; ``-`` for none."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < DAY_S:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / DAY_S:.1f} d"


def percent(fraction: float | None) -> str:
    return "-" if fraction is None else f"{100 * fraction:.1f}%"


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def _outage(outage: Outage) -> dict[str, Any]:
    return {
        "start": stamp(outage.start), "end": None if outage.end is None else stamp(outage.end),
        "duration_s": None if outage.end is None else round(outage.end - outage.start, 3),
        "attributed": outage.attributed, "failed": list(outage.failed), "incomplete": list(outage.incomplete),
        "reason": outage.reason, "sources": list(outage.sources), "origins": list(outage.origins),
    }


def _node(history: NodeHistory) -> dict[str, Any]:
    lemon = history.lemon
    return {
        "first_seen": stamp(history.first_seen), "last_seen": stamp(history.last_seen),
        "observations": history.observations,
        "failures": len(history.failures),
        "failed_checks": sorted({c for o in history.failures for c in o.failed}),
        "outages": [_outage(o) for o in history.outages],
        "mttr_s": _round(history.mttr_s),
        "availability": _round(history.availability, 6),
        "in_pool_s": round(history.in_pool_s, 3), "observed_s": round(history.observed_s, 3),
        "out_since": None if history.out_since is None else stamp(history.out_since),
        "lemon": None if lemon is None else {"failures": lemon.failures, "first": stamp(lemon.first),
                                             "last": stamp(lemon.last)},
    }


def history_document(fleet: FleetHistory, inputs: Inputs) -> dict[str, Any]:
    """Everything ``burnin history`` computed, with what it read and what it skipped."""
    return {
        "schema": SCHEMA,
        "period": {"start": stamp(fleet.start), "end": stamp(fleet.end), "days": round((fleet.end - fleet.start)
                                                                                         / DAY_S, 6)},
        "settings": {"lemon_failures": fleet.lemon_failures, "lemon_window_days": round(fleet.lemon_window_s / DAY_S,
                                                                                          6)},
        "fleet": {
            "nodes": len(fleet.nodes), "runs": len(inputs.runs), "failures": fleet.failures,
            "failures_by_check": dict(sorted(fleet.failures_by_check.items())),
            "failures_per_1000_node_days": _round(fleet.failures_per_1000_node_days),
            "node_days_in_pool": round(fleet.node_days_in_pool, 6),
            "mttr_s": _round(fleet.mttr_s), "availability": _round(fleet.availability, 6),
            "lemons": fleet.lemons, "out_of_pool": fleet.out_now,
        },
        "nodes": {node: _node(history) for node, history in fleet.nodes.items()},
        "runs": [{**run, "at": stamp(run["at"])} for run in sorted(inputs.runs, key=lambda r: r["at"])],
        "journals": inputs.journals,
        "skipped": [{"path": s.path, "reason": s.reason} for s in inputs.skipped],
        "inconsistent": [{"path": i.path, "node": i.node, "failed": list(i.failed), "incomplete": list(i.incomplete),
                          "reason": i.reason} for i in inputs.inconsistent],
    }
