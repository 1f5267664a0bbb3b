"""Under real Slurm, the fabric suite drains a node and readmits it once healthy again.

The fabric phase allocates after the collector step drained the node again, so it
measures burnin-drained nodes in a reservation of its own (burnin.transport.slurm_jobs).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

BURNIN = [sys.executable, "-m", "burnin.cli.main"]


def burnin(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*BURNIN, *args], env=env, capture_output=True, text=True, timeout=240, check=False)


def scontrol(env: dict[str, str], *args: str) -> str:
    return subprocess.run(["scontrol", *args], env=env, capture_output=True, text=True, timeout=30,
                          check=True).stdout


def node_line(env: dict[str, str], node: str) -> str:
    return scontrol(env, "--oneliner", "show", "node", node).strip()


@pytest.mark.sim_slurm
def test_a_node_burnin_drained_is_readmitted_by_the_fabric_suite(
        readmit_cluster: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    state, env = readmit_cluster
    first, second = tmp_path / "first", tmp_path / "second"
    proc = burnin(env, "run", "--via", "slurm", "--nodes", "sim[01-04]", "--suite", "fabric",
                  "--gate", "slurm", "--out", str(first))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert json.loads((first / "gate.json").read_text())["rejected"] == "sim03"
    line = node_line(env, "sim03")
    assert "DRAIN" in line and "Reason=burnin: NCCL-05" in line, line

    cleared = burnin(env, "sim", "fault", "--state", str(state), "sim03", "clear")
    assert cleared.returncode == 0, cleared.stdout + cleared.stderr
    proc = burnin(env, "run", "--via", "slurm", "--nodes", "sim[01-04]", "--suite", "fabric",
                  "--gate", "slurm", "--out", str(second))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    gate = json.loads((second / "gate.json").read_text())
    assert gate["admitted"] == "sim[01-04]", gate
    decision = gate["nodes"]["sim03"]
    assert decision["failed"] == [] and decision["incomplete"] == [], decision
    fabric = json.loads((second / "fabric.json").read_text())
    assert fabric["unavailable"] is None and fabric["group_passed"], fabric
    # just resumed, slurmctld may show it idle* (IDLE+NOT_RESPONDING) for a moment (a bound, not a measurement)
    deadline = time.monotonic() + 120
    while "State=IDLE " not in (line := node_line(env, "sim03")) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "State=IDLE " in line and "DRAIN" not in line and "Reason=" not in line, line
    log = (second / "fabric-commands.log").read_text()
    assert "scontrol create reservation ReservationName=burnin-fabric-" in log
    assert "--reservation=burnin-fabric-" in log
    reservations = scontrol(env, "show", "reservation")
    assert "burnin" not in reservations, reservations
