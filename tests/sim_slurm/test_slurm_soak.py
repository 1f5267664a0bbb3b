"""`burnin soak --via slurm` on the lab: one allocation for the whole soak, srun steps per node and stage.

The lab's nodes are put under load as a soak's simulated world renders them
(about 60 C and 650 W a GPU, uptime, boot id and EDAC counters), and the
test moves that world itself: the soak over Slurm runs on the wall clock, with
no simulator code in its own process.

- a healthy soak stopped by SIGTERM ends with exit 3 and one line, leaves no
  job, step or shipped file behind, and ``--resume`` finishes it: exit 0, every
  node admitted, the samples before the stop kept (the node suite that ran
  first, through its own allocation, is not run again);
- a machine check on one node mid-soak fails that node alone for BRN-04 and,
  under ``--gate slurm``, drains it while the soak still runs for the others.
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from simslurm_support import BURNIN, NODES, SlurmLab

pytestmark = pytest.mark.sim_slurm

DURATION_S = 90
INTERVAL_S = 3
# The lab's world runs on the wall clock, so its gpu_burn takes the seconds it is given, as the
# real one does: after dcgm and disk, one gpu stage fills the rest of the soak (the loop waits
# for it past the nodes' end samples), so every later sample is under load, which GPU-06's
# creep judgement needs in the first and last quarter, and the SDC round runs after it.
SETTINGS = """\
nccl: {enabled: false}
cpu: {enabled: false}
tolerances:
  warmup_minutes: 0
  max_gap_intervals: 10
"""


@contextlib.contextmanager
def _under_load(slurm_lab: SlurmLab, faults: dict[str, list[str]]) -> Iterator[Any]:
    """Every lab node rendered as a soak's world renders it at t=0; healthy and resumed afterwards."""
    from burnin.sim import clear_faults, parse_fault_spec
    from burnin.sim.faults import validate_fault
    from burnin.sim.soak import SoakWorld, load_rack, remove_world_files
    from burnin.topology import find_topology

    rack = load_rack(slurm_lab.state, NODES)

    def healthy() -> None:
        for node in rack.values():
            clear_faults(node.dir)
            remove_world_files(node)

    healthy()
    topology = find_topology("hgx-h100-8gpu")
    checked = {node: [validate_fault(parse_fault_spec(f), topology) for f in items] for node, items in faults.items()}
    world = SoakWorld(rack, checked, duration_s=DURATION_S, wall_clock=True)
    world.advance(0.0)
    try:
        yield world
    finally:
        healthy()
        slurm_lab.reset()


def _soak(slurm_lab: SlurmLab, tmp_path: Path, out: Path, *args: str) -> tuple[subprocess.Popen[str], Path]:
    config = tmp_path / "soak.yaml"
    config.write_text(SETTINGS)
    err = tmp_path / "soak.err"
    argv = [*BURNIN, "soak", "--via", "slurm", "--nodes", "sim[01-04]", "--duration", f"{DURATION_S}s",
            "--interval", str(INTERVAL_S), "--config", str(config), "--out", str(out), *args]
    with (tmp_path / "soak.out").open("w") as stdout, err.open("w") as stderr:
        proc = subprocess.Popen(argv, env=slurm_lab.env, stdout=stdout, stderr=stderr, text=True)
    return proc, err


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _wait_for_rounds(proc: subprocess.Popen[str], out: Path, rounds: int, err: Path) -> None:
    deadline = time.monotonic() + 180
    while len(_lines(out / "samples.jsonl")) < rounds * len(NODES):
        assert proc.poll() is None, f"the soak ended early ({proc.returncode}): {err.read_text()[-2000:]}"
        assert time.monotonic() < deadline, "the soak took no sample rounds"
        time.sleep(0.1)


def _children(parent: int, name: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()
        if int(fields[1]) == parent and fields[0] != "Z" and stat[stat.index("(") + 1:stat.rindex(")")] == name:
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z" and "(srun)" in stat


def _queue(slurm_lab: SlurmLab) -> str:
    deadline = time.monotonic() + 30
    jobs = "?"
    while time.monotonic() < deadline:
        jobs = slurm_lab.client.run(["squeue", "--noheader", "--format=%i %j %T"]).stdout.strip()
        if not jobs:
            break
        time.sleep(0.2)
    return jobs


def _job_ids(out: Path) -> list[str]:
    """The soak's own allocations (the collector it ships as burnin-soak-J-...), not the node suite's before it."""
    log = (out / "slurm-commands.log").read_text()
    return re.findall(r"\$ sbcast --jobid=(\d+) .*burnin-soak-\S*collector\.pyz", log)


def _acceptance_jobs(out: Path) -> list[str]:
    """The node suite's allocations, run before the soak (its collector shipped as burnin-collector-J-...)."""
    log = (out / "slurm-commands.log").read_text()
    return re.findall(r"\$ sbcast --jobid=(\d+) .*burnin-collector-\S*\.pyz", log)


def _gate(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "gate.json").read_text())
    return data


def test_a_soak_over_slurm_stopped_by_sigterm_leaves_nothing_and_resumes_to_exit_0(
        slurm_lab: SlurmLab, tmp_path: Path) -> None:
    slurm_lab.reset()
    out = tmp_path / "soak"
    with _under_load(slurm_lab, {}):
        proc, err = _soak(slurm_lab, tmp_path, out)
        _wait_for_rounds(proc, out, 2, err)
        deadline = time.monotonic() + 60
        while not (steps := _children(proc.pid, "srun")):  # stop it while its steps run
            assert proc.poll() is None and time.monotonic() < deadline, err.read_text()[-2000:]
            time.sleep(0.01)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 3, err.read_text()[-3000:]
        said = [line for line in _lines(err) if not line.startswith("soak ")]
        assert said == ["burnin soak: interrupted (SIGTERM)"], said
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in steps) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(pid) for pid in steps)
        assert _queue(slurm_lab) == ""
        slurm_lab.wait_for("idle", lambda nodes: all(s.state == "IDLE" for s in nodes.values()))
        assert "No reservations" in slurm_lab.client.run(["scontrol", "show", "reservation"]).stdout
        (job,) = _job_ids(out)
        assert not list(Path("/tmp").glob(f"burnin-soak-{job}-*"))  # the collector and the stress input, removed
        state = json.loads((out / "soak-state.json").read_text())
        assert not state["finished"] and state["now"] < DURATION_S
        counted = state["logged"]["samples.jsonl"]
        before = _lines(out / "samples.jsonl")[:counted]

        resumed = slurm_lab.burnin("soak", "--resume", str(out), timeout=600)
        assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-2000:]
        gate = _gate(out)
        assert (gate["admitted"], gate["rejected"]) == ("sim[01-04]", ""), gate
        verdicts = json.loads((out / "verdicts.json").read_text())
        assert {(v["check"], v["status"]) for v in verdicts if v["status"] != "pass"} == {
            ("BRN-03", "not-applicable")}  # switched off in the settings: every other check passed
        assert _lines(out / "samples.jsonl")[:counted] == before  # the samples before the stop are kept
        assert len(set(_job_ids(out))) == 2 and _queue(slurm_lab) == ""  # a new allocation, released too
        assert len(_acceptance_jobs(out)) == 1  # the node suite ran once, before the soak, not again on --resume
        assert json.loads((out / "acceptance" / "gate.json").read_text())["admitted"] == "sim[01-04]"


def test_a_machine_check_fails_and_drains_only_its_node_while_the_soak_goes_on(
        slurm_lab: SlurmLab, tmp_path: Path) -> None:
    slurm_lab.reset()
    out = tmp_path / "soak"
    with _under_load(slurm_lab, {"sim03": ["mce"]}) as world:
        proc, err = _soak(slurm_lab, tmp_path, out, "--gate", "slurm")
        _wait_for_rounds(proc, out, 2, err)
        world.advance(world.mce_at())  # the machine check, as the world renders it a third into a soak
        slurm_lab.wait_for("sim03 drained", lambda nodes: nodes["sim03"].drained, timeout=90)
        assert proc.poll() is None, "sim03 was drained only once the soak had ended"
        nodes = slurm_lab.nodes()
        assert nodes["sim03"].reason.startswith("burnin: BRN-04 node ") and " at +00:00:" in nodes["sim03"].reason
        assert not any(nodes[n].drained for n in ("sim01", "sim02", "sim04")), nodes
        assert proc.wait(timeout=600) == 1, err.read_text()[-3000:]
        gate = _gate(out)
        assert (gate["rejected"], gate["admitted"]) == ("sim03", "sim[01-02,04]"), gate
        assert gate["nodes"]["sim03"]["failed"] == ["BRN-04"], gate["nodes"]["sim03"]
        assert "Machine check events logged" in gate["nodes"]["sim03"]["reasons"][0]
        failed = [line for line in _lines(err) if line.startswith("soak FAILED")]
        assert failed and all(line.startswith("soak FAILED sim03: BRN-04 node ") for line in failed), failed
        nodes = slurm_lab.nodes()
        assert nodes["sim03"].drained and nodes["sim03"].reason.startswith("burnin: BRN-04"), nodes["sim03"]
        assert not any(nodes[n].drained for n in ("sim01", "sim02", "sim04")), nodes
        assert _queue(slurm_lab) == ""



def test_a_soak_whose_allocation_an_operator_cancels_stops_says_what_it_left_and_resumes(
        slurm_lab: SlurmLab, tmp_path: Path) -> None:
    """scancel (or a preemption) of the soak's allocation: no step can run there any more. The soak does not
    sample nothing for the rest of its duration: it stops as an interrupted one does (exit 3, one line naming
    the job's end, the checkpoint kept), names the files it shipped and could not remove (exactly those still on
    the nodes), and --resume finishes it in a new allocation."""
    slurm_lab.reset()
    out = tmp_path / "soak"
    shipped: set[str] = set()
    with _under_load(slurm_lab, {}):
        proc, err = _soak(slurm_lab, tmp_path, out)
        try:
            _wait_for_rounds(proc, out, 2, err)
            (job,) = _job_ids(out)
            shipped = {str(path) for path in Path("/tmp").glob(f"burnin-soak-{job}-*")}
            assert shipped, "the soak shipped nothing to its nodes"
            assert slurm_lab.client.run(["scancel", job]).ok
            assert proc.wait(timeout=120) == 3, err.read_text()[-3000:]
            said = [line for line in _lines(err) if not line.startswith("soak ")]
            assert len(said) == 1 and said[0].startswith("burnin soak: the soak's allocation ended at +00:00:"), said
            assert f": job {job} CANCELLED" in said[0] or f": job {job} is gone" in said[0], said
            assert said[0].endswith(f"the checkpoint stays: burnin soak --resume {out} goes on in a new one"), said
            state = json.loads((out / "soak-state.json").read_text())
            assert not state["finished"] and state["now"] < DURATION_S / 2, state["now"]  # it did not sit it out
            left = {str(path) for path in Path("/tmp").glob(f"burnin-soak-{job}-*")}
            assert left == shipped  # no later job of the soak's could remove them
            stdout = _lines(tmp_path / "soak.out")
            assert stdout == [f"left on sim[01-04]: {len(left)} file(s) the soak shipped, its allocation ended "
                              f"before removing them (slurm-commands.log): {' '.join(sorted(left))}"], stdout
            assert _queue(slurm_lab) == ""
            for path in shipped:  # what the operator, told, does
                Path(path).unlink()

            resumed = slurm_lab.burnin("soak", "--resume", str(out), timeout=600)
            assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-2000:]
            assert _gate(out)["admitted"] == "sim[01-04]"
            assert len(set(_job_ids(out))) == 2 and _queue(slurm_lab) == ""
            assert not [line for line in resumed.stdout.splitlines() if line.startswith("left on ")]
        finally:
            if proc.poll() is None:
                proc.kill()
            for path in shipped:
                Path(path).unlink(missing_ok=True)
