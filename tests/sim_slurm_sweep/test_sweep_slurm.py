"""``burnin sweep`` against real slurmctld/slurmd with preemption: idle nodes only, giving way to jobs, fail closed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from simsweep_support import BURNIN, WAIT_S, SweepLab, remove_shipped, status, sweep_doc

pytestmark = pytest.mark.sim_slurm

HOLD = 'while [ ! -e {go} ]; do sleep 0.1; done\n'


def _blocked_collector(lab: SweepLab, node: str, folder: Path) -> None:
    """``node``'s collector says it started (``folder/started-NODE``), then waits for ``folder/go``. It ignores
    SIGTERM: a job of it that is preempted or cancelled shows COMPLETING until Slurm kills it (KillWait)."""
    lab.node_python(node, f"trap '' TERM\ntouch {folder}/started-{node}\n" + HOLD.format(go=folder / "go")
                    + 'exec /usr/bin/python3 "$@"\n')


def _jobs_of(out: Path, node: str) -> list[str]:
    return [str(job["end"]) for job in sweep_doc(out)[node]["jobs"]]  # type: ignore[attr-defined]


def test_sweep_tests_idle_nodes_and_gives_way_to_a_training_job(sweep_lab: SweepLab, tmp_path: Path) -> None:
    """Preempted by a job, tried again once it ended; the sweep ends as soon as every node is settled."""
    lab = sweep_lab
    lab.reset()
    out = tmp_path / "sweep"
    lab.fault("sim04", "acs-enabled")  # TOP-04: the node suite finds it, the health probe does not
    for node in ("sim01", "sim02"):
        _blocked_collector(lab, node, tmp_path)
    sweep = lab.sweep(out, "--for", "600", "--max-share", "0.5", "--timeout", "30", "--gate", "slurm",
                      nodes="sim[01-04]")
    try:
        lab.wait_for("sim01's and sim02's sweep jobs collecting", lambda: all(
            (tmp_path / f"started-{n}").exists() for n in ("sim01", "sim02")))
        second = lab.sweep(out, "--for", "600")
        said, _ = second.communicate(timeout=60)
        assert second.returncode == 2 and "in use by" in said and said.count("\n") == 1, said
        urgent = lab.submit("urgent", "sim[01-02]", f"touch {tmp_path}/urgent-ran\n"
                            + HOLD.format(go=tmp_path / "release"))
        lab.wait_for("the urgent job running", lambda: lab.job_state(urgent) == "RUNNING")
        assert not [j for j in lab.sweep_jobs() if j.nodes in ("sim01", "sim02")]
        lab.wait_for("the sweep seeing both preempted", lambda: all(
            status(out, n) == "preempted" for n in ("sim01", "sim02")))
        (tmp_path / "go").touch()
        (tmp_path / "release").touch()  # the urgent job ends: sim01 and sim02 are idle again
        said, _ = sweep.communicate(timeout=WAIT_S + 300)
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
    assert (tmp_path / "urgent-ran").exists()
    assert sweep.returncode == 1, said  # a node rejected: never exit 0
    nodes = sweep_doc(out)
    assert {n: d["status"] for n, d in nodes.items()} == {
        "sim01": "admitted", "sim02": "admitted", "sim03": "admitted", "sim04": "rejected"}, said
    for node in ("sim01", "sim02"):  # preempted, then tried again once the urgent job was done
        assert _jobs_of(out, node) == ["preempted", "tested"], nodes[node]
    gate = json.loads((out / "nodes" / "sim04" / "gate.json").read_text())["nodes"]["sim04"]
    assert gate["failed"] == ["TOP-04"] and not gate["incomplete"]
    state, reason = lab.node_reason("sim04")
    assert "DRAIN" in state and reason.startswith("burnin: TOP-04"), (state, reason)
    assert "admitted: sim[01-03] (3)" in said and "rejected: sim04 (1)" in said
    assert not lab.sweep_jobs()  # nothing of the sweep left in Slurm's queue
    assert lab.most_sweep_jobs <= 3  # half of the partition's 6 nodes
    assert json.loads((out / "sweep.json").read_text())["most_jobs_at_once"] <= 3
    allocations = [line for line in (out / "slurm-commands.log").read_text().splitlines() if "$ salloc" in line]
    assert allocations and all("--partition=sweep" in a and "--nice=2147483645" in a and "--exclusive" in a
                               and "--nodes=1 " in a for a in allocations), allocations
    # the collector shipped into the preempted jobs could not be removed with them: the next job of each node did
    shipped = [line.split()[-1] for line in (out / "slurm-commands.log").read_text().splitlines() if "$ sbcast" in line]
    assert len(shipped) >= 6 and not [path for path in shipped if Path(path).exists()], shipped
    assert json.loads((out / "sweep.json").read_text())["left_on_nodes"] == {}


def test_nodes_busy_all_window_are_not_tested_and_their_job_is_never_touched(sweep_lab: SweepLab,
                                                                             tmp_path: Path) -> None:
    lab = sweep_lab
    lab.reset()
    out = tmp_path / "sweep"
    training = lab.submit("training", "sim[05-06]", "sleep 100000")  # busy all window
    lab.wait_for("the training job running", lambda: lab.job_state(training) == "RUNNING")
    sweep = lab.sweep(out, "--for", "70", "--max-share", "0.5", "--timeout", "5", "--gate", "slurm",
                      nodes="sim[05-06]")
    said, _ = sweep.communicate(timeout=WAIT_S + 60)
    assert sweep.returncode == 1, said  # not every node tested: never exit 0
    assert {n: d["status"] for n, d in sweep_doc(out).items()} == {"sim05": "busy", "sim06": "busy"}, said
    assert "not tested (busy all window): sim[05-06] (2)" in said
    assert lab.job_state(training) == "RUNNING"  # never touched
    for node in ("sim05", "sim06"):
        assert not lab.node_reason(node)[1].startswith("burnin:")  # not tested: never drained for it
    assert not lab.sweep_jobs()


def test_sweep_fails_closed_and_judges_a_bad_majority_node_by_node(sweep_lab: SweepLab, tmp_path: Path) -> None:
    lab = sweep_lab
    lab.reset()
    out = tmp_path / "sweep"
    lab.fault("sim02", "nvlink-down")
    lab.fault("sim03", "ib-rate-200")
    lab.fault("sim04", "acs-enabled")
    lab.node_python("sim05", 'exec env BURNIN_SIM_NODE=sim01 /usr/bin/python3 "$@"\n')  # says it is sim01
    _blocked_collector(lab, "sim06", tmp_path)  # an operator cancels its job meanwhile
    # four drains in minutes: more than the breaker's default room (2), widened here (docs/breaker.md)
    state_dir = tmp_path / "state"
    widened = subprocess.run([*BURNIN, "breaker", "set", "--nodes", "6"], env={**lab.env,
                             "BURNIN_STATE_DIR": str(state_dir)}, capture_output=True, text=True, timeout=120,
                             check=False)
    assert widened.returncode == 0, widened.stdout + widened.stderr
    sweep = lab.sweep(out, "--for", "600", "--max-share", "1", "--timeout", "30", "--gate", "slurm",
                      state_dir=state_dir)
    try:
        lab.wait_for("sim06's collector started", lambda: (tmp_path / "started-sim06").exists())
        sim06 = [j for j in lab.sweep_jobs() if j.nodes == "sim06"]
        assert len(sim06) == 1, sim06
        lab.slurm("scancel", sim06[0].job_id)
        (tmp_path / "go").touch()
        said, _ = sweep.communicate(timeout=WAIT_S + 300)  # every node settled: it ends before the window
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
    assert sweep.returncode == 1, said
    nodes = sweep_doc(out)
    assert {n: d["status"] for n, d in nodes.items()} == {
        "sim01": "admitted", "sim02": "rejected", "sim03": "rejected", "sim04": "rejected", "sim05": "rejected",
        "sim06": "ended"}, said
    gates = {n: json.loads((out / "nodes" / n / "gate.json").read_text())["nodes"][n]
             for n in ("sim01", "sim02", "sim03", "sim04", "sim05")}
    assert {n: gates[n]["failed"] for n in ("sim02", "sim03", "sim04")} == {
        "sim02": ["GPU-10"], "sim03": ["IB-02"], "sim04": ["TOP-04"]}
    assert gates["sim05"]["incomplete"] and not gates["sim05"]["failed"]
    assert "not this node's facts" in " ".join(gates["sim05"]["reasons"])
    assert "CANCELLED" in str(nodes["sim06"]["why"]) and not (out / "nodes" / "sim06").exists()
    assert _jobs_of(out, "sim06") == [f"ended: {nodes['sim06']['why']}"]  # not tried again
    left = json.loads((out / "sweep.json").read_text())["left_on_nodes"]  # its job took no clean-up step
    assert list(left) == ["sim06"] and len(left["sim06"]) == 1 and Path(left["sim06"][0]).exists(), left
    assert f"left on sim06: 1 file(s) the sweep shipped, their jobs ended before removing them (sweep.json: " \
           f"left_on_nodes): {left['sim06'][0]}\n" in said, said
    Path(left["sim06"][0]).unlink()  # what the operator, told, would do
    for node, check in (("sim02", "GPU-10"), ("sim03", "IB-02"), ("sim04", "TOP-04"), ("sim05", "INV-01")):
        state, reason = lab.node_reason(node)
        assert "DRAIN" in state and reason.startswith("burnin:") and check in reason, (node, state, reason)
    for node in ("sim01", "sim06"):
        assert lab.node_reason(node)[0] == "IDLE"
    assert not lab.sweep_jobs()


def test_sweep_refuses_a_partition_slurm_does_not_know(sweep_lab: SweepLab, tmp_path: Path) -> None:
    done = sweep_lab.sweep(tmp_path / "sweep", "--for", "600", partition="nosuch")
    said, _ = done.communicate(timeout=60)
    assert done.returncode == 2, said
    assert said.startswith("burnin sweep: --partition nosuch: Slurm does not know it") and said.count("\n") == 1
    done = sweep_lab.sweep(tmp_path / "sweep", "--for", "600", nodes="sim[05-08]")
    said, _ = done.communicate(timeout=60)
    assert done.returncode == 2, said
    assert said == "burnin sweep: --nodes: sim[07-08] not in partition sweep (Nodes=sim[01-06])\n"
    assert not sweep_lab.sweep_jobs()


def test_an_interrupted_sweep_leaves_no_job(sweep_lab: SweepLab, tmp_path: Path) -> None:
    lab = sweep_lab
    lab.reset()
    _blocked_collector(lab, "sim01", tmp_path)
    sweep = lab.sweep(tmp_path / "sweep", "--for", "600", "--max-share", "0.5", "--timeout", "30", "--gate", "slurm")
    try:
        lab.wait_for("sim01's collector started", lambda: (tmp_path / "started-sim01").exists())
        assert lab.sweep_jobs()
        sweep.terminate()
        said, _ = sweep.communicate(timeout=WAIT_S)
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
        left_unsaid = remove_shipped(tmp_path / "sweep")
    assert sweep.returncode == 3 and "interrupted (SIGTERM)" in said, said
    assert not left_unsaid, left_unsaid  # whatever it left on the nodes, sweep.json says
    assert not lab.sweep_jobs()
    state, reason = lab.node_reason("sim01")
    assert not reason.startswith("burnin:"), (state, reason)  # not tested: never drained for it
