"""The gate's own fail-closed rules, the atomic writer, and stale results at run start (issue 9)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from burnin.atomic import write_text_atomic
from burnin.facts import Facts
from burnin.gate.decide import CheckOutcome, decide, gate_document, hold_all


@pytest.mark.parametrize("status", ["skipped", "xfailed", "", "PASS", "passed", "not-applicable"])
def test_anything_but_a_verdict_or_a_reasoned_not_applicable_is_incomplete(status: str) -> None:
    decision = decide(["n1"], [CheckOutcome("n1", "GPU-10", "pass"), CheckOutcome("n1", "SITE-01", status)])["n1"]
    assert not decision.admitted
    assert decision.incomplete == ("SITE-01",)
    assert decision.reasons and decision.reasons[0].startswith("SITE-01 ")


def test_not_applicable_with_a_reason_admits_and_is_recorded() -> None:
    outcomes = [CheckOutcome("n1", "GPU-10", "pass"),
                CheckOutcome("n1", "STO-01", "not-applicable", "STO-01 not applicable: no storage fabric")]
    decision = decide(["n1"], outcomes)["n1"]
    assert decision.admitted and decision.incomplete == () and decision.reasons == ()
    assert decision.to_json()["not_applicable"] == {"STO-01": "STO-01 not applicable: no storage fabric"}


def test_a_node_with_only_not_applicable_checks_is_admitted_only_with_reasons() -> None:
    # one check that stood aside with its reason, one that did not say why
    outcomes = [CheckOutcome("n1", "A", "not-applicable", "A not applicable: single node"),
                CheckOutcome("n2", "A", "not-applicable", "   ")]
    decisions = decide(["n1", "n2"], outcomes)
    assert decisions["n1"].admitted
    assert not decisions["n2"].admitted and decisions["n2"].incomplete == ("A",)


def test_hold_all_admits_nobody_and_keeps_what_was_found() -> None:
    outcomes = [CheckOutcome("n1", "GPU-10", "pass"), CheckOutcome("n2", "GPU-10", "fail", "GPU-10 gpu3 17/18")]
    held = hold_all(decide(["n1", "n2"], outcomes), "partial run (-k 'inventory')")
    assert not any(d.admitted for d in held.values())
    assert held["n1"].incomplete == ("RUN",) and held["n1"].reasons == ("RUN partial run (-k 'inventory')",)
    assert held["n2"].failed == ("GPU-10",) and held["n2"].reasons[0] == "GPU-10 gpu3 17/18"
    twice = hold_all(held, "interrupted")
    assert twice["n1"].incomplete == ("RUN",) and len(twice["n1"].reasons) == 2
    doc = gate_document(twice)
    assert doc["admitted"] == "" and doc["summary"]["admitted"] == 0


def test_reasons_in_gate_json_are_printable() -> None:
    outcomes = [CheckOutcome("n1", "INV-02", "fail", "INV-02 model \x1b[2J\x00H100")]
    doc = gate_document(decide(["n1"], outcomes))
    assert doc["nodes"]["n1"]["reasons"] == ["INV-02 model \\x1b[2J\\x00H100"]


def test_atomic_write_replaces_whole_or_not_at_all(tmp_path: Path) -> None:
    target = tmp_path / "gate.json"
    write_text_atomic(target, '{"old": true}')
    with pytest.raises(UnicodeEncodeError):
        write_text_atomic(target, '{"new": "\udcff"}')  # fails half-way: the old file stays whole
    assert json.loads(target.read_text()) == {"old": True}
    write_text_atomic(target, '{"new": 1}')
    assert json.loads(target.read_text()) == {"new": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["gate.json"]


class _InterruptedGather:
    """A dispatcher whose fact gathering is interrupted (SIGINT before any verdict)."""

    nodes = ["sim01"]
    topology_by_node: dict[str, str] = {}

    def __init__(self, raise_: Callable[[], Any]) -> None:
        self._raise = raise_

    def gather(self, *, sources: str, timeout: float, on_done: Callable[[str], None] | None = None
               ) -> dict[str, Facts]:
        self._raise()
        return {}

    def close(self) -> None:
        pass


def _interrupt() -> None:
    raise KeyboardInterrupt


def test_a_run_interrupted_before_judging_leaves_no_earlier_gate(tmp_path: Path) -> None:
    from burnin.session import execute

    (tmp_path / "gate.json").write_text(json.dumps({"admitted": "sim01", "nodes": {"sim01": {"admitted": True}}}))
    (tmp_path / "verdicts.json").write_text("[]")
    with pytest.raises(KeyboardInterrupt):
        execute(_InterruptedGather(_interrupt), topology="hgx-h100-8gpu", out_dir=tmp_path)
    assert not (tmp_path / "gate.json").exists()
    assert not (tmp_path / "verdicts.json").exists()
