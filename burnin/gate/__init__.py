"""Gating: which nodes may join the training pool, and acting on it."""

from burnin.gate.decide import CheckOutcome, NodeDecision, decide, gate_document

__all__ = ["CheckOutcome", "NodeDecision", "decide", "gate_document"]
