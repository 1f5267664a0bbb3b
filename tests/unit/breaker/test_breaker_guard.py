"""What every drain asks first: the breaker's files, its answer, the Slurm gate's and the watch's hooks."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from burnin.breaker import state
from burnin.breaker.budget import Allowance, Settings
from burnin.breaker.guard import guard
from burnin.errors import UsageError
from burnin.gate.decide import NodeDecision
from burnin.gate.slurm import apply_gate, drain
from burnin.transport.base import CommandResult
from burnin.watch.actions import SlurmActor


class Slurm:
    """Idle nodes (some drained by burnin just now); records every argv; drains and resumes nothing."""

    def __init__(self, names: Sequence[str], drained: Sequence[str] = (), *, readable: bool = True) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        self.lines = {n: f"NodeName={n} State=IDLE+DRAIN Reason=burnin: GPU-10 x [root@{stamp}]" if n in drained
                      else f"NodeName={n} State=IDLE" for n in names}
        self.readable = readable
        self.calls: list[list[str]] = []

    def run(self, argv: Sequence[str], *, timeout: float = 10.0) -> CommandResult:
        self.calls.append(list(argv))
        if argv[:3] == ["scontrol", "--oneliner", "show"]:
            if not self.readable and len(argv) == 4:  # the whole fleet: the breaker's read
                return CommandResult("ctl", tuple(argv), 1, "", "Unable to contact slurm controller", 0.0)
            return CommandResult("ctl", tuple(argv), 0, "\n".join(self.lines.values()) + "\n", "", 0.0)
        return CommandResult("ctl", tuple(argv), 0, "", "", 0.0)

    def updates(self) -> list[str]:
        return [argv[2] for argv in self.calls if argv[:2] == ["scontrol", "update"]]


def _rejected(node: str) -> NodeDecision:
    return NodeDecision(node, admitted=False, failed=("GPU-10",), reasons=("GPU-10 gpu3 links down",))


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BURNIN_STATE_DIR", str(tmp_path))
    return tmp_path


def test_settings_and_allowance_are_kept_together_and_default_when_absent(folder: Path) -> None:
    assert state.load() == (Settings(), None)
    state.save(settings=Settings(nodes=4, percent=1.0, window_s=60.0))
    state.save(allowance=Allowance(3, 100.0, 160.0))
    assert state.load() == (Settings(4, 1.0, 60.0), Allowance(3, 100.0, 160.0))
    assert not [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("text", ["{", "[]", '{"settings": {"nodes": -1}}', '{"settings": {"window_s": "x"}}',
                                  '{"settings": 3}', '{"allow": {"extra": true}}', '{"settings": {"record": "IB-01"}}'])
def test_a_broken_settings_file_is_a_usage_error_naming_it(folder: Path, text: str) -> None:
    (folder / state.SETTINGS_FILE).write_text(text)
    with pytest.raises(UsageError, match=r"breaker\.json"):
        state.load()


def test_the_claim_file_names_its_holder_while_held_and_nothing_after(folder: Path) -> None:
    with state.claim(["sim01"], "gate") as problem:
        assert problem is None
        holder = json.loads((folder / state.LOCK_FILE).read_text())
        assert holder["nodes"] == ["sim01"] and holder["by"] == "gate"
    assert (folder / state.LOCK_FILE).read_text() == ""


def test_without_a_state_directory_the_claim_says_why_and_the_decision_goes_on(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with state.claim(["sim01"], "gate", tmp_path / "file" / "state") as problem:
        assert problem is not None and "no claim file" in problem


def test_held_nodes_are_recorded_once_and_read_back_by_time(folder: Path) -> None:
    slurm = Slurm(["sim01", "sim02", "sim03"], drained=["sim01", "sim02"])
    with guard(["sim03"], by="watch", reasons={"sim03": "burnin: XID-01"}, client=slurm) as admission:
        assert admission.allowed == [] and list(admission.held) == ["sim03"]
        assert "held by the breaker (2 of 2 nodes" in admission.line("sim03")
    held = state.read_held(0.0)
    assert [(h["node"], h["by"], h["reason"]) for h in held] == [("sim03", "watch", "burnin: XID-01")]
    assert state.read_held(time.time() + 1) == []
    with guard(["sim03"], by="gate", client=slurm, dry_run=True) as admission:
        assert admission.held
    assert len(state.read_held(0.0)) == 1  # a dry run records nothing


def test_a_budget_that_cannot_be_read_holds_every_drain(folder: Path) -> None:
    with guard(["sim01"], by="gate", client=Slurm(["sim01"], readable=False)) as admission:
        assert admission.allowed == []
        assert "Slurm cannot be read: scontrol exited 1: Unable to contact" in admission.held["sim01"]
    (folder / state.SETTINGS_FILE).write_text("{")
    with guard(["sim01"], by="gate", client=Slurm(["sim01"])) as admission:
        assert "its settings cannot be read" in admission.held["sim01"]


def test_the_gate_drains_the_budget_and_keeps_the_rest_in_service_with_one_line_each(folder: Path) -> None:
    slurm = Slurm(["sim01", "sim02", "sim03", "sim04"])
    out = io.StringIO()
    actions = apply_gate({n: _rejected(n) for n in ("sim01", "sim02", "sim03")}, dry_run=False, client=slurm,
                         out=out, err=io.StringIO())
    assert slurm.updates() == ["NodeName=sim[01-02]"]
    assert [(a.target, a.action) for a in actions] == [("sim[01-02]", "drain"), ("sim03", "keep")]
    assert "burnin gate: sim03: held by the breaker (2 of 2 nodes" in out.getvalue()
    assert "the breaker held 1 of 3 drain(s) (sim03)" in out.getvalue()


def test_a_small_budget_goes_to_broken_nodes_before_unmeasured_ones(folder: Path) -> None:
    """sim01 and sim02 were not measured (RUN: the run held every node), sim03 failed a check: the two
    nodes of room drain sim03 first, then sim01; sim02 stays in service."""
    unmeasured = {n: NodeDecision(n, admitted=False, incomplete=("RUN",), reasons=("RUN dry run: launched nothing",))
                  for n in ("sim01", "sim02")}
    broken = NodeDecision("sim03", admitted=False, failed=("TOP-04",), incomplete=("RUN",),
                          reasons=("TOP-04 ACS enabled", "RUN dry run: launched nothing"))
    slurm = Slurm(["sim01", "sim02", "sim03", "sim04"])
    out = io.StringIO()
    apply_gate({**unmeasured, "sim03": broken}, dry_run=False, client=slurm, out=out, err=io.StringIO())
    assert sorted(slurm.updates()) == ["NodeName=sim01", "NodeName=sim03"], slurm.updates()
    assert "burnin gate: sim02: held by the breaker" in out.getvalue()


def test_a_gate_dry_run_shows_what_the_breaker_would_hold(folder: Path) -> None:
    out = io.StringIO()
    apply_gate({n: _rejected(n) for n in ("sim01", "sim02", "sim03")}, dry_run=True,
               client=Slurm(["sim01", "sim02", "sim03"]), out=out, err=io.StringIO())
    assert "# sim03: held by the breaker" in out.getvalue()
    assert state.read_held(0.0) == []


def test_resumes_are_never_withheld(folder: Path) -> None:
    state.save(settings=Settings(nodes=0, percent=0.0))
    slurm = Slurm(["sim01", "sim02"], drained=["sim01"])
    admitted = NodeDecision("sim01", admitted=True, passed=("GPU-10",))
    apply_gate({"sim01": admitted, "sim02": _rejected("sim02")}, dry_run=False, client=slurm, out=io.StringIO())
    assert slurm.updates() == ["NodeName=sim01"]  # the resume; sim02's drain held


def test_the_probes_drain_held_by_the_breaker_says_so_and_reports_not_drained(folder: Path) -> None:
    state.save(settings=Settings(nodes=0, percent=0.0))
    slurm = Slurm(["sim01"])
    err = io.StringIO()
    assert drain("sim01", "GPU-10 gpu3 links down", client=slurm, err=err) is False
    assert slurm.updates() == []
    assert err.getvalue().startswith("burnin: sim01: held by the breaker (0 of 0 nodes")


def test_the_watch_held_by_the_breaker_leaves_the_node_in_service_and_its_jobs_running(folder: Path) -> None:
    state.save(settings=Settings(nodes=0, percent=0.0))
    slurm = Slurm(["sim01"])
    outcome = SlurmActor("sim01", client=slurm).evict("burnin: XID-01 gpu3 Xid 79")
    assert not outcome.out_of_pool and outcome.requeued == ()
    assert [s.command for s in outcome.steps] == ["# held by the breaker"]
    assert "0 of 0 nodes taken out" in outcome.steps[0].detail
    assert slurm.updates() == [] and not any(argv[0] == "squeue" for argv in slurm.calls)
    assert [h["by"] for h in state.read_held(0.0)] == ["watch"]
    state.save(allowance=Allowance(1, time.time() - 1, time.time() + 600))  # allow 1: the retry drains
    assert SlurmActor("sim01", client=slurm).drain("burnin: XID-01 gpu3 Xid 79").out_of_pool
    assert slurm.updates() == ["NodeName=sim01"]


def test_a_check_in_record_mode_is_only_recorded_and_spends_no_budget(folder: Path) -> None:
    state.save(settings=Settings(nodes=1, percent=0.0, record=frozenset({"IB-01"})))
    slurm = Slurm(["sim01", "sim02", "sim03"])
    decisions = {"sim01": NodeDecision("sim01", admitted=False, failed=("IB-01",), reasons=("IB-01 port down",)),
                 "sim02": NodeDecision("sim02", admitted=False, failed=("IB-01", "GPU-10"),
                                       reasons=("IB-01 port down", "GPU-10 links down")),
                 "sim03": _rejected("sim03")}
    out = io.StringIO()
    apply_gate(decisions, dry_run=False, client=slurm, out=out, err=io.StringIO())
    assert slurm.updates() == ["NodeName=sim02"]  # a check that acts: drained, spending the one node of room
    assert "burnin gate: sim01: record mode (IB-01 would take it out); still rejected, not drained" in out.getvalue()
    assert "burnin gate: sim03: held by the breaker (1 of 1 nodes" in out.getvalue()
    assert {h["node"]: h["mode"] for h in state.read_held(0.0)} == {"sim01": "record", "sim03": "held"}


def test_the_watch_in_record_mode_drains_nothing_and_says_what_it_would_have_done(folder: Path) -> None:
    state.save(settings=Settings(record=frozenset({"XID-01"})))
    slurm = Slurm(["sim01"])
    outcome = SlurmActor("sim01", client=slurm).evict("burnin: XID-01 gpu3 Xid 79")
    assert not outcome.out_of_pool and slurm.updates() == []
    assert [s.command for s in outcome.steps] == ["# record mode"]
    assert outcome.steps[0].detail == "XID-01 would take it out: burnin: XID-01 gpu3 Xid 79; only recorded"
    assert Settings(record=frozenset({"A"})).record_only(None) is False  # ids that cannot be read: act
    assert Settings(record=frozenset({"A"})).record_only(()) is False
