"""The acting gate: drain rejected nodes, resume only burnin's drains, never touch others'."""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from burnin.gate.decide import NodeDecision
from burnin.gate.slurm import (
    SlurmNode,
    apply_gate,
    drain,
    execute,
    node_state,
    parse_show_node,
    plan,
    resume_if_ours,
    unknown_nodes,
)
from burnin.history.store import Store
from burnin.transport.base import CommandResult
from burnin.transport.slurm import SlurmClient

SHOW = (
    "NodeName=sim01 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 State=IDLE ThreadsPerCore=1 "
    "Partitions=batch BootTime=2026-11-29T23:24:52 ExtSensorsTemp=n/s\n"
    "NodeName=sim02 Arch=x86_64 State=IDLE+DRAIN ThreadsPerCore=1 ExtSensorsTemp=n/s "
    "Reason=burnin: IB-01 mlx5_1 port=Down x=y [root@2026-11-29T23:45:25]\n"
    "NodeName=sim03 Arch=x86_64 State=MIXED+DRAIN ThreadsPerCore=1 "
    "Reason=maintenance [alice@2026-11-29T20:00:00] Comment=rack work\n"
    "NodeName=sim04 Arch=x86_64 State=DOWN+NOT_RESPONDING ThreadsPerCore=1 "
    "Reason=Not responding [slurm@2026-11-29T21:00:00]\n"
    "Node nosuch not found\n"
)


def _ok(node: str, failed: tuple[str, ...] = (), incomplete: tuple[str, ...] = (),
        reasons: tuple[str, ...] = (), passed: tuple[str, ...] = ("IB-01", "GPU-10")) -> NodeDecision:
    admitted = not failed and not incomplete
    return NodeDecision(node, admitted, failed, incomplete, reasons, passed=passed if admitted else ())


IB_FAIL = _ok("x", ("IB-01",), (), ("IB-01 mlx5_1 port 1: Down (expected Active)",))


def _rejected(node: str) -> NodeDecision:
    return NodeDecision(node, False, IB_FAIL.failed, (), IB_FAIL.reasons)


def test_parse_show_node_keeps_reasons_with_spaces_and_equals() -> None:
    nodes = parse_show_node(SHOW)
    assert nodes["sim01"] == SlurmNode("sim01", "IDLE", "")
    assert nodes["sim02"].reason == "burnin: IB-01 mlx5_1 port=Down x=y"
    assert nodes["sim02"].drained and nodes["sim02"].ours and not nodes["sim02"].busy
    assert nodes["sim03"].reason == "maintenance" and nodes["sim03"].busy
    assert nodes["sim03"].held_by_others and not nodes["sim03"].schedulable
    assert nodes["sim04"].held_by_others and not nodes["sim04"].drained
    assert nodes["sim01"].schedulable and not nodes["sim01"].held_by_others
    assert "nosuch" not in nodes and unknown_nodes(SHOW) == ["nosuch"]


def test_rejected_node_is_drained_with_a_burnin_reason_naming_the_check() -> None:
    current = parse_show_node(SHOW)
    actions = plan({"sim01": _rejected("sim01")}, current)
    assert [a.action for a in actions] == ["drain"]
    assert actions[0].argv[-1] == "Reason=burnin: IB-01 mlx5_1 port 1: Down (expected Active)"


def test_nodes_held_by_someone_else_are_never_touched() -> None:
    current = parse_show_node(SHOW)
    decisions = {"sim03": _rejected("sim03"), "sim04": _rejected("sim04")}
    actions = plan(decisions, current)
    assert [a.action for a in actions] == ["keep", "keep"]
    assert "maintenance" in actions[0].note and "Not responding" in actions[1].note
    # healthy, but drained by an operator: still left alone
    admitted = plan({"sim03": _ok("sim03")}, current)
    assert [a.action for a in admitted] == ["keep"] and "admitted, but" in admitted[0].note


def test_admitted_node_is_resumed_only_from_a_burnin_drain() -> None:
    current = parse_show_node(SHOW)
    actions = plan({n: _ok(n) for n in ("sim01", "sim02")}, current)
    assert [(a.action, a.target) for a in actions] == [("resume", "sim02")]
    assert actions[0].argv == ("scontrol", "update", "NodeName=sim02", "State=RESUME")


def test_burnin_drain_keeps_its_reason_when_the_run_only_found_incomplete() -> None:
    current = parse_show_node(SHOW)
    unreachable = NodeDecision("sim02", False, (), ("INV-01",), ("INV-01 could not be measured",))
    assert [a.action for a in plan({"sim02": unreachable}, current)] == ["keep"]
    # a new failure replaces the reason burnin set before
    assert [a.action for a in plan({"sim02": _rejected("sim02")}, current)] == ["drain"]


def test_same_reason_nodes_share_one_command_and_unknown_state_is_left_alone() -> None:
    current = {n: SlurmNode(n, "IDLE") for n in ("sim05", "sim06", "sim08")}
    decisions = {n: _rejected(n) for n in ("sim05", "sim06", "sim08", "sim09")}
    actions = plan(decisions, current, read_error="scontrol timed out after 10.0 s")
    drains = [a for a in actions if a.action == "drain"]
    assert len(drains) == 1 and drains[0].target == "sim[05-06,08]"
    keeps = [a for a in actions if a.action == "keep"]
    assert keeps[0].target == "sim09" and "scontrol timed out" in keeps[0].note


class FakeClient(SlurmClient):
    """Answers scontrol from a script; records every argv."""

    def __init__(self, show: str = SHOW, fail: Callable[[Sequence[str]], bool] = lambda argv: False,
                 ) -> None:
        super().__init__()
        self.show = show
        self.fail = fail
        self.calls: list[tuple[str, ...]] = []

    def run(self, argv: Sequence[str], *, timeout: float = 10.0) -> CommandResult:
        self.calls.append(tuple(argv))
        if self.fail(argv):
            return CommandResult("slurm", tuple(argv), None, "", "", timeout, timed_out=True)
        if argv[:4] == ["scontrol", "--oneliner", "show", "node"]:
            return CommandResult("slurm", tuple(argv), 0, self.show, "", 0.01)
        return CommandResult("slurm", tuple(argv), 0, "", "", 0.01)


def test_dry_run_prints_shell_quoted_commands_and_runs_nothing() -> None:
    client = FakeClient()
    out = io.StringIO()
    decisions = {"sim01": _rejected("sim01"), "sim02": _ok("sim02"), "sim03": _rejected("sim03")}
    apply_gate(decisions, dry_run=True, client=client, out=out, err=io.StringIO())
    lines = out.getvalue().splitlines()
    assert ("scontrol update NodeName=sim01 State=DRAIN "
            "'Reason=burnin: IB-01 mlx5_1 port 1: Down (expected Active)'") in lines
    assert "scontrol update NodeName=sim02 State=RESUME" in lines
    assert any(line.startswith("# sim03: ") and "maintenance" in line for line in lines)
    assert all(call[1] == "--oneliner" for call in client.calls)  # only reads


def test_a_failing_scontrol_is_reported_and_the_gate_goes_on() -> None:
    client = FakeClient(fail=lambda argv: "NodeName=sim01" in argv)
    out, err = io.StringIO(), io.StringIO()
    decisions = {"sim01": _rejected("sim01"), "sim02": _ok("sim02")}
    actions = apply_gate(decisions, dry_run=False, client=client, out=out, err=err)
    assert {a.action for a in actions} == {"drain", "resume"}
    assert "could not drain sim01" in err.getvalue() and "timed out" in err.getvalue()
    assert "burnin gate: resume sim02" in out.getvalue()


def test_unreadable_states_touch_nothing() -> None:
    client = FakeClient(fail=lambda argv: "show" in argv)
    err = io.StringIO()
    actions = apply_gate({"sim01": _rejected("sim01")}, dry_run=False, client=client,
                         out=io.StringIO(), err=err)
    assert [a.action for a in actions] == ["keep"]
    assert "cannot read node states" in err.getvalue()
    assert len(client.calls) == 1


def test_probe_helpers_respect_other_peoples_drains() -> None:
    client = FakeClient()
    assert node_state("sim02", client=client) == ("IDLE+DRAIN", "burnin: IB-01 mlx5_1 port=Down x=y")
    assert node_state("nosuch", client=client) is None
    assert drain("sim01", "XID-01 gpu3 Xid 79", client=client)
    assert client.calls[-1][-1] == "Reason=burnin: XID-01 gpu3 Xid 79"
    calls = len(client.calls)
    assert not drain("sim03", "XID-01 gpu3 Xid 79", client=client)  # operator's drain
    assert len(client.calls) == calls + 1  # read only
    assert not resume_if_ours("sim02", passed=("GPU-10",), client=client)  # drained for IB-01: not judged
    assert resume_if_ours("sim02", passed=("IB-01",), client=client)
    assert client.calls[-1] == ("scontrol", "update", "NodeName=sim02", "State=RESUME")
    assert not resume_if_ours("sim03", passed=("GPU-04",), client=client)
    assert not resume_if_ours("sim01", passed=("GPU-04",), client=client)
    # unchanged burnin drain: no second update
    calls = len(client.calls)
    assert drain("sim02", "burnin: IB-01 mlx5_1 port=Down x=y", client=client)
    assert len(client.calls) == calls + 1


def test_execute_without_out_is_silent_on_success() -> None:
    client = FakeClient()
    actions = plan({"sim01": _rejected("sim01")}, parse_show_node(SHOW))
    err = io.StringIO()
    assert execute(actions, dry_run=False, client=client, err=err)
    assert err.getvalue() == ""


def test_each_drain_and_resume_sent_is_in_the_history_and_a_failed_or_dry_one_is_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    history = tmp_path / "history.sqlite"
    monkeypatch.setenv("BURNIN_HISTORY", str(history))
    decisions = {"sim01": _rejected("sim01"), "sim02": _ok("sim02"), "sim03": _rejected("sim03")}
    apply_gate(decisions, dry_run=True, client=FakeClient(), out=io.StringIO(), err=io.StringIO())
    assert not history.exists()  # a dry run sends nothing, records nothing
    client = FakeClient(fail=lambda argv: "NodeName=sim02" in argv and "State=RESUME" in argv)
    err = io.StringIO()
    apply_gate(decisions, dry_run=False, client=client, out=io.StringIO(), err=err)
    assert "could not resume sim02" in err.getvalue()
    with Store(history, create=False) as store:
        found = {(node, action, checks, reason) for node, action, checks, reason, source in store.db.execute(
            "SELECT n.name, a.action, a.check_ids, a.reason, a.source FROM actions a "
            "JOIN node_names n ON n.id = a.node")}
        sources = {source for (source,) in store.db.execute("SELECT source FROM actions")}
    # sim01 drained (the resume of sim02 failed; sim03 is the operator's): only what Slurm accepted
    assert found == {("sim01", "drain", "IB-01", "burnin: IB-01 mlx5_1 port 1: Down (expected Active)")}
    assert len(sources) == 1 and next(iter(sources)).startswith("burnin")


def test_a_history_that_cannot_be_written_costs_the_drain_one_line(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    garbage = tmp_path / "history.sqlite"
    garbage.write_bytes(b"no database\n" * 100)
    monkeypatch.setenv("BURNIN_HISTORY", str(garbage))
    client, err = FakeClient(), io.StringIO()
    assert execute(plan({"sim01": _rejected("sim01")}, parse_show_node(SHOW)), dry_run=False, client=client,
                   err=err)
    assert client.calls[-1][:3] == ("scontrol", "update", "NodeName=sim01")
    assert err.getvalue().count("\n") == 1 and "1 gate action(s) not recorded" in err.getvalue()


def test_a_node_whose_allocation_ended_is_left_alone_unless_it_failed_what_was_measured() -> None:
    from burnin.cli.run_cmd import _not_measured
    from burnin.dispatch.base import PhaseEnded
    from burnin.fabric.phase import MEASURES

    fabric = "job 5 CANCELLED during the fabric phase"
    phases = dict.fromkeys(("n1", "n2", "n4", "n5", "n8"), PhaseEnded(fabric, frozenset(MEASURES)))
    gathered = {"n6": "job 3 CANCELLED", "n7": "job 3 CANCELLED", "n9": "job 3 CANCELLED"}
    decisions = {
        "n1": NodeDecision("n1", False, incomplete=("NCCL-03", "NVL-04")),  # the phase's checks: not its doing
        "n2": NodeDecision("n2", False, failed=("TOP-04",), incomplete=("NCCL-03",)),  # measured before the end
        "n3": NodeDecision("n3", True),
        "n4": NodeDecision("n4", False, incomplete=("GPU-06", "NCCL-03")),  # the gather could not read its GPUs
        "n5": NodeDecision("n5", False, incomplete=("SITE-01",)),  # a site's own check: not known to be a phase's
        "n6": NodeDecision("n6", False, incomplete=("GPU-06", "TOP-04")),  # its collector never answered
        "n7": NodeDecision("n7", False, failed=("GPU-06",)),
        "n8": NodeDecision("n8", False, incomplete=("GPU-14",)),  # the SDC size the collector could not read
    }
    assert _not_measured(gathered, phases, decisions) == {"n1": fabric, "n6": "job 3 CANCELLED"}


def test_an_ended_phase_excuses_only_the_checks_of_what_it_was_to_measure() -> None:
    """A Megatron allocation cancelled does not excuse NCCL-03 that the fabric phase left incomplete for the node's
    own reasons; the storage suite's end excuses STO-04's pings and STO-03, the fabric phase's STO-02's runtime
    evidence (checks that read a phase's section as evidence, not as their source)."""
    from burnin.cli.run_cmd import _not_measured
    from burnin.dispatch.base import PhaseEnded
    from burnin.fabric.phase import MEASURES as FABRIC
    from burnin.storage.measure import SECTION as TRAFFIC
    from burnin.storage.pathmtu_judge import SECTION as PATH_MTU

    megatron = PhaseEnded("job 9 CANCELLED during the megatron phase", frozenset({"megatron", "placement"}))
    storage = PhaseEnded("job 8 PREEMPTED during the storage suite", frozenset({TRAFFIC, PATH_MTU}))
    fabric = PhaseEnded("job 7 TIMEOUT during the fabric phase", frozenset(FABRIC))
    both = PhaseEnded(megatron.why, megatron.measures | fabric.measures)
    phases = {"m1": megatron, "m2": megatron, "s1": storage, "s2": storage, "f1": fabric, "b1": both}
    decisions = {
        "m1": NodeDecision("m1", False, incomplete=("MEG-01", "PIN-02")),
        "m2": NodeDecision("m2", False, incomplete=("MEG-01", "NCCL-03")),  # NCCL-03: no megatron measure
        "s1": NodeDecision("s1", False, incomplete=("STO-03", "STO-04")),
        "s2": NodeDecision("s2", False, incomplete=("STO-04", "NCCL-01")),
        "f1": NodeDecision("f1", False, incomplete=("NCCL-03", "NVL-04", "IB-08", "STO-02")),
        "b1": NodeDecision("b1", False, incomplete=("MEG-04", "NCCL-03")),  # both phases ended on it
    }
    assert _not_measured({}, phases, decisions) == {"m1": megatron.why, "s1": storage.why, "f1": fabric.why,
                                                    "b1": megatron.why}
