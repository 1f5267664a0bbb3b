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
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from burnin_lab import slurm as lab

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


def _processes_with(needle: bytes) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "stat").read_text().rpartition(")")[2].split()[0] == "Z":
                continue
            if needle in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _left_running(needle: bytes) -> list[str]:
    """The processes carrying ``needle`` that are still there once those already stopping had time to end:
    a client command the interrupted ``sim up`` killed as it exited (its ``sinfo``) can be seen alive for a
    moment on a loaded machine. A process that stays (a daemon nobody stopped) is still there after the bound."""
    deadline = time.monotonic() + 60  # a failure limit, not a measurement
    left = _processes_with(needle)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = _processes_with(needle)
    described = []
    for pid in left:
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        described.append(f"{pid}: {command}")
    return described


def test_sigterm_while_sim_up_waits_for_the_nodes_stops_the_cluster() -> None:
    _require_slurm()
    state = Path(tempfile.mkdtemp(prefix="burnin-slurm-sigterm-"))
    conf = f"SLURM_CONF={state / 'slurm.conf'}".encode()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "burnin.cli.main", "sim", "up", "--slurm", "2",
                                 "--state", str(state)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 300
        while not (state / "lab.json").exists():  # the supervisor is recorded: the daemons are starting
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "sim up never started the supervisor"
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 3, err
        assert err.strip().splitlines() == ["burnin sim: interrupted (SIGTERM)"], err
        assert _left_running(conf) == []  # supervisor, munged, slurmctld, slurmd: all stopped
    finally:
        if (state / "lab.json").exists():
            lab.down(state)
        shutil.rmtree(state, ignore_errors=True)


def test_sim_down_stops_a_running_job_and_everything_it_started() -> None:
    """A job still running at `sim down` (its slurmstepd, batch script, srun, task) goes with the cluster."""
    _require_slurm()
    state = Path(tempfile.mkdtemp(prefix="burnin-slurm-jobleft-"))
    conf = f"SLURM_CONF={state / 'slurm.conf'}".encode()
    try:
        up = subprocess.run([sys.executable, "-m", "burnin.cli.main", "sim", "up", "--slurm", "2", "--state",
                             str(state)], capture_output=True, text=True, timeout=300, check=False)
        assert up.returncode == 0, up.stderr
        env = {**os.environ, **lab.client_env(state)}
        submitted = subprocess.run(["sbatch", "--parsable", "--nodes=2", f"--output={state / 'job.out'}",
                                    "--wrap", "srun sleep 3600"], env=env,
                                   capture_output=True, text=True, timeout=60, check=True)
        job = submitted.stdout.strip().split(";")[0]
        deadline = time.monotonic() + 180  # a bound, not a measurement: a loaded machine schedules late
        while "RUNNING" not in subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], env=env, capture_output=True,
                                              text=True, timeout=30, check=False).stdout:
            assert time.monotonic() < deadline, "the job never ran"
            time.sleep(0.2)
        running = _processes_with(conf)
        assert running, "no process of the running job carries SLURM_CONF"
        down = subprocess.run([sys.executable, "-m", "burnin.cli.main", "sim", "down", "--state", str(state)],
                              capture_output=True, text=True, timeout=300, check=False)
        assert down.returncode == 0, down.stderr
        assert _left_running(conf) == [], "the job's processes outlived sim down"
    finally:
        if (state / "lab.json").exists():
            lab.down(state)
        shutil.rmtree(state, ignore_errors=True)
