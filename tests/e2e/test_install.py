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
    # the lab (daemons, system users) is no part of the runtime wheel
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if "lab" in n.split("/")[:2] or n.startswith("burnin_lab")], names
    assert "burnin/cli/probe_client.sh" in names  # what burnin probe --client writes out


BLOCK_LAB = """
import sys
class _NoLab:
    def find_spec(self, name, path=None, target=None):
        if name == "burnin_lab" or name.startswith("burnin_lab."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _NoLab())
from burnin.cli.main import main
raise SystemExit(main(sys.argv[1:]))
"""


def test_sim_up_without_the_lab_says_how_to_install_it(tmp_path: Path) -> None:
    for argv in (["sim", "up", "--ssh", "1", "--state", str(tmp_path / "rack")],
                 ["sim", "up", "--slurm", "1", "--state", str(tmp_path / "cluster")]):
        proc = subprocess.run([sys.executable, "-c", BLOCK_LAB, *argv], capture_output=True, text=True,
                              timeout=120, check=False)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "pip install ./lab" in proc.stderr and "Traceback" not in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "rack").exists() and not (tmp_path / "cluster").exists()


def test_the_runtime_package_never_imports_the_lab() -> None:
    sources = list((REPO / "burnin").rglob("*.py"))
    offenders = [str(p) for p in sources if "burnin_lab" in p.read_text(encoding="utf-8")
                 and p.name != "sim_cmd.py"]
    assert offenders == []
