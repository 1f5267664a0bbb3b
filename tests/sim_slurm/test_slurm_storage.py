"""The storage suite through Slurm: each node's writes and pings are srun steps in one allocation."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from simslurm_support import SlurmLab

pytestmark = pytest.mark.sim_slurm


def test_storage_suite_over_slurm_rejects_only_the_node_whose_writes_rode_the_compute_fabric(
        slurm_lab: SlurmLab, tmp_path: Path) -> None:
    slurm_lab.reset()
    config = tmp_path / "storage.yaml"
    config.write_text("size_mib: 8\n")
    slurm_lab.fault("sim04", "storage-traffic-on-ib")  # the probe does not see it: only live traffic does
    try:
        out = tmp_path / "out"
        proc = slurm_lab.run(out, "--suite", "storage", "--storage-config", str(config), nodes="sim[01,03-04]")
        assert proc.returncode == 1, proc.stdout + proc.stderr
        gate = json.loads((out / "gate.json").read_text())
        assert gate["rejected"] == "sim04" and gate["nodes"]["sim04"]["failed"] == ["STO-03"], gate
        assert gate["nodes"]["sim01"]["admitted"] and gate["nodes"]["sim03"]["admitted"], gate
        verdicts = json.loads((out / "verdicts.json").read_text())
        (sto03,) = [v for v in verdicts if v["node"] == "sim04" and v["check"] == "STO-03"]
        assert sto03["reason"].startswith(f"STO-03 mlx5_2 compute HCA moved {2 * 2 * 8 << 20} bytes")
        measured = [v for v in verdicts if v["check"] in ("STO-03", "STO-04") and v["node"] != "sim04"]
        assert len(measured) == 4 and all(v["status"] == "pass" for v in measured), measured
        # the allocation was released: no burnin job is left in the queue
        queue = subprocess.run(["squeue", "-h", "-o", "%j %T"], env=slurm_lab.env, capture_output=True, text=True,
                               timeout=30, check=True).stdout
        assert "burnin-storage" not in queue, queue
    finally:
        slurm_lab.fault("sim04", "clear")
