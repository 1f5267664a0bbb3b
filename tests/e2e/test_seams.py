"""The seams hold: real-node runs load no simulator code, and nothing outside the dispatchers asks their type."""

from __future__ import annotations

import ast
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

DRIVER = """
import sys
from burnin.cli.main import main
code = main(sys.argv[1:])
print("EXIT", code)
print("SIM", sorted(m for m in sys.modules if m == "burnin.sim" or m.startswith("burnin.sim.")))
"""


def _run(args: list[str], env: dict[str, str] | None = None) -> tuple[int, list[str], str]:
    proc = subprocess.run([sys.executable, "-c", DRIVER, *args], capture_output=True, text=True, timeout=300,
                          check=False, env={**os.environ, **(env or {})})
    exit_line = next((line for line in proc.stdout.splitlines() if line.startswith("EXIT ")), None)
    sim_line = next((line for line in proc.stdout.splitlines() if line.startswith("SIM ")), None)
    assert exit_line and sim_line, proc.stdout + proc.stderr
    return int(exit_line.split()[1]), ast.literal_eval(sim_line[4:]), proc.stdout + proc.stderr


@pytest.mark.parametrize("suites", [["node"], ["fabric"], ["node", "fabric", "megatron"]])
def test_a_run_over_ssh_loads_no_simulator_module(tmp_path: Path, suites: list[str]) -> None:
    config = tmp_path / "ssh_config"
    config.write_text("Host n1 n2\n  HostName 127.0.0.1\n  Port 1\n", encoding="utf-8")  # refused at once
    suite_args = [a for s in suites for a in ("--suite", s)]
    code, loaded, output = _run(["run", "--via", "ssh", "--hosts", "n[1-2]", "--ssh-config", str(config),
                                 *suite_args, "--timeout", "10", "--out", str(tmp_path / "run")])
    assert code == 1, output  # unreachable nodes are incomplete, never admitted
    assert loaded == [], output


def test_a_run_through_slurm_loads_no_simulator_module(tmp_path: Path) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    for tool in ("srun", "salloc", "scontrol", "scancel", "sbcast"):
        path = fake / tool
        path.write_text("#!/bin/sh\necho \"$0: no Slurm here\" >&2\nexit 1\n", encoding="utf-8")
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    env = {"PATH": f"{fake}{os.pathsep}{os.environ.get('PATH', '')}"}
    for var in ("SLURM_JOB_ID", "SLURM_JOB_NODELIST"):
        env[var] = ""
    code, loaded, output = _run(["run", "--via", "slurm", "--nodes", "n[1-2]", "--suite", "node", "--suite",
                                 "fabric", "--suite", "megatron", "--timeout", "10", "--out", str(tmp_path / "run")],
                                env=env)
    assert code == 1, output
    assert loaded == [], output


def test_a_simulated_run_does_load_it(tmp_path: Path) -> None:
    """The check above can fail: the same driver sees the simulator when it is used."""
    code, loaded, output = _run(["run", "--sim", "1", "--out", str(tmp_path / "run")])
    assert code == 0, output
    assert "burnin.sim" in loaded


def test_no_isinstance_on_dispatcher_types_outside_the_dispatchers() -> None:
    asked = re.compile(r"isinstance\([^)]*\b(SimDispatcher|SshDispatcher|SlurmDispatcher|\w+Dispatcher)\b")
    offenders = [f"{path.relative_to(REPO)}:{number}: {line.strip()}"
                 for path in sorted((REPO / "burnin").rglob("*.py")) if path.parent.name != "dispatch"
                 for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                 if asked.search(line)]
    assert offenders == []
