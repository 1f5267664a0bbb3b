"""Gates: what acts on the verdicts, found by name (``burnin run --gate NAME``, ``burnin probe --gate NAME``).

A gate takes the run's decisions and puts nodes into the pool or holds them
out of it, touching only what burnin itself set (an operator's drain stays),
and putting a node back only for the checks it was taken out for that the
decision judged and passed (``NodeDecision.passed``).
One protocol (:class:`Gate`), one registration line per gate in :data:`GATES`:
``module:factory``, imported only when that gate is used (the probe starts
fast). docs/architecture.md shows how to add one.
"""

from __future__ import annotations

import importlib
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Protocol, TextIO

from burnin.errors import UsageError

if TYPE_CHECKING:
    from burnin.gate.decide import NodeDecision

NO_GATE = "none"

# name -> "module:factory"; the factory takes no argument and returns a Gate.
GATES: dict[str, str] = {
    "slurm": "burnin.gate.slurm:SlurmGate",
    "kubernetes": "burnin.gate.kubernetes_apply:KubernetesGate",
}


class Gate(Protocol):
    """Acts on decisions: admitted nodes back into the pool, rejected ones out of it."""

    name: str

    def apply(self, decisions: Mapping[str, NodeDecision], *, dry_run: bool, out: TextIO | None = None,
              err: TextIO | None = None) -> bool:
        """Act on every decision (with ``dry_run``: print the commands instead); False when an action failed.

        Only nodes burnin itself took out of the pool are put back, and only when every check they
        were taken out for is among the decision's ``passed``; a node held by anyone else is left as it is.
        """

    def drain(self, node: str, reason: str, *, dry_run: bool = False) -> bool:
        """Take one node out of the pool with a ``burnin:`` reason (the probe's ``--drain``); True if it is out."""

    def resume(self, node: str, *, passed: Collection[str], dry_run: bool = False) -> bool:
        """Put one node back, only if burnin took it out and for checks among ``passed`` (the checks the
        caller judged and passed on it: the probe's ``--undrain``); True if resumed."""


def gate_names() -> list[str]:
    """``none`` and every registered gate, for ``--gate`` choices."""
    return [NO_GATE, *GATES]


def find_gate(name: str) -> Gate:
    """The registered gate ``name``; UsageError naming the known ones otherwise."""
    target = GATES.get(name)
    if target is None:
        raise UsageError(f"unknown gate {name!r} (known: {', '.join(gate_names())})")
    module, _, attr = target.partition(":")
    factory = getattr(importlib.import_module(module), attr)
    gate: Gate = factory()
    return gate
