"""``burnin run --gate slurm`` resumes a node only for the checks this run judged and passed (issue 19 case 4).

The run's decisions carry the checks each node passed (from verdicts.json, burnin/session.py): a node that
burnin drained for IB-01 is resumed by a node-suite run that found IB-01 passing; one drained for NCCL-01
(the fabric suite, which this run did not run) stays drained, with a note naming NCCL-01.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCONTROL = """#!/bin/sh
if [ "$1" = "--oneliner" ] && [ "$2" = "show" ]; then
  echo "NodeName=sim01 State=IDLE+DRAIN Reason=burnin: NCCL-01 all_reduce 380 GB/s [root@2026-01-01T00:00:00]"
  echo "NodeName=sim02 State=IDLE+DRAIN Reason=burnin: IB-01 mlx5_2 1: DOWN [root@2026-01-01T00:00:00]"
  echo "NodeName=sim03 State=IDLE+DRAIN Reason=burnin: IB-01,GPU-1... [root@2026-01-01T00:00:00]"
  exit 0
fi
echo "$*" >> "$SCONTROL_LOG"
"""
SCONTROL_IDLE = """#!/bin/sh
if [ "$1" = "--oneliner" ] && [ "$2" = "show" ]; then
  for n in sim01 sim02 sim03; do echo "NodeName=$n State=IDLE"; done
  exit 0
fi
echo "$*" >> "$SCONTROL_LOG"
"""


def test_a_run_resumes_a_node_only_for_checks_it_judged_and_passed(tmp_path: Path) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "scontrol").write_text(SCONTROL)
    (fake / "scontrol").chmod(0o755)
    log = tmp_path / "scontrol.log"
    env = {**os.environ, "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}", "SCONTROL_LOG": str(log)}
    proc = subprocess.run([sys.executable, "-m", "burnin.cli.main", "run", "--sim", "3", "--gate", "slurm",
                           "--out", str(tmp_path / "run")], capture_output=True, text=True, timeout=600, check=False,
                          env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert log.read_text().splitlines() == ["update NodeName=sim02 State=RESUME"]
    assert "sim01: admitted, but drained for NCCL-01, which this run did not judge and pass" in proc.stdout
    assert "sim03: admitted, but its drain reason names no check ids burnin can read" in proc.stdout


def test_the_gate_acts_before_the_report_and_a_report_that_cannot_be_written_loses_nothing(tmp_path: Path) -> None:
    """A report.html that cannot be written (here a folder of that name) is one line on stderr: the gate has
    already drained the faulted node, and gate.json, junit.xml and the exit code stand."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "scontrol").write_text(SCONTROL_IDLE)
    (fake / "scontrol").chmod(0o755)
    log = tmp_path / "scontrol.log"
    out = tmp_path / "run"
    (out / "report.html").mkdir(parents=True)
    env = {**os.environ, "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}", "SCONTROL_LOG": str(log)}
    proc = subprocess.run([sys.executable, "-m", "burnin.cli.main", "run", "--sim", "3", "--gate", "slurm",
                           "--fault", "sim03:nvlink-down", "--out", str(out)], capture_output=True, text=True,
                          timeout=600, check=False, env=env)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert f"burnin run: report.html not written: Is a directory ({out / 'report.html'})" in proc.stderr, proc.stderr
    drains = [line for line in log.read_text().splitlines() if "NodeName=sim03" in line]
    assert len(drains) == 1 and "State=DRAIN" in drains[0] and "GPU-10" in drains[0], log.read_text()
    assert (out / "gate.json").is_file() and (out / "junit.xml").is_file()
    assert not [p.name for p in out.iterdir() if p.name.startswith(".report.html.")]  # no half page left
