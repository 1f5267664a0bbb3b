"""``burnin sweep --fabric-group``: the fabric suite's multi-node checks in one preemptible job over admitted nodes
idle together, against real slurmctld/slurmd; only the node a check names is drained."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from simsweep_support import WAIT_S, SweepLab, sweep_doc

pytestmark = pytest.mark.sim_slurm

GROUP = ("sim01", "sim02", "sim03", "sim04")


def _finish(sweep: object) -> str:
    import subprocess

    assert isinstance(sweep, subprocess.Popen)
    try:
        said, _ = sweep.communicate(timeout=WAIT_S + 300)
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
    return str(said)


def _fabric(out: Path) -> dict[str, dict[str, object]]:
    return {node: doc["fabric"] for node, doc in sweep_doc(out).items()}  # type: ignore[misc]


def test_a_group_names_the_node_only_a_multi_node_run_sees(sweep_lab: SweepLab, tmp_path: Path) -> None:
    lab = sweep_lab
    lab.reset()
    out = tmp_path / "sweep"
    lab.fault("sim03", "rail-degraded")  # its leaf switch port: invisible to the node suite and to IB-08
    sweep = lab.sweep(out, "--for", "600", "--max-share", "1", "--timeout", "30", "--gate", "slurm",
                      "--fabric-group", "4", nodes="sim[01-04]")
    said = _finish(sweep)  # every node settled: it ends before the window
    assert sweep.returncode == 1, said
    nodes = sweep_doc(out)
    assert {n: d["status"] for n, d in nodes.items()} == {
        "sim01": "admitted", "sim02": "admitted", "sim03": "rejected", "sim04": "admitted"}, said
    fabric = _fabric(out)
    assert {n: f["status"] for n, f in fabric.items()} == {
        "sim01": "passed", "sim02": "passed", "sim03": "failed", "sim04": "passed"}, said
    for node in GROUP:  # the node suite's own job first, then one group job over all four
        assert [j["end"] for j in nodes[node]["jobs"]] == ["tested"], nodes[node]  # type: ignore[index]
        assert [g["end"] for g in fabric[node]["groups"]] == ["tested"], fabric[node]  # type: ignore[attr-defined]
    group = Path(str(fabric["sim03"]["results"]))
    gate = json.loads((group / "gate.json").read_text())["nodes"]
    assert "NCCL-03" in gate["sim03"]["failed"] and "NCCL-04" in gate["sim03"]["failed"], gate["sim03"]
    assert all(gate[n]["admitted"] for n in ("sim01", "sim02", "sim04")), gate
    state, reason = lab.node_reason("sim03")
    assert "DRAIN" in state and reason.startswith("burnin: NCCL-04,NCCL-03 sim03 slow HCA mlx5_2"), (state, reason)
    for node in ("sim01", "sim02", "sim04"):  # its innocent peers: never drained
        assert lab.node_reason(node)[0] == "IDLE"
    allocations = [line for line in (out / "slurm-commands.log").read_text().splitlines() if "$ salloc" in line]
    grouped = [a for a in allocations if "--nodes=4 " in a]
    assert len(grouped) == 1 and "--partition=sweep" in grouped[0] and "--nice=2147483645" in grouped[0], allocations
    assert "srun --jobid=" in (group / "fabric-commands.log").read_text()
    assert "fabric:   passed sim[01-02,04] (3); failed sim03 (1)" in said
    assert not lab.sweep_jobs()
