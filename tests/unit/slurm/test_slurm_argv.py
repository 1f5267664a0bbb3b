"""Slurm command lines burnin builds: one allocation, one step, bounded waits, no shell."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from burnin.gate.slurm import BURNIN_PREFIX, burnin_reason, drain_argv, resume_argv
from burnin.launch.slurm import srun_argv
from burnin.transport.base import CommandResult
from burnin.transport.slurm import (
    collect_command,
    create_reservation_argv,
    granted_job_id,
    minutes,
    salloc_argv,
    sbcast_argv,
    scancel_argv,
    show_node_argv,
    split_step,
)

NODES = ["sim01", "sim02", "sim03", "sim04"]


def test_salloc_asks_for_exactly_the_nodes_and_bounds_the_wait() -> None:
    argv = salloc_argv(NODES, job_name="burnin-x", time_limit_s=200, immediate_s=30.2,
                       partition="gpu", reservation="burnin-week")
    assert argv[0] == "salloc" and "--no-shell" in argv
    assert "--nodes=4" in argv and "--nodelist=sim[01-04]" in argv
    assert "--ntasks-per-node=1" in argv and "--no-kill" in argv
    assert "--immediate=31" in argv and "--time=4" in argv
    assert "--partition=gpu" in argv and "--reservation=burnin-week" in argv
    plain = salloc_argv(["a1"], job_name="j", time_limit_s=1, immediate_s=0)
    assert not any(a.startswith(("--partition", "--reservation")) for a in plain)
    assert "--immediate=1" in plain and "--time=1" in plain


def test_one_step_for_all_nodes_that_survives_a_bad_task() -> None:
    argv = srun_argv("42", NODES, ["true"], time_limit_s=90, job_name="burnin-x")
    assert argv[0] == "srun" and "--jobid=42" in argv
    assert "--nodes=4" in argv and "--ntasks=4" in argv and "--ntasks-per-node=1" in argv
    assert "--nodelist=sim[01-04]" in argv and "--kill-on-bad-exit=0" in argv
    assert "--label" in argv and argv[-1] == "true"
    assert "--label" not in srun_argv("42", NODES, ["rm", "-f", "x"], time_limit_s=1, job_name="j",
                                      label=False)


def test_sbcast_scancel_and_scontrol_argv() -> None:
    assert sbcast_argv("7", "/src/c.pyz", "/tmp/c.pyz", timeout_s=29.5) == [
        "sbcast", "--jobid=7", "--force", "--timeout=30", "/src/c.pyz", "/tmp/c.pyz"]
    assert scancel_argv("7") == ["scancel", "7"]
    assert scancel_argv(job_name="burnin-x") == ["scancel", "--name=burnin-x"]
    with pytest.raises(ValueError):
        scancel_argv()
    assert show_node_argv("sim[01-02]") == ["scontrol", "--oneliner", "show", "node", "sim[01-02]"]
    reservation = create_reservation_argv("burnin-recheck-1", ["sim02", "sim03"], "root")
    assert "Nodes=sim[02-03]" in reservation and "Flags=MAINT,IGNORE_JOBS" in reservation
    assert "Users=root" in reservation and "StartTime=now" in reservation


def test_minutes_round_up() -> None:
    assert [minutes(s) for s in (0, 1, 60, 61, 3600)] == [1, 1, 1, 2, 60]


def test_granted_job_id() -> None:
    assert granted_job_id("salloc: Pending job allocation 12\nsalloc: Granted job allocation 12\n") == "12"
    assert granted_job_id("salloc: error: Job submit/allocate failed: Requested node config") is None


def test_drain_reason_always_starts_with_burnin_and_is_one_line() -> None:
    argv = drain_argv("sim02", "IB-01 mlx5_1\nport 1: Down")
    assert argv[:4] == ["scontrol", "update", "NodeName=sim02", "State=DRAIN"]
    assert argv[4] == "Reason=burnin: IB-01 mlx5_1 port 1: Down"
    assert drain_argv("sim02", "burnin: GPU-10 x")[4] == "Reason=burnin: GPU-10 x"
    assert resume_argv("sim[01-02]") == ["scontrol", "update", "NodeName=sim[01-02]", "State=RESUME"]
    long = burnin_reason("X-01 " + "y" * 500)
    assert long.startswith(BURNIN_PREFIX) and len(long) == 200 and long.endswith("...")


def _fake_collector(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "collector.py"
    path.write_text(body, encoding="utf-8")
    return path


def _python3_shim(tmp_path: Path) -> dict[str, str]:
    shim_dir = tmp_path / "bin"
    shim_dir.mkdir()
    shim = shim_dir / "python3"
    shim.write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n", encoding="utf-8")
    shim.chmod(0o755)
    return {"PATH": f"{shim_dir}{os.pathsep}{os.environ.get('PATH', '')}"}


@pytest.mark.proc
def test_task_script_frames_the_collector_output(tmp_path: Path) -> None:
    collector = _fake_collector(tmp_path, "import json, sys\n"
                                "print(json.dumps({'sources': {}, 'argv': sys.argv[1:]}))\n")
    argv = collect_command(str(collector), ["--sources", "all"], 10)
    env = dict(os.environ, SLURMD_NODENAME="sim07", **_python3_shim(tmp_path))
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    # Pretend srun labelled it as task 0, then split it back.
    labelled = "".join(f"0: {line}\n" for line in done.stdout.splitlines())
    step = CommandResult("slurm", ("srun",), 0, labelled, "", 0.1)
    result = split_step(step, ["sim07"], node_timeout_s=10)["sim07"]
    assert result.ok
    assert json.loads(result.stdout) == {"sources": {}, "argv": ["--sources", "all"]}


@pytest.mark.proc
def test_task_script_reports_a_hung_collector_as_timed_out(tmp_path: Path) -> None:
    collector = _fake_collector(tmp_path, "import time\ntime.sleep(60)\n")
    argv = collect_command(str(collector), [], 1)
    env = dict(os.environ, SLURMD_NODENAME="sim07", **_python3_shim(tmp_path))
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30, check=False)
    labelled = "".join(f"0: {line}\n" for line in done.stdout.splitlines())
    step = CommandResult("slurm", ("srun",), done.returncode, labelled, "", 1.2)
    result = split_step(step, ["sim07"], node_timeout_s=1)["sim07"]
    assert result.timed_out and result.exit_status == 124
    assert result.error and "timed out on sim07" in result.error
