"""``burnin soak --via ssh`` and ``--via slurm`` from the command line: real-node soaks load no simulator code.

- over SSH, nodes that refuse the connection are soaked for the duration, never sampled, and rejected
  as incomplete (exit 1), never admitted;
- through Slurm, an allocation Slurm refuses leaves the node suite run first without a node to judge:
  nobody is soaked, the soak asks for no allocation of its own, and every node is rejected as incomplete.
"""

from __future__ import annotations

import ast
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

DRIVER = """
import sys
from burnin.cli.main import main
code = main(sys.argv[1:])
print("EXIT", code)
print("SIM", sorted(m for m in sys.modules if m == "burnin.sim" or m.startswith("burnin.sim.")))
"""


def _run(args: list[str], env: dict[str, str] | None = None) -> tuple[int, list[str], str, str]:
    proc = subprocess.run([sys.executable, "-c", DRIVER, *args], capture_output=True, text=True, timeout=300,
                          check=False, env={**os.environ, **(env or {})})
    exit_line = next((line for line in proc.stdout.splitlines() if line.startswith("EXIT ")), None)
    sim_line = next((line for line in proc.stdout.splitlines() if line.startswith("SIM ")), None)
    assert exit_line and sim_line, proc.stdout + proc.stderr
    return int(exit_line.split()[1]), ast.literal_eval(sim_line[4:]), proc.stdout, proc.stderr


def test_a_soak_over_ssh_of_unreachable_nodes_rejects_them_and_loads_no_simulator(tmp_path: Path) -> None:
    config = tmp_path / "ssh_config"
    config.write_text("Host n1 n2\n  HostName 127.0.0.1\n  Port 1\n", encoding="utf-8")  # refused at once
    out = tmp_path / "soak"
    code, loaded, stdout, stderr = _run(["soak", "--via", "ssh", "--hosts", "n[1-2]", "--ssh-config", str(config),
                                         "--duration", "3s", "--interval", "1", "--out", str(out)])
    assert code == 1, stdout + stderr
    assert loaded == [], stdout
    gate = json.loads((out / "gate.json").read_text())
    assert (gate["rejected"], gate["admitted"]) == ("n[1-2]", ""), gate
    assert "BRN-07" in gate["nodes"]["n1"]["incomplete"] and gate["nodes"]["n1"]["failed"] == []


def test_a_soak_through_slurm_that_gets_no_allocation_soaks_nobody_and_loads_no_simulator(tmp_path: Path) -> None:
    """The node suite runs first: with no allocation it reaches no node, so no node is soaked and the soak
    asks Slurm for no allocation of its own; every node is rejected as incomplete, naming salloc's answer."""
    fake = tmp_path / "bin"
    fake.mkdir()
    for tool in ("srun", "salloc", "scontrol", "scancel", "sbcast"):
        path = fake / tool
        path.write_text("#!/bin/sh\necho \"$0 $*\" >> \"$(dirname \"$0\")/calls\"\n"
                        "echo \"$0: no Slurm here\" >&2\nexit 1\n", encoding="utf-8")
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    env = {"PATH": f"{fake}{os.pathsep}{os.environ.get('PATH', '')}", "SLURM_JOB_ID": "", "SLURM_JOB_NODELIST": ""}
    out = tmp_path / "soak"
    args = ["soak", "--via", "slurm", "--nodes", "n[1-2]", "--duration", "1h", "--out", str(out)]
    code, loaded, stdout, stderr = _run(args, env)
    assert code == 1, stdout + stderr
    assert loaded == [], stdout
    assert [line for line in stderr.splitlines() if not line.startswith("soak ")] == [], stderr
    gate = json.loads((out / "gate.json").read_text())
    assert (gate["rejected"], gate["admitted"]) == ("n[1-2]", ""), gate
    assert f"no Slurm allocation: salloc exited 1: {fake}/salloc: no Slurm here" in gate["nodes"]["n1"]["reasons"][0]
    assert "BRN-06" in gate["nodes"]["n1"]["incomplete"] and not gate["nodes"]["n1"]["failed"]
    assert "-J burnin-soak-" not in (fake / "calls").read_text()  # the soak itself asked for nothing
