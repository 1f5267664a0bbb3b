"""Edges of the gate package, the gate registry and the Slurm gate's overall result (bench/mutants survivors)."""

from __future__ import annotations

import io
from collections.abc import Sequence

import pytest

import burnin.gate
from burnin.errors import UsageError
from burnin.gate.decide import NodeDecision, gate_document
from burnin.gate.registry import find_gate
from burnin.gate.slurm import SlurmGate
from burnin.transport.base import CommandResult
from burnin.transport.slurm import SlurmClient

SHOW = "NodeName=sim01 Arch=x86_64 State=IDLE ThreadsPerCore=1\n"


class Scontrol(SlurmClient):
    """``show`` answers ``SHOW``, or times out when ``readable`` is False; updates succeed."""

    def __init__(self, *, readable: bool = True) -> None:
        super().__init__()
        self.readable = readable
        self.calls: list[tuple[str, ...]] = []

    def run(self, argv: Sequence[str], *, timeout: float = 10.0) -> CommandResult:
        self.calls.append(tuple(argv))
        if "show" in argv and not self.readable:
            return CommandResult("slurm", tuple(argv), None, "", "", timeout, timed_out=True)
        return CommandResult("slurm", tuple(argv), 0, SHOW if "show" in argv else "", "", 0.01)


def test_the_package_exports_the_decision_api_lazily() -> None:
    assert burnin.gate.gate_document is gate_document
    with pytest.raises(AttributeError, match="no attribute 'nosuch'"):
        _ = burnin.gate.nosuch


def test_an_unknown_gate_is_a_usage_error_naming_the_known_ones() -> None:
    with pytest.raises(UsageError, match=r"unknown gate 'nosuch' \(known: none, slurm, kubernetes\)"):
        find_gate("nosuch")
    assert find_gate("slurm").name == "slurm"
    assert find_gate("kubernetes").name == "kubernetes"


def test_the_slurm_gate_succeeds_when_it_read_and_acted() -> None:
    decisions = {"sim01": NodeDecision("sim01", False, ("GPU-01",), (), ("GPU-01 driver",))}
    client = Scontrol()
    assert SlurmGate(client=client).apply(decisions, dry_run=False, out=io.StringIO(), err=io.StringIO())
    assert any("State=DRAIN" in call for call in client.calls)


def test_the_slurm_gate_fails_when_it_could_not_read_the_node_states() -> None:
    decisions = {"sim01": NodeDecision("sim01", False, ("GPU-01",), (), ("GPU-01 driver",))}
    err = io.StringIO()
    client = Scontrol(readable=False)
    assert not SlurmGate(client=client).apply(decisions, dry_run=False, out=io.StringIO(), err=err)
    assert "cannot read node states" in err.getvalue()
    assert all("update" not in call for call in client.calls)
