"""Issue 6 done-when: under real Slurm, the fabric suite names sim04 and its slow HCA, and drains only it.

Since issue 9, IB-08 (ib_write_bw loopback per HCA) names the HCA on the node alone."""

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


@pytest.mark.sim_slurm
def test_slow_hca_node_is_named_and_drained_alone(fabric_cluster: tuple[Path, dict[str, str]],
                                                  tmp_path: Path) -> None:
    _, env = fabric_cluster
    proc = burnin(env, "run", "--via", "slurm", "--nodes", "sim[01-08]", "--suite", "fabric", "--localize",
                  "--gate", "slurm", "--out", str(tmp_path))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    gate = json.loads((tmp_path / "gate.json").read_text())
    assert gate["rejected"] == "sim04" and gate["admitted"] == "sim[01-03,05-08]", (
        {node: d["reasons"] for node, d in gate["nodes"].items()}, proc.stdout[-3000:], proc.stderr[-3000:])
    decision = gate["nodes"]["sim04"]
    # IB-08 names the slow HCA on the node alone; it then stays out of the multi-node runs
    assert decision["failed"] == ["IB-08"] and sorted(decision["incomplete"]) == ["NCCL-03", "NCCL-04"]
    assert any("mlx5_2" in reason for reason in decision["reasons"] if reason.startswith("IB-08"))
    log = (tmp_path / "fabric-commands.log").read_text()
    assert "srun --jobid=" in log and "--mpi=pmi2" in log and "ib_write_bw -d mlx5_2" in log
    fabric = json.loads((tmp_path / "fabric.json").read_text())
    assert list(fabric["excluded"]) == ["sim04"] and fabric["group_passed"]
    nodes = subprocess.run(["scontrol", "--oneliner", "show", "node", "sim[01-08]"], env=env, capture_output=True,
                           text=True, timeout=30, check=True).stdout.splitlines()
    drained = [line.split()[0].removeprefix("NodeName=") for line in nodes if "DRAIN" in line]
    assert drained == ["sim04"]
    reason = next(line for line in nodes if line.startswith("NodeName=sim04"))
    assert "Reason=burnin: IB-08" in reason and "mlx5_2" in reason


@pytest.mark.sim_slurm
def test_the_healthy_nodes_pass_the_fabric_suite(fabric_cluster: tuple[Path, dict[str, str]],
                                                 tmp_path: Path) -> None:
    _, env = fabric_cluster
    proc = burnin(env, "run", "--via", "slurm", "--nodes", "sim[01-03,05-08]", "--suite", "fabric",
                  "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads((tmp_path / "fabric.json").read_text())
    assert doc["launcher"] == "slurm" and doc["group_passed"] and doc["localization"] is None


def _running(fragment: str) -> bool:
    """Some process on this machine runs a command line holding ``fragment``."""
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and fragment in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode():
                return True
        except OSError:
            continue
    return False


@pytest.mark.sim_slurm
def test_an_allocation_cancelled_during_the_fabric_phase_drains_no_node_for_it(
        fabric_cluster: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    """An operator's scancel of the fabric phase's allocation (a preemption does the same) while the phase runs
    (sim02's all-reduce hangs, so it is still running): every node's fabric checks are incomplete, and not for
    anything of theirs, so --gate slurm drains none of them and one line says why; gate.json still admits none
    of them (exit 1)."""
    from burnin_lab.common import inject_fault

    state, env = fabric_cluster
    nodes = ["sim01", "sim02", "sim03", "sim05"]
    inject_fault(state, "sim02", "nccl-hang")  # the all-reduce with sim02 runs until the job is cancelled
    proc = subprocess.Popen([*BURNIN, "run", "--via", "slurm", "--nodes", "sim[01-03,05]", "--suite", "fabric",
                             "--gate", "slurm", "--out", str(tmp_path)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 180
        while not _running("all_reduce_perf"):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the fabric phase never started its all-reduce"
            time.sleep(0.05)
        jobs = subprocess.run(["squeue", "--noheader", "--format=%i %j"], env=env, capture_output=True, text=True,
                              timeout=30, check=True).stdout.split("\n")
        fabric = [line.split()[0] for line in jobs if "burnin-fabric-" in line]
        assert len(fabric) == 1, jobs
        subprocess.run(["scancel", fabric[0]], env=env, timeout=30, check=True)
        stdout, err = proc.communicate(timeout=240)
    finally:
        inject_fault(state, "sim02", "clear")
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, stdout + err
    # Slurm says COMPLETING until the cancelled job's processes are gone, CANCELLED after: asked at release, either
    ended = next((f"job {fabric[0]} {state} during the fabric phase" for state in ("CANCELLED", "COMPLETING")
                  if f"job {fabric[0]} {state} during" in stdout), None)
    assert ended is not None, stdout
    said = [line for line in stdout.splitlines() if line.startswith("not measured: ")]
    assert said == [f"not measured: sim[01-03,05]: the run's allocation ended under it ({ended}); "
                    "the gate left them as they are"], stdout
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["not_measured"] == dict.fromkeys(nodes, ended)
    gate = json.loads((tmp_path / "gate.json").read_text())
    for node in nodes:
        decision = gate["nodes"][node]
        assert not decision["admitted"] and not decision["failed"] and decision["incomplete"], decision
    lines = subprocess.run(["scontrol", "--oneliner", "show", "node", "sim[01-03,05]"], env=env, capture_output=True,
                           text=True, timeout=30, check=True).stdout.splitlines()
    assert not [line for line in lines if "DRAIN" in line], lines
