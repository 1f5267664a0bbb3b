"""GPU-14 silent data corruption on simulated racks: the node-side workload runs for real (CPU torch).

Issue 25's done-when: ``burnin run --sim 8 --fault sim05:sdc-gpu3`` rejects exactly sim05 with GPU-14 naming
gpu3 (the other nodes pass it, nothing incomplete); a 2-node rack whose nodes disagree GPU for GPU is
incomplete, not failed; ``burnin soak --sim 4 --duration 6h --fault sim02:sdc-when-hot`` fails sim02 when the
fault begins, not before.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from burnin.sim.sdc import HOT_AFTER_S
from burnin.soak.plan import SoakSettings, hms

GPU_STAGE_ENDS_S = (SoakSettings().dcgm.minutes + SoakSettings().gpu.minutes) * 60  # the first SDC round of a soak

def burnin(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "burnin.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, check=False)


def gate(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "gate.json").read_text())
    return data


def test_a_gpu_computing_wrong_rejects_exactly_its_node_naming_gpu_kernel_and_counts(tmp_path: Path) -> None:
    proc = burnin("run", "--sim", "8", "--fault", "sim05:sdc-gpu3", "--out", str(tmp_path))
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    doc = gate(tmp_path)
    assert (doc["rejected"], doc["admitted"]) == ("sim05", "sim[01-04,06-08]")
    assert doc["nodes"]["sim05"]["failed"] == ["GPU-14"] and doc["nodes"]["sim05"]["incomplete"] == []
    reason = doc["nodes"]["sim05"]["reasons"][0]
    assert reason.startswith("GPU-14 gpu3 matmul/bf16 digest ")
    assert "differs from the fleet's " in reason and "(7 of 8 GPUs of sim05, 63 of 64 in the run)" in reason
    for node, decision in doc["nodes"].items():
        if node != "sim05":
            assert decision == {"admitted": True, "failed": [], "incomplete": [], "reasons": []}, node
    from burnin.report.junit import read_cases

    props = read_cases(tmp_path / "junit.xml")["test_no_silent_data_corruption[sim05]"]
    assert props["check"] == "GPU-14" and props["verdict"] == "fail"
    assert "gpu3 matmul/bf16 digest" in props["measured"] and "most of the run's GPUs" in props["expected"]
    healthy = read_cases(tmp_path / "junit.xml")["test_no_silent_data_corruption[sim01]"]
    assert healthy["verdict"] == "pass" and "as the run's 64 GPUs on 8 nodes" in healthy["measured"]


def test_two_nodes_that_disagree_gpu_for_gpu_are_incomplete_not_failed(tmp_path: Path) -> None:
    faults = [arg for gpu in range(8) for arg in ("--fault", f"sim02:sdc-gpu{gpu}")]
    proc = burnin("run", "--sim", "2", *faults, "--out", str(tmp_path))
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    doc = gate(tmp_path)
    assert doc["admitted"] == "" and doc["rejected"] == "sim[01-02]"
    for node in ("sim01", "sim02"):
        decision = doc["nodes"][node]
        assert (decision["failed"], decision["incomplete"]) == ([], ["GPU-14"]), decision
        assert "8 x " in decision["reasons"][0] and "which GPU is wrong cannot be said" in decision["reasons"][0]


@pytest.mark.slow(minutes=2)
def test_a_gpu_that_goes_wrong_when_hot_fails_its_soak_when_it_does_not_before(tmp_path: Path) -> None:
    out = tmp_path / "soak"
    proc = burnin("soak", "--sim", "4", "--duration", "6h", "--interval", "1800", "--fault", "sim02:sdc-when-hot",
                  "--out", str(out))
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    doc = gate(out)
    assert (doc["rejected"], doc["admitted"]) == ("sim02", "sim[01,03-04]")
    sim02 = doc["nodes"]["sim02"]
    assert sim02["failed"] == ["GPU-14"] and "BRN-06" in sim02["incomplete"]
    # the first SDC round after the fault began (an hour in): the end of the first GPU stage, +01:15:00
    first_round_after = hms(GPU_STAGE_ENDS_S)
    assert HOT_AFTER_S <= GPU_STAGE_ENDS_S
    assert sim02["reasons"][0].startswith("GPU-14 gpu3 matmul/bf16 digest ")
    assert f"(7 of 8 GPUs of sim02, 31 of 32 in the run) at +{first_round_after} " in sim02["reasons"][0]
    # not before: the node suite's GPU-14 passed it when the soak began, and it soaked until then
    acceptance = json.loads((out / "acceptance" / "gate.json").read_text())
    assert acceptance["nodes"]["sim02"] == {"admitted": True, "failed": [], "incomplete": [], "reasons": []}
    lines = proc.stderr.splitlines()
    failed = [i for i, line in enumerate(lines) if line.startswith("soak FAILED sim02: GPU-14 gpu3")]
    assert len(failed) == 1 and lines[failed[0] + 1].startswith(f"soak +{first_round_after}/06:00:00")
    assert not any("failed (sim02" in line for line in lines[:failed[0]])
    verdicts = {(v["node"], v["check"]): v for v in json.loads((out / "verdicts.json").read_text())}
    for node in ("sim01", "sim03", "sim04"):
        assert verdicts[(node, "GPU-14")]["status"] == "pass", verdicts[(node, "GPU-14")]
        assert doc["nodes"][node]["admitted"]
