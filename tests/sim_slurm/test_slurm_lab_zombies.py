"""`burnin sim up --slurm` / `sim down` from the CLI leave no zombie, even where PID 1 never reaps.

See tests/lab_zombies_harness.py: once `sim down` has returned, only the lab's
supervisor (the one process `sim up` left in its place) may wait to be reaped,
having exited cleanly; munged, slurmctld, every slurmd and whatever they forked
were reaped by it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from burnin.lab import slurm as lab

pytestmark = pytest.mark.sim_slurm

HARNESS = Path(__file__).resolve().parents[1] / "lab_zombies_harness.py"


def _require_slurm() -> None:
    missing = lab.missing_commands()
    if not missing and os.geteuid() == 0:
        return
    message = f"needs slurm-wlm and munge (missing: {', '.join(missing)})" if missing else "needs root"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def test_sim_up_and_down_of_a_slurm_rack_leave_no_zombie() -> None:
    _require_slurm()
    state = Path(tempfile.mkdtemp(prefix="burnin-slurm-zombies-"))
    try:
        proc = subprocess.run([sys.executable, str(HARNESS), str(state), "slurm"], capture_output=True,
                              text=True, timeout=600, check=False)
        assert proc.returncode == 0, proc.stderr
        report = json.loads(proc.stdout)
        assert report["up"][0] == 0, report["up"][1]
        assert report["down"][0] == 0, report["down"][1]
        left = {int(pid): info for pid, info in report["left"].items()}
        running = {pid: info for pid, info in left.items() if info["state"] != "Z"}
        assert running == {}, f"still running after sim down: {running}"
        supervisor = report["lab"].get("supervisor")
        assert set(left) <= {supervisor}, f"zombies besides the supervisor: {left}"
        if supervisor in left:
            assert left[supervisor]["exit"] == 0
    finally:
        if (state / "lab.json").exists():
            lab.down(state)
        shutil.rmtree(state, ignore_errors=True)
