"""The repair executor's decisions on what the simulator cannot stage: a process holding the GPU, an operator
who drains the node while it is being repaired, a reboot that never ends, a vendor path too long for a reason.

Slurm is a small in-memory double (show node, update, reboot) and the node a double that answers commands
and acceptance runs as told: the production code between them is the executor's own.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from burnin.gate.decide import NodeDecision
from burnin.repair.executor import BUG_REPORT, Repair, repair_node, why_left
from burnin.repair.journal import Journal
from burnin.repair.settings import RepairSettings
from burnin.session import RunResult
from burnin.transport.base import CommandResult
from burnin.transport.slurm_jobs import SlurmNode

REASON = "burnin: GPU-04 gpu3 Xid 79 (GPU has fallen off the bus)"


class Slurm:
    def __init__(self, state: str, reason: str) -> None:
        self.nodes = {"n1": [state, reason]}
        self.calls: list[list[str]] = []
        self.back_after_reboot = True
        self.on_update: list[str] = []

    def run(self, argv: Sequence[str], *, timeout: float = 0.0) -> CommandResult:
        args = list(argv)
        self.calls.append(args)
        if args[1:4] == ["--oneliner", "show", "node"]:
            state, reason = self.nodes["n1"]
            return CommandResult("", tuple(argv), 0, f"NodeName=n1 State={state} Reason={reason}\n", "", 0.0)
        if args[1] == "reboot":
            reason = next(a for a in args if a.startswith("reason="))[len("reason="):]
            self.nodes["n1"] = ["DOWN", reason] if self.back_after_reboot else ["DOWN+REBOOT_ISSUED", reason]
        elif "State=RESUME" in args:
            self.nodes["n1"] = ["IDLE", ""]
        elif "State=DRAIN" in args:
            self.nodes["n1"] = ["IDLE+DRAIN", next(a for a in args if a.startswith("Reason="))[len("Reason="):]]
        return CommandResult("", tuple(argv), 0, "", "", 0.0)


class Node:
    def __init__(self, slurm: Slurm, *, apps: str = "", verdicts: Sequence[str] = ("pass",)) -> None:
        self.slurm = slurm
        self.apps = apps
        self.verdicts = list(verdicts)
        self.commands: list[list[str]] = []
        self.operator_drains_after_acceptance = False

    def run(self, node: str, argv: Sequence[str], timeout_s: float) -> CommandResult:
        self.commands.append(list(argv))
        out = self.apps if "--query-compute-apps=pid" in argv else ""
        return CommandResult(node, tuple(argv), 0, out, "", 0.0)

    def accept(self, node: str, out_dir: Path) -> RunResult:
        verdict = self.verdicts.pop(0)
        if self.operator_drains_after_acceptance:
            self.slurm.nodes["n1"] = ["IDLE+DRAIN", "bad DIMM, alice"]
        decision = (NodeDecision(node, True, passed=("GPU-04", "GPU-01")) if verdict == "pass" else
                    NodeDecision(node, False, failed=("GPU-04",), reasons=("GPU-04 gpu3 Xid 79",)))
        return RunResult(out_dir, {node: decision}, {}, 0 if verdict == "pass" else 1)


def _repair(tmp_path: Path, slurm: Slurm, node: Node, **settings: object) -> Repair:
    clock = iter(float(t) for t in range(1_800_000_000, 1_800_001_000))
    return Repair(RepairSettings.model_validate(settings), node, slurm, Journal(tmp_path / "repair.jsonl",
                                                                               history=False),
                  tmp_path / "out", tmp_path / "bundles", say=lambda _: None, clock=lambda: next(clock),
                  sleep=lambda _: None)


def test_a_gpu_held_by_a_process_is_not_reset_and_the_ladder_climbs_to_the_reboot(tmp_path: Path) -> None:
    slurm = Slurm("IDLE+DRAIN", REASON)
    node = Node(slurm, apps="4242\n")
    result = repair_node(_repair(tmp_path, slurm, node), "n1")
    assert result.result == "resumed" and result.steps == ["reset", "reboot"]
    assert ["nvidia-smi", "-r", "-i", "3"] not in node.commands
    attempts = [e for e in Journal(tmp_path / "repair.jsonl").entries() if e["event"] == "attempt"]
    assert attempts[0]["outcome"] == "not-taken" and "gpu3 is in use (pid 4242)" in attempts[0]["detail"]
    assert slurm.calls[-1] == ["scontrol", "update", "NodeName=n1", "State=RESUME"]


def test_an_operator_who_drains_the_node_during_its_repair_keeps_it(tmp_path: Path) -> None:
    slurm = Slurm("IDLE+DRAIN", REASON)
    node = Node(slurm)
    node.operator_drains_after_acceptance = True
    result = repair_node(_repair(tmp_path, slurm, node), "n1")
    assert result.result == "left" and "never touched by burnin" in result.detail
    assert not any("State=RESUME" in call for call in slurm.calls)
    assert slurm.nodes["n1"] == ["IDLE+DRAIN", "bad DIMM, alice"]


def test_a_reboot_that_does_not_come_back_in_time_is_not_taken(tmp_path: Path) -> None:
    slurm = Slurm("IDLE+DRAIN", "burnin: IB-03 mlx5_2 port down")
    slurm.back_after_reboot = False
    node = Node(slurm)
    result = repair_node(_repair(tmp_path, slurm, node, reboot={"wait_s": 30}), "n1")
    assert result.result == "vendor" and result.steps == ["reboot", "vendor"]
    attempts = [e for e in Journal(tmp_path / "repair.jsonl").entries() if e["event"] == "attempt"]
    assert attempts[0]["outcome"] == "not-taken" and "not back 30 s after the reboot" in attempts[0]["detail"]
    assert any(c[0] == "sh" and "mlxlink" in c[-1] for c in node.commands)  # a fabric bundle asks mlxlink
    assert node.commands.count(["ibstat"]) == 1


def test_a_vendor_path_too_long_for_a_reason_names_the_bundle_file(tmp_path: Path) -> None:
    slurm = Slurm("IDLE+DRAIN", REASON)
    node = Node(slurm, verdicts=("fail", "fail"))
    repair = _repair(tmp_path, slurm, node)
    repair.bundle_dir = tmp_path / ("deep" * 40)
    result = repair_node(repair, "n1")
    assert result.result == "vendor" and result.bundle is not None
    _state, reason = slurm.nodes["n1"]
    assert reason == f"burnin: GPU-04 sent to vendor: {result.bundle.name}"


@pytest.mark.parametrize(("state", "reason", "words"), [
    ("IDLE", "", "in service"),
    ("IDLE+DRAIN", "bios update", "never touched by burnin"),
    ("DOWN", "Not responding", "never touched by burnin"),
    ("IDLE+DRAIN", "burnin: GPU-04 sent to vendor: /x.tar.gz", "an operator returns it"),
    ("IDLE+DRAIN", "burnin: gpu4 edited by hand", "cannot be read"),
])
def test_what_the_repair_leaves_alone(state: str, reason: str, words: str) -> None:
    assert words in (why_left(SlurmNode("n1", state, reason), None) or "")
    assert why_left(SlurmNode("n1", "DOWN", REASON), None) is None


_FAKE_BUG_REPORT = """#!/bin/sh
# a stand-in nvidia-bug-report.sh: --output-file FILE; writes FILE.gz as the real one does, or hangs
[ -n "$HANG" ] && exec sleep 60
printf 'NVIDIA bug report for %s\\n' "$(hostname)" | gzip > "$2.gz"
"""


@pytest.mark.proc
@pytest.mark.parametrize("hang", [False, True])
def test_the_bug_report_leaves_no_folder_on_the_node(tmp_path: Path, hang: bool) -> None:
    """Its output comes back and its scratch folder goes, also when the command's limit stops it mid-report."""
    tools, scratch = tmp_path / "bin", tmp_path / "tmp"
    tools.mkdir()
    scratch.mkdir()
    fake = tools / "nvidia-bug-report.sh"
    fake.write_text(_FAKE_BUG_REPORT)
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{tools}:{os.environ['PATH']}", "TMPDIR": str(scratch), **({"HANG": "1"} if hang
                                                                                              else {})}
    proc = subprocess.run(["timeout", "-k", "5", "2", *BUG_REPORT], capture_output=True, text=True, env=env,
                          timeout=60, check=False)
    if hang:
        assert proc.returncode == 124, proc
    else:
        assert proc.returncode == 0 and proc.stdout.startswith("NVIDIA bug report for "), proc
    assert list(scratch.iterdir()) == []
