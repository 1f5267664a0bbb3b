"""A plain (non-editable) install carries the suites, topologies and NVML source."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_wheel_install_runs_the_simulated_rack(tmp_path: Path) -> None:
    wheels, target = tmp_path / "wheels", tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "-q", "-w", str(wheels)],
                   check=True, capture_output=True, timeout=300)
    wheel = next(wheels.glob("burnin-*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
                   check=True, capture_output=True, timeout=300)
    env = {**os.environ, "PYTHONPATH": str(target)}
    where = subprocess.run([sys.executable, "-c", "import burnin, burnin.resources as r; "
                            "print(burnin.__file__); print(r.suites_dir()); print(r.topologies_dir())"],
                           env=env, cwd=tmp_path, capture_output=True, text=True, check=True, timeout=60)
    lines = where.stdout.splitlines()
    assert all(line.startswith(str(target)) for line in lines), lines  # not the source checkout
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "burnin.cli.main", "run", "--sim", "3", "--fault", "sim02:pcie-x8",
                           "--out", str(out)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    gate = json.loads((out / "gate.json").read_text())
    assert gate["rejected"] == "sim02" and gate["nodes"]["sim02"]["failed"] == ["GPU-08"]
