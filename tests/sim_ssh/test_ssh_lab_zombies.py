"""`burnin sim up --ssh` / `sim down` from the CLI leave no zombie, even where PID 1 never reaps.

`sim up` exits while the rack runs on, so what it started is re-parented to the
nearest reaper. tests/lab_zombies_harness.py makes itself that reaper and, like
an init that never reaps, collects nothing until `sim down` has returned. Then
only the one process `sim up` left in its place (the supervisor) may be
waiting for it, having exited cleanly; every sshd must already have been
reaped by that supervisor, and nothing may still run.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sshrack import make_state_dir, require_sim_ssh

pytestmark = pytest.mark.sim_ssh

HARNESS = Path(__file__).resolve().parents[1] / "lab_zombies_harness.py"


def test_sim_up_and_down_over_ssh_leave_no_zombie() -> None:
    require_sim_ssh()
    state = make_state_dir("burnin-sim-ssh-zombies-")
    try:
        proc = subprocess.run([sys.executable, str(HARNESS), str(state), "ssh"], capture_output=True, text=True,
                              timeout=300, check=False)
        assert proc.returncode == 0, proc.stderr
        report = json.loads(proc.stdout)
        assert report["up"][0] == 0, report["up"][1]
        assert report["down"][0] == 0, report["down"][1]
        left = {int(pid): info for pid, info in report["left"].items()}
        running = {pid: info for pid, info in left.items() if info["state"] != "Z"}
        assert running == {}, f"still running after sim down: {running}"
        supervisor = report["lab"].get("supervisor")
        assert set(left) <= {supervisor}, f"zombies besides the supervisor: {left}"
        assert supervisor is not None
        if supervisor in left:
            assert left[supervisor]["exit"] == 0  # it stopped its sshd processes and exited cleanly
    finally:
        if (state / "lab.json").exists():
            subprocess.run([sys.executable, "-m", "burnin.cli.main", "sim", "down", "--state", str(state)],
                           capture_output=True, timeout=120, check=False)
        shutil.rmtree(state, ignore_errors=True)
