"""Edges of the acting gate (burnin.gate.slurm) that bench/mutants showed untested."""

from __future__ import annotations

import io
from collections.abc import Sequence

import pytest

from burnin.gate.decide import NodeDecision
from burnin.gate.slurm import REASON_LIMIT, GateAction, burnin_reason, drain, execute, plan, read_nodes
from burnin.gate.slurm import SlurmNode as Node
from burnin.transport.base import CommandResult
from burnin.transport.slurm import SlurmClient

SHOW = ("NodeName=sim01 Arch=x86_64 State=IDLE ThreadsPerCore=1\n"
        "NodeName=sim02 Arch=x86_64 State=IDLE+DRAIN ThreadsPerCore=1 Reason=burnin: IB-01 old cause "
        "[root@2026-11-29T23:45:25]\n")


class Scontrol(SlurmClient):
    """scontrol answering ``show`` with ``SHOW`` and ``show_status``; every other call succeeds."""

    def __init__(self, show: str = SHOW, show_status: int = 0) -> None:
        super().__init__()
        self.show, self.show_status = show, show_status
        self.calls: list[tuple[str, ...]] = []

    def run(self, argv: Sequence[str], *, timeout: float = 10.0) -> CommandResult:
        self.calls.append(tuple(argv))
        if "show" in argv:
            return CommandResult("slurm", tuple(argv), self.show_status, self.show, "", 0.01)
        return CommandResult("slurm", tuple(argv), 0, "", "", 0.01)


def test_a_reason_of_exactly_the_limit_is_kept_whole() -> None:
    text = "burnin: " + "x" * (REASON_LIMIT - 8)
    assert burnin_reason(text) == text
    longer = burnin_reason(text + "y")
    assert len(longer) == REASON_LIMIT and longer == text[: REASON_LIMIT - 3] + "..."


def test_some_nodes_unknown_is_not_a_failed_read() -> None:
    found, error = read_nodes(["sim01", "nosuch"], client=Scontrol(SHOW + "Node nosuch not found\n", 1))
    assert set(found) == {"sim01", "sim02"} and error is None


def test_nothing_found_is_a_failed_read_only_when_scontrol_failed() -> None:
    assert read_nodes(["nosuch"], client=Scontrol("", 0)) == ({}, None)
    found, error = read_nodes(["nosuch"], client=Scontrol("", 1))
    assert found == {} and error


def test_drain_says_what_it_did_and_why_resume_only_what() -> None:
    decisions = {"sim01": NodeDecision("sim01", False, ("GPU-01",), (), ("GPU-01 driver 550 (expected 535)",)),
                 "sim02": NodeDecision("sim02", True, passed=("IB-01",))}
    current = {"sim01": Node("sim01", "IDLE"), "sim02": Node("sim02", "IDLE+DRAIN", "burnin: IB-01 old cause")}
    out = io.StringIO()
    assert execute(plan(decisions, current), dry_run=False, client=Scontrol(), out=out, err=io.StringIO())
    lines = out.getvalue().splitlines()
    assert "burnin gate: drain sim01: burnin: GPU-01 driver 550 (expected 535)" in lines
    assert "burnin gate: resume sim02" in lines


def test_draining_a_node_slurm_does_not_know_is_refused_with_a_message(capsys: pytest.CaptureFixture[str]) -> None:
    err = io.StringIO()
    client = Scontrol()
    assert drain("nosuch", "GPU-01 driver", client=client, err=err) is False
    assert err.getvalue() == "burnin: cannot read the state of nosuch: not found in Slurm; not drained\n"
    assert all("update" not in call for call in client.calls)
    assert drain("nosuch", "GPU-01 driver", client=Scontrol()) is False
    assert "cannot read the state of nosuch" in capsys.readouterr().err


def test_a_burnin_drain_with_another_cause_is_drained_again_with_the_new_one() -> None:
    client = Scontrol()
    assert drain("sim02", "XID-01 gpu3 Xid 79", client=client)
    # the earlier reason's IB-01 stays named: nothing judged it since
    assert client.calls[-1][-1] == "Reason=burnin: XID-01,IB-01 gpu3 Xid 79"
    same = Scontrol()
    assert drain("sim02", "IB-01 old cause", client=same)
    assert all("update" not in call for call in same.calls)


def test_a_kept_node_is_reported_with_its_note_and_nothing_runs() -> None:
    client = Scontrol()
    keep = GateAction(("sim03",), "keep", "held by someone else: maintenance")
    out = io.StringIO()
    assert execute([keep], dry_run=False, client=client, out=out, err=io.StringIO())
    assert out.getvalue() == "burnin gate: sim03: held by someone else: maintenance\n"
    assert execute([keep], dry_run=False, client=client, err=io.StringIO())
    assert client.calls == []
