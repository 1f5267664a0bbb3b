"""Gating: which nodes may join the training pool (:mod:`burnin.gate.decide`), and acting on it
(gates by name: :mod:`burnin.gate.registry`; Slurm: :mod:`burnin.gate.slurm`).

Nothing is imported here eagerly: the health probe reads the gate registry and
must not pay for the decision code (ClusterShell) it does not use.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CheckOutcome", "NodeDecision", "decide", "gate_document"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from burnin.gate import decide

        return getattr(decide, name)
    raise AttributeError(f"module 'burnin.gate' has no attribute {name!r}")
