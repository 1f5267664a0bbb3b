"""SIGTERM (a cancelled job, `timeout`) during `burnin run --via slurm`: exit 3, one line, nothing left.

The run holds an allocation while its collector step runs. Interrupted, it
must stop srun, release the allocation (no job left in the queue) and leave
every node as it found it. sim02's collector hangs, so the step runs until the
signal comes (a healthy step may be over between two looks at /proc).
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
from simslurm_support import BURNIN, WAIT_S, SlurmLab

from burnin.nodes import expand

pytestmark = pytest.mark.sim_slurm


def _children(parent: int) -> dict[int, str]:
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()
        if int(fields[1]) == parent and fields[0] != "Z":
            found[int(entry.name)] = stat[stat.index("(") + 1:stat.rindex(")")]
    return found


def _command(pid: int) -> str | None:
    """The command name of ``pid`` while it runs (None once gone, or a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return None if stat.rpartition(")")[2].split()[0] == "Z" else stat[stat.index("(") + 1:stat.rindex(")")]


def test_sigterm_while_srun_collects_releases_the_allocation(slurm_lab: SlurmLab, tmp_path: Path) -> None:
    slurm_lab.reset()
    shim = slurm_lab.state / "nodes" / "sim02" / "bin" / "python3"
    shim.write_text("#!/bin/sh\nexec sleep 3600\n", encoding="utf-8")  # the collector never answers
    shim.chmod(0o755)
    proc = subprocess.Popen([*BURNIN, "run", "--via", "slurm", "--nodes", "sim[01-04]", "--out", str(tmp_path),
                             "--timeout", "3600"],
                            env=slurm_lab.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while "srun" not in _children(proc.pid).values():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run never started its srun step"
            time.sleep(0.01)
        srun = [pid for pid, name in _children(proc.pid).items() if name == "srun"]
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        shim.unlink()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3, err
    assert err.strip().splitlines() == ["burnin run: interrupted (SIGTERM)"], err
    assert not [pid for pid in srun if _command(pid) == "srun"]
    deadline = time.monotonic() + WAIT_S  # cancelling the job takes Slurm a moment (KillWait=5)
    jobs = "?"
    while time.monotonic() < deadline:
        jobs = slurm_lab.client.run(["squeue", "--noheader", "--format=%i %j %T"]).stdout.strip()
        if not jobs:
            break
        time.sleep(0.2)
    assert jobs == "", f"jobs left in the queue: {jobs}"
    slurm_lab.wait_for("idle", lambda nodes: all(s.state == "IDLE" for s in nodes.values()))
    assert "No reservations" in slurm_lab.client.run(["scontrol", "show", "reservation"]).stdout


def test_an_allocation_cancelled_while_srun_collects_gates_only_the_measured_and_says_what_it_left(
        slurm_lab: SlurmLab, tmp_path: Path) -> None:
    """An operator's scancel of the run's allocation (a preemption does the same) while sim02's collector still
    runs: sim02 was not measured, and not for anything of its own, so --gate slurm leaves it as it is (incomplete,
    said in one line) while the measured nodes are gated as ever (sim03's ACS drains it); the job
    ended before the step that removes the collector it shipped: the run says which file it left on which nodes
    (the summary, run.json), exactly the one still there."""
    slurm_lab.reset()
    slurm_lab.fault("sim03", "acs-enabled")  # TOP-04: the run sees it; the lab's health-check probe does not drain
    shim = slurm_lab.state / "nodes" / "sim02" / "bin" / "python3"
    shim.write_text("#!/bin/sh\nexec sleep 3600\n", encoding="utf-8")  # the step runs until the job is cancelled
    shim.chmod(0o755)
    out = tmp_path / "run"
    proc = subprocess.Popen([*BURNIN, "run", "--via", "slurm", "--nodes", "sim[01-04]", "--out", str(out),
                             "--timeout", "3600", "--gate", "slurm"],
                            env=slurm_lab.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    shipped: list[Path] = []
    try:
        deadline = time.monotonic() + 120
        while "srun" not in _children(proc.pid).values():  # the collector was shipped: its step runs
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run never started its srun step"
            time.sleep(0.01)
        shipped = [Path(line.split()[-1]) for line in (out / "slurm-commands.log").read_text().splitlines()
                   if "$ sbcast " in line]
        job = slurm_lab.client.run(["squeue", "--noheader", "--format=%i"]).stdout.split()
        assert len(job) == 1 and len(shipped) == 1 and shipped[0].exists(), (job, shipped)
        assert slurm_lab.client.run(["scancel", job[0]]).ok
        stdout, err = proc.communicate(timeout=120)
        assert proc.returncode == 1, err  # sim02 is not admitted: it could not be measured
        said = [line for line in stdout.splitlines() if line.startswith("not measured: ")]
        assert len(said) == 1 and said[0].endswith("; the gate left them as they are") and job[0] in said[0], said
        # sim02 for certain; another node too when its collector's output had not come back before the scancel
        unmeasured = set(expand(said[0].removeprefix("not measured: ").split(":")[0]))
        assert "sim02" in unmeasured and "the run's allocation ended under it (job " in said[0], said
        gate = json.loads((out / "gate.json").read_text())
        nodes = slurm_lab.nodes()
        for node in unmeasured:  # incomplete, and left as they were
            assert gate["nodes"][node]["incomplete"] and not gate["nodes"][node]["failed"], gate["nodes"][node]
            assert not nodes[node].drained, nodes[node]
        if "sim03" not in unmeasured:  # measured: ACS on fails TOP-04, and the gate drains it as ever
            assert "TOP-04" in gate["nodes"]["sim03"]["failed"]
            assert nodes["sim03"].drained and nodes["sim03"].reason.startswith("burnin: TOP-04"), nodes["sim03"]
        measured = {"sim01", "sim04"} - unmeasured
        assert all(gate["nodes"][node]["admitted"] and not nodes[node].drained for node in measured), gate
        assert shipped[0].exists()  # no job of the run was left to remove it
        run = json.loads((out / "run.json").read_text())
        assert run["left_on_nodes"] == {f"sim0{n}": [str(shipped[0])] for n in range(1, 5)}
        assert set(run["not_measured"]) == unmeasured
        said = [line for line in stdout.splitlines() if line.startswith("left on ")]
        assert said == [f"left on sim[01-04]: 1 file(s) the run shipped, its allocation ended before removing "
                        f"them (run.json: left_on_nodes): {shipped[0]}"], stdout
        assert f"left on sim[01-04] until a later job of theirs removes it: {shipped[0]}" in \
            (out / "slurm-commands.log").read_text()
    finally:
        shim.unlink()
        if proc.poll() is None:
            proc.kill()
        for path in shipped:  # what the operator, told, does
            path.unlink(missing_ok=True)
    slurm_lab.reset()  # sim03 healed and resumed, every node idle: the job is gone
