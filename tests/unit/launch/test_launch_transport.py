"""Launching over a transport (local processes here; SSH runs the same code in tests/sim_ssh): every node at
once, one node's failure its own, jobs with mpirun from the first node or as one modelled process."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from burnin.launch.base import Hold, JobSpec, MpirunOptions, NodeCommand
from burnin.launch.gather import gather
from burnin.launch.local import LocalLauncher
from burnin.launch.log import CommandLog
from burnin.launch.ssh import TransportLauncher
from burnin.transport.base import CommandResult
from burnin.transport.local import LocalTransport


class Flaky:
    """A transport whose run raises on one node (a connection refused) and records the others."""

    name = "flaky"

    def __init__(self, bad: str) -> None:
        self.bad = bad
        self.ran: list[tuple[str, tuple[str, ...], Mapping[str, str] | None]] = []
        self._lock = threading.Lock()

    def run(self, node: str, argv: Sequence[str], *, timeout: float, stdin: bytes | None = None,
            env: Mapping[str, str] | None = None) -> CommandResult:
        if node == self.bad:
            raise ConnectionRefusedError(f"[Errno 111] {node}: Connection refused")
        with self._lock:
            self.ran.append((node, tuple(argv), env))
        return CommandResult(node, tuple(argv), 0, f"{node} ok\n", "", 0.01)

    def close(self) -> None:
        pass


def test_one_nodes_transport_failure_is_that_nodes_result_and_the_others_go_on() -> None:
    transport = Flaky("n2")
    launcher = TransportLauncher(transport, name="flaky")
    results = launcher.everywhere(["n1", "n2", "n3"], ["true"], timeout_s=5)
    assert [r.ok for r in results.values()] == [True, False, True]
    assert results["n2"].error == "ConnectionRefusedError: [Errno 111] n2: Connection refused"
    assert results["n2"].exit_status is None and results["n2"].argv == ("true",)
    assert launcher.hold(["n1"], Hold("x", "the test", 60)) is None  # nothing to hold over a transport


@pytest.mark.proc
def test_each_node_runs_its_own_command_with_its_input_and_environment(tmp_path: Path) -> None:
    launcher = TransportLauncher(LocalTransport(), name="local", log=CommandLog(tmp_path / "log"))
    results = launcher.per_node([
        NodeCommand("a", ("sh", "-c", 'echo "$WHO $(cat)"'), 10, stdin=b"from stdin", env={"WHO": "a"}),
        NodeCommand("b", ("sh", "-c", "echo b >&2; exit 3"), 10),
    ])
    assert results["a"].stdout == "a from stdin\n" and results["a"].ok
    assert results["b"].exit_status == 3 and not results["b"].ok
    log = (tmp_path / "log").read_text()
    assert "$ [a] sh -c echo" in log and "-> exit 0 in" in log and "-> exit 3 in" in log and "; b" in log


def test_a_job_is_mpirun_from_its_first_node_bounded_around_mpirun() -> None:
    transport = Flaky("none")
    launcher = TransportLauncher(transport, name="ssh")
    spec = JobSpec(("n1", "n2"), ("all_reduce_perf", "-g", "1"), 60, ranks_per_node=2, env={"A": "1"},
                   mpirun=MpirunOptions("mpirun", ("--bind-to", "numa")))
    assert launcher.job(spec).ok
    ((node, argv, _),) = transport.ran
    assert node == "n1" and argv == ("timeout", "-k", "5", "60", "mpirun", "-np", "4", "-N", "2", "--host",
                                     "n1:2,n2:2", "--bind-to", "numa", "-x", "A=1", "all_reduce_perf", "-g", "1")


@pytest.mark.proc
def test_a_missing_mpirun_is_named_never_the_tool_it_was_to_start() -> None:
    launcher = TransportLauncher(LocalTransport(), name="local")
    spec = JobSpec(("n1", "n2"), ("all_reduce_perf",), 10, mpirun=MpirunOptions("/nonexistent/bin/mpirun"))
    result = launcher.job(spec)
    assert result.exit_status == 127 and result.error == "mpirun not found: /nonexistent/bin/mpirun"
    assert "all_reduce_perf" not in result.describe_failure()


def test_a_simulated_job_is_one_process_on_its_first_node_told_its_members() -> None:
    transport = Flaky("none")
    launcher = LocalLauncher(transport, lambda nodes: {"MEMBERS": ",".join(nodes)})
    launcher.job(JobSpec(("s1", "s2"), ("tool", "-x"), 30, env={"A": "1"}))
    launcher.per_node([NodeCommand(n, ("torchrun",), 30) for n in ("s1", "s2")], job=True)
    launcher.per_node([NodeCommand("s1", ("alone",), 30)])
    ran = sorted(transport.ran)
    assert ("s1", ("env", "A=1", "MEMBERS=s1,s2", "timeout", "-k", "5", "30", "tool", "-x"), None) in ran
    assert ("s2", ("torchrun",), {"MEMBERS": "s1,s2"}) in ran and ("s1", ("alone",), None) in ran
    launcher.job(JobSpec(("s1", "s2"), ("tool",), 30, launcher="mpirun"))
    assert transport.ran[-1][1][4] == "mpirun"  # a site that asks for mpirun gets it on a simulated rack too


@pytest.mark.proc
def test_gathering_is_the_collector_launched_on_every_node(tmp_path: Path) -> None:
    launcher = TransportLauncher(LocalTransport(), name="local")
    done: list[str] = []
    facts = gather(launcher, ["here", "there"], sources="kernel", timeout=60, on_done=done.append)
    assert sorted(done) == ["here", "there"]
    for node in ("here", "there"):
        assert facts[node].unreachable is None and "kernel" in facts[node].data["sources"], facts[node].data


class _Announcing:
    """A launcher's collect that announces some nodes' ends (one with a result it replaces afterwards, as a
    launcher that runs a failed step again node by node would) and not others."""

    def __init__(self, announced: Mapping[str, CommandResult], final: Mapping[str, CommandResult]) -> None:
        self.announced, self.final = announced, final

    def collect(self, nodes: Sequence[str], args: Sequence[str], *, timeout_s: float,
                on_done: object = None) -> dict[str, CommandResult]:
        assert callable(on_done)
        for node, result in self.announced.items():
            on_done(node, result)
        return {node: self.final[node] for node in nodes}


def _facts_output(node: str, balancing: int) -> CommandResult:
    text = json.dumps({"schema": 1, "node": node, "sources": {"kernel": {"ok": True, "error": None}}, "commands": {},
                       "kernel": {"numa_balancing": balancing}})
    return CommandResult(node, ("collector",), 0, text, "", 0.1)


def test_each_nodes_facts_are_the_result_the_launcher_returned_read_as_it_came_or_at_the_end() -> None:
    """Facts are read as each node's end is announced; a node never announced is read at the end, and one whose
    result the launcher replaced after announcing it gets the replacement's facts, never the first one's."""
    first, replaced = _facts_output("n1", 1), CommandResult("n1", ("collector",), None, "", "", 0.0,
                                                             error="step failed; ran alone: timed out")
    n2, n3 = _facts_output("n2", 0), _facts_output("n3", 1)
    launcher = _Announcing({"n1": first, "n3": n3}, {"n1": replaced, "n2": n2, "n3": n3})
    done: list[str] = []
    facts = gather(launcher, ["n1", "n2", "n3"], sources="kernel", timeout=5,  # type: ignore[arg-type]
                   on_done=done.append)
    assert done == ["n1", "n3"]
    assert facts["n1"].unreachable is not None and "timed out" in facts["n1"].unreachable
    assert facts["n2"].unreachable is None and facts["n2"].data["kernel"]["numa_balancing"] == 0
    assert facts["n3"].unreachable is None and facts["n3"].data["kernel"]["numa_balancing"] == 1
