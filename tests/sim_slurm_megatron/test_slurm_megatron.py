"""Issue 13 done-when: under real Slurm, `--suite megatron` launches through srun and gates the nodes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BURNIN = [sys.executable, "-m", "burnin.cli.main"]


def burnin(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*BURNIN, *args], env=env, capture_output=True, text=True, timeout=300, check=False)


def load(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return document


@pytest.mark.sim_slurm
def test_megatron_runs_through_srun_and_the_gate_drains_the_straggler(
        megatron_cluster: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    _, env = megatron_cluster
    proc = burnin(env, "run", "--via", "slurm", "--nodes", "sim[01-04]", "--suite", "megatron", "--gate", "slurm",
                  "--out", str(tmp_path))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    gate = load(tmp_path / "gate.json")
    assert gate["rejected"] == "sim03" and gate["admitted"] == "sim[01-02,04]", gate
    assert gate["nodes"]["sim03"]["failed"] == ["MEG-04"] and not gate["nodes"]["sim03"]["incomplete"]
    facts = load(tmp_path / "facts" / "sim01.json")
    assert facts["megatron"]["single"]["form"] == "srun" and facts["placement"]["binding"] == "slurm"
    assert facts["megatron"]["multi"]["run"]["nodes"] == ["sim01", "sim02", "sim04"]
    log = (tmp_path / "megatron-commands.log").read_text(encoding="utf-8")
    assert "salloc --no-shell --no-kill --exclusive --nodes=4" in log
    assert "srun --jobid=" in log and "--cpu-bind=verbose,ldoms" in log and "scancel " in log
    nodes = subprocess.run(["scontrol", "--oneliner", "show", "node", "sim[01-04]"], env=env, capture_output=True,
                           text=True, timeout=30, check=True).stdout.splitlines()
    drained = [line.split()[0].removeprefix("NodeName=") for line in nodes if "DRAIN" in line]
    assert drained == ["sim03"]
    assert "Reason=burnin: MEG-04" in next(line for line in nodes if line.startswith("NodeName=sim03"))


@pytest.mark.sim_slurm
def test_dry_run_shows_the_srun_commands_and_allocates_nothing(megatron_cluster: tuple[Path, dict[str, str]],
                                                               tmp_path: Path) -> None:
    _, env = megatron_cluster
    proc = burnin(env, "run", "--via", "slurm", "--nodes", "sim[01-02]", "--suite", "megatron", "--dry-run",
                  "--out", str(tmp_path))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    commands = [line for line in proc.stdout.splitlines() if line.startswith("srun ")]
    assert len(commands) == 5  # a probe and a single-node run per node, one multi-node run
    assert all("--cpu-bind=verbose,ldoms" in line and "--label" in line for line in commands)
    assert not (tmp_path / "megatron").exists()
    assert not (tmp_path / "megatron-commands.log").exists()  # no allocation, no step: nothing ran
