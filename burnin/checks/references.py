"""The one missing-reference policy: a check reads every threshold through :func:`reference`.

A reference is the topology's (``topology.references[key]``). When the
topology does not define it, the check is ``incomplete`` with the cause
(``topology NAME defines no KEY``), never judged against an invented number.
The only exceptions are the few values the check catalog itself fixes, listed
in :data:`CATALOG_DEFAULTS` with where the catalog says so: a topology may
override them, and omitting them is not a missing reference.

Checks also declare the references they read (``@check(..., references=...)``),
so :func:`burnin.checks.unjudgeable_checks` tells, when a topology is loaded,
which checks it cannot judge.
"""

from __future__ import annotations

from collections.abc import Iterable

from burnin.evaluate.verdict import Unmeasurable
from burnin.topology.model import Reference, Topology

CATALOG_DEFAULTS: dict[str, Reference] = {
    # TOP-08: "kernel.numa_balancing = 0"; not a site threshold.
    "numa_balancing": Reference(0, "check-catalog TOP-08 (automatic NUMA balancing off)", lower=0, upper=0),
    # NCCL-01..03, NVL-01..02: a value more than 10 % below the run's median is a straggler.
    # Same value as burnin.fabric.judge.DEFAULT_TOLERANCE (a test keeps them equal).
    "fabric_straggler_tolerance": Reference(0.10, "check-catalog 6/7 default straggler tolerance"),
    # IB-08: each HCA within 5 % of the node's median (burnin.fabric.judge.DEFAULT_GDR_SPREAD).
    "ib_write_bw_spread": Reference(0.05, "check-catalog IB-08 default spread between a node's HCAs"),
}


def missing_reason(topology: Topology, keys: Iterable[str]) -> str:
    """``topology NAME defines no KEY`` (or ``... no A, B``): why a check cannot be judged."""
    return f"topology {topology.name} defines no {', '.join(keys)}"


def reference(topology: Topology, key: str, *, lower_bound: bool = False) -> Reference:
    """The reference ``key`` of ``topology`` (or the catalog's fixed value); Unmeasurable when neither has it.

    ``lower_bound``: the check needs a floor, so a reference without ``lower`` is missing too.
    """
    ref = topology.ref(key)
    if ref is None:
        ref = CATALOG_DEFAULTS.get(key)
    if ref is None:
        raise Unmeasurable(missing_reason(topology, (key,)))
    if lower_bound and ref.lower is None:
        raise Unmeasurable(f"topology {topology.name} defines no {key} with a lower bound")
    return ref


def missing_references(topology: Topology, keys: Iterable[str]) -> tuple[str, ...]:
    """The ``keys`` that neither the topology nor the catalog defines."""
    return tuple(k for k in keys if topology.ref(k) is None and k not in CATALOG_DEFAULTS)
