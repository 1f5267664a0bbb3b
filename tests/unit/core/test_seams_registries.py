"""The registries behind ``--via``, ``--suite`` and ``--gate``, the job launcher, and Slurm's one job layer."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from burnin.dispatch import registry as dispatchers
from burnin.dispatch.base import DispatchContext, preset_from_facts
from burnin.errors import UsageError
from burnin.facts import Facts
from burnin.gate.decide import NodeDecision
from burnin.gate.registry import GATES, find_gate, gate_names
from burnin.gate.slurm import SlurmGate, SlurmNode, drain_action
from burnin.launch.base import Each, Hold
from burnin.launch.log import NO_LOG, CommandLog
from burnin.launch.ssh import TransportLauncher
from burnin.phases import DRY_RUN_REASON, PHASES, Phase, PhaseContext, phases_for, suite_name
from burnin.transport.base import CommandResult
from burnin.transport.slurm import split_step
from burnin.transport.slurm_jobs import Allocation


def _args(**values: Any) -> argparse.Namespace:
    base: dict[str, Any] = {"via": None, "sim": None, "fault": [], "fabric_config": None, "localize": False,
                            "megatron_config": None}
    base.update(values)
    return argparse.Namespace(**base)


# ---------------------------------------------------------------- dispatchers


def test_via_names_the_dispatcher_and_sim_implies_itself() -> None:
    assert set(dispatchers.DISPATCHERS) == {"sim", "ssh", "slurm"}
    assert dispatchers.selected(_args(via="slurm")) == "slurm"
    assert dispatchers.selected(_args(sim=4)) == "sim"
    assert dispatchers.selected(_args()) is None


def test_no_dispatcher_says_how_to_choose_one(h100_topology: Any, tmp_path: Path) -> None:
    context = DispatchContext(h100_topology, "hgx-h100-8gpu", tmp_path)
    with pytest.raises(UsageError, match=r"no nodes: pass --sim \[N\]; --via ssh"):
        dispatchers.open_dispatcher(_args(), context)
    with pytest.raises(UsageError, match="--fault needs --sim"):
        dispatchers.open_dispatcher(_args(via="ssh", fault=["sim01:nvlink-down"]), context)


def test_every_dispatcher_module_offers_options_and_an_opener() -> None:
    parser = argparse.ArgumentParser()
    dispatchers.add_arguments(parser.add_argument_group("nodes"))
    parsed = parser.parse_args(["--via", "ssh", "--hosts", "a[1-2]", "--nodes", "b1", "--sim", "3"])
    assert (parsed.via, parsed.hosts, parsed.nodes, parsed.sim) == ("ssh", "a[1-2]", "b1", 3)
    for name in dispatchers.DISPATCHERS:
        module = dispatchers._module(name)
        assert callable(module.open_dispatcher) and callable(module.add_arguments) and module.USAGE


def test_a_fault_of_a_suite_not_run_is_refused() -> None:
    from burnin.dispatch.sim import refuse_faults_outside
    from burnin.sim import parse_fault_spec

    node_fault = {"sim01": [parse_fault_spec("nvlink-down")]}
    refuse_faults_outside(node_fault, ["fabric"])  # a node fault changes the node itself: any suite sees it
    refuse_faults_outside({"sim01": [parse_fault_spec("slow-hca")]}, ["node", "/site/suites/fabric"])
    with pytest.raises(UsageError, match=r"acts only in the megatron suite.*add --suite megatron"):
        refuse_faults_outside({"sim03": [parse_fault_spec("train-hang")]}, ["node", "fabric"])
    with pytest.raises(UsageError, match="burnin soak"):
        refuse_faults_outside({"sim03": [parse_fault_spec("mce")]}, ["node"])


# ---------------------------------------------------------------- job launcher


def _facts(**roots: str | None) -> dict[str, Facts]:
    return {node: Facts.unreachable_node(node, "down") if root is None else Facts(node, {"root": root, "sources": {}})
            for node, root in roots.items()}


def test_preset_comes_from_where_the_collector_read() -> None:
    assert preset_from_facts(_facts(a="/dev/shm/rack/a/root", b="/dev/shm/rack/b/root", c=None)) == "simulated"
    assert preset_from_facts(_facts(a="/dev/shm/rack/a/root", b="/")) == "production"
    assert preset_from_facts(_facts(a=None)) == "production"


class _Transport:
    name = "fake"

    def run(self, node: str, argv: Sequence[str], **kwargs: Any) -> CommandResult:
        return CommandResult(node, tuple(argv), 0, "", "", 0.0)

    def close(self) -> None:
        pass


def test_the_simulated_dispatcher_names_a_jobs_members() -> None:
    from burnin.dispatch.sim import SIM_JOB_ENV, sim_job_env

    assert sim_job_env(["sim03", "sim04"]) == {SIM_JOB_ENV: "sim03,sim04"}


# ---------------------------------------------------------------- phases


def test_phases_come_in_the_order_of_the_suites_and_check_their_options(tmp_path: Path) -> None:
    assert set(PHASES) >= {"fabric", "megatron"}
    runs = phases_for(_args(), ["megatron", "node", "fabric"])
    assert [r.phase.suite for r in runs] == ["megatron", "node", "fabric"]
    assert [r.phase.suite for r in phases_for(_args(), ["node"])] == ["node"]  # the fleet's counts (INV-11)
    assert phases_for(_args(), ["storage"])[0].phase.suite == "storage"
    assert suite_name("/site/suites/fabric") == "fabric"
    with pytest.raises(UsageError, match="--localize applies to the fabric suite only"):
        phases_for(_args(localize=True), ["node"])
    with pytest.raises(UsageError, match="--megatron-config applies to the megatron suite only"):
        phases_for(_args(megatron_config=tmp_path / "m.yaml"), ["fabric"])


def test_a_phase_records_into_the_facts_through_its_context(h100_topology: Any, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    class Counting(Phase):
        suite = "counting"

        def run(self, context: PhaseContext, options: Any) -> None:
            for node in context.reachable:
                context.facts[node].data["counting"] = {"nodes": len(context.reachable), "options": options}

    class Dispatcher:
        def launcher(self, facts: Any, *, log: CommandLog | None = None) -> TransportLauncher:
            return TransportLauncher(_Transport(), name="fake", preset=preset_from_facts(facts), log=log or NO_LOG)

    facts = _facts(a="/sim/a", b=None)
    context = PhaseContext(Dispatcher(), facts, h100_topology, tmp_path)
    Counting().run(context, "x")
    assert facts["a"].data["counting"] == {"nodes": 1, "options": "x"} and "counting" not in facts["b"].data
    launcher = context.launcher("counting.log")
    assert launcher.preset == "simulated"
    launcher.everywhere(["a"], ["true"], timeout_s=5)
    assert "$ [a] true" in (tmp_path / "counting.log").read_text()
    said: list[str] = []
    dry = PhaseContext(Dispatcher(), facts, h100_topology, tmp_path, dry_run=True, say=said.append).launcher()
    assert dry.hold(["a"], Hold("counting", "the test", 60), [Each(("a",), ("true",), 5)]) == DRY_RUN_REASON
    assert said == ["[a] true"]
    with pytest.raises(NotImplementedError):
        Phase().run(context, None)


# ---------------------------------------------------------------- gates


def test_gates_by_name() -> None:
    assert gate_names() == ["none", *GATES] and "slurm" in GATES
    assert isinstance(find_gate("slurm"), SlurmGate)
    with pytest.raises(UsageError, match="unknown gate 'k8s'"):
        find_gate("k8s")


def test_drain_action_never_overrides_someone_elses_hold() -> None:
    assert drain_action("n1", "GPU-04 x", SlurmNode("n1", "IDLE")).action == "drain"
    held = drain_action("n1", "GPU-04 x", SlurmNode("n1", "IDLE+DRAIN", "maintenance"))
    assert held.action == "keep" and "someone else" in held.note
    same = drain_action("n1", "GPU-04 x", SlurmNode("n1", "IDLE+DRAIN", "burnin: GPU-04 x"))
    assert same.action == "keep" and same.note.startswith("already drained")
    newer = drain_action("n1", "GPU-10 y", SlurmNode("n1", "IDLE+DRAIN", "burnin: GPU-04 x"))
    assert newer.action == "drain" and newer.argv[-1] == "Reason=burnin: GPU-10,GPU-04 y"


class _Scontrol:
    """``scontrol show node`` answers; every update fails."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def run(self, argv: Sequence[str], *, timeout: float = 10.0) -> CommandResult:
        self.calls.append(list(argv))
        if argv[:2] == ["scontrol", "--oneliner"]:
            return CommandResult("c", tuple(argv), 0, "NodeName=n1 State=IDLE\nNodeName=n2 State=IDLE\n", "", 0.0)
        return CommandResult("c", tuple(argv), 1, "", "scontrol: error: Access denied", 0.0)


def test_slurm_gate_reports_a_failed_action() -> None:
    decisions = {"n1": NodeDecision("n1", False, ("GPU-04",), (), ("GPU-04 gpu1 Xid 79",)),
                 "n2": NodeDecision("n2", True, (), (), ())}
    client = _Scontrol()
    import io

    err = io.StringIO()
    assert not SlurmGate(client=client).apply(decisions, dry_run=False, out=io.StringIO(), err=err)
    assert "could not drain n1" in err.getvalue()
    assert SlurmGate(client=client).apply(decisions, dry_run=True, out=io.StringIO(), err=err)


# ---------------------------------------------------------------- Slurm's job layer


class _Salloc:
    def __init__(self, granted: bool) -> None:
        self.granted = granted
        self.calls: list[list[str]] = []

    def run(self, argv: Sequence[str], *, timeout: float = 10.0) -> CommandResult:
        self.calls.append(list(argv))
        if argv[0] == "salloc" and self.granted:
            return CommandResult("c", tuple(argv), 0, "", "salloc: Granted job allocation 42\n", 0.1)
        if argv[0] == "salloc":
            return CommandResult("c", tuple(argv), 1, "", "salloc: error: Invalid partition name specified", 0.1)
        return CommandResult("c", tuple(argv), 0, "", "", 0.1)


def test_an_allocation_is_held_and_released() -> None:
    client = _Salloc(granted=True)
    allocation = Allocation(client, ["n1", "n2"], name="burnin-megatron-1", partition="gpu", exclusive=True,
                            tasks_per_node=None, purpose="the test")
    assert allocation.open(time_limit_s=600, wait_s=30, slack_s=10) is None and allocation.job_id == "42"
    salloc = client.calls[0]
    assert {"--exclusive", "--nodelist=n[1-2]", "--partition=gpu", "--time=10"} <= set(salloc)
    assert not any(a.startswith("--ntasks-per-node") for a in salloc)
    allocation.close()
    assert client.calls[-1] == ["scancel", "42"] and allocation.job_id is None


def test_a_refused_allocation_says_for_what_and_why() -> None:
    allocation = Allocation(_Salloc(granted=False), ["n1"], name="burnin-x", purpose="the megatron phase")
    failure = allocation.open(time_limit_s=60, wait_s=5, slack_s=5)
    assert failure == ("no Slurm allocation for the megatron phase: salloc exited 1: "
                       "salloc: error: Invalid partition name specified")


def test_inside_an_allocation_nothing_is_allocated_or_cancelled() -> None:
    client = _Salloc(granted=True)
    allocation = Allocation(client, ["n1"], name="burnin-fabric-1", job_id="7")
    assert allocation.open(time_limit_s=60, wait_s=5, slack_s=5) is None and allocation.job_id == "7"
    allocation.close()
    assert client.calls == []


def test_one_splitter_keeps_lines_for_tools_and_joins_chunks_for_the_collector() -> None:
    out = ("0: \n0: @burnin-node n1@\n0: # nThread 1\n0:      8  float\n0: \n0: @burnin-exit 0@\n"
           "1: \n1: @burnin-node n2@\n1: {\"a\": \n1: 1}\n1: \n1: @burnin-exit 124@\n")
    step = CommandResult("c", ("srun",), 0, out, "", 1.0)
    lines = split_step(step, ["n1", "n2"], node_argv=["tool"], chunked=False)
    assert lines["n1"].stdout == "# nThread 1\n     8  float\n" and lines["n1"].ok
    assert lines["n2"].exit_status == 124 and lines["n2"].error is None  # the tool's own exit status
    chunks = split_step(step, ["n1", "n2"], node_timeout_s=30)
    assert chunks["n2"].stdout == '{"a": 1}' and chunks["n2"].timed_out
    assert "collector timed out on n2 after 30 s" in (chunks["n2"].error or "")
