"""``burnin sweep --fabric-group``: the fabric suite's multi-node checks in one preemptible job over admitted nodes
idle together, against real slurmctld/slurmd; only the node a check names is drained."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from simsweep_support import WAIT_S, SweepLab, remove_shipped, sweep_doc

pytestmark = pytest.mark.sim_slurm
# --timeout 60 in every sweep here: four node jobs at once run the SDC workload side by side (GPU-14), which a
# loaded 2-core machine once took more than 15 s (half of 30) for one source

GROUP = ("sim01", "sim02", "sim03", "sim04")


def _finish(sweep: object) -> str:
    import subprocess

    assert isinstance(sweep, subprocess.Popen)
    try:
        said, _ = sweep.communicate(timeout=WAIT_S + 300)
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
    return str(said)


def _fabric(out: Path) -> dict[str, dict[str, object]]:
    return {node: doc["fabric"] for node, doc in sweep_doc(out).items()}  # type: ignore[misc]


def test_a_group_names_the_node_only_a_multi_node_run_sees(sweep_lab: SweepLab, tmp_path: Path) -> None:
    lab = sweep_lab
    lab.reset()
    out = tmp_path / "sweep"
    lab.fault("sim03", "rail-degraded")  # its leaf switch port: invisible to the node suite and to IB-08
    sweep = lab.sweep(out, "--for", "600", "--max-share", "1", "--timeout", "60", "--gate", "slurm",
                      "--fabric-group", "4", nodes="sim[01-04]")
    said = _finish(sweep)  # every node settled: it ends before the window
    assert sweep.returncode == 1, said
    nodes = sweep_doc(out)
    assert {n: d["status"] for n, d in nodes.items()} == {
        "sim01": "admitted", "sim02": "admitted", "sim03": "rejected", "sim04": "admitted"}, said
    fabric = _fabric(out)
    assert {n: f["status"] for n, f in fabric.items()} == {
        "sim01": "passed", "sim02": "passed", "sim03": "failed", "sim04": "passed"}, said
    for node in GROUP:  # the node suite's own job first, then one group job over all four
        assert [j["end"] for j in nodes[node]["jobs"]] == ["tested"], nodes[node]  # type: ignore[index]
        assert [g["end"] for g in fabric[node]["groups"]] == ["tested"], fabric[node]  # type: ignore[attr-defined]
    group = Path(str(fabric["sim03"]["results"]))
    gate = json.loads((group / "gate.json").read_text())["nodes"]
    assert "NCCL-03" in gate["sim03"]["failed"] and "NCCL-04" in gate["sim03"]["failed"], gate["sim03"]
    assert all(gate[n]["admitted"] for n in ("sim01", "sim02", "sim04")), gate
    state, reason = lab.node_reason("sim03")
    assert "DRAIN" in state and reason.startswith("burnin: NCCL-04,NCCL-03 sim03 slow HCA mlx5_2"), (state, reason)
    for node in ("sim01", "sim02", "sim04"):  # its innocent peers: never drained
        assert lab.node_reason(node)[0] == "IDLE"
    allocations = [line for line in (out / "slurm-commands.log").read_text().splitlines() if "$ salloc" in line]
    grouped = [a for a in allocations if "--nodes=4 " in a]
    assert len(grouped) == 1 and "--partition=sweep" in grouped[0] and "--nice=2147483645" in grouped[0], allocations
    assert "srun --jobid=" in (group / "fabric-commands.log").read_text()
    assert "fabric:   passed sim[01-02,04] (3); failed sim03 (1)" in said
    assert not lab.sweep_jobs()


def _counting_python(lab: SweepLab, node: str, folder: Path, from_call: int, then: str) -> None:
    """``node``'s python3 counts its calls (``folder/calls-NODE``); from call ``from_call`` on it runs ``then``
    (shell, with ``$n`` the call's number) before the real python3. The node's own job is call 1."""
    lab.node_python(node, f'f={folder}/calls-{node}; n=$(( $(cat "$f" 2>/dev/null || echo 0) + 1 )); echo $n > "$f"\n'
                          f'if [ "$n" -ge {from_call} ]; then\n{then}\nfi\nexec /usr/bin/python3 "$@"\n')


def _garbage_multi_node(lab: SweepLab, node: str) -> Path:
    """``node``'s all_reduce_perf prints garbage as a rank of a multi-node job (PMI; the single-node runs, one
    independent task per node, stay real); the
    real one is kept beside it, to be put back."""
    tool = lab.state / "nodes" / node / "bin" / "all_reduce_perf"
    real = tool.with_name("all_reduce_perf.real")
    tool.rename(real)
    tool.write_text('#!/bin/sh\nif [ -n "$PMI_RANK" ]; then\n'
                    '  echo "# nThread 1 <<< GARBAGE \\x1b[31m not a table >>>"; echo "%%%% 12 abc"; exit 0\nfi\n'
                    f'exec {real} "$@"\n', encoding="utf-8")
    tool.chmod(0o755)
    return real


def test_a_group_of_garbage_and_a_forged_host_is_incomplete_never_drained(sweep_lab: SweepLab,
                                                                          tmp_path: Path) -> None:
    lab = sweep_lab
    lab.reset()
    out = tmp_path / "sweep"
    # sim04 is itself for its own job, then says it is sim01 in the group's
    _counting_python(lab, "sim04", tmp_path, 2, "export BURNIN_SIM_NODE=sim01")
    kept = [_garbage_multi_node(lab, node) for node in GROUP]
    try:
        sweep = lab.sweep(out, "--for", "600", "--max-share", "1", "--timeout", "60", "--gate", "slurm",
                          "--fabric-group", "4", nodes="sim[01-04]")
        said = _finish(sweep)
    finally:
        for real in kept:
            real.replace(real.with_name("all_reduce_perf"))
    assert sweep.returncode == 1, said  # nobody's fabric passed: never exit 0
    nodes = sweep_doc(out)
    assert {n: d["status"] for n, d in nodes.items()} == dict.fromkeys(GROUP, "admitted"), said
    fabric = _fabric(out)
    assert {n: f["status"] for n, f in fabric.items()} == dict.fromkeys(GROUP, "incomplete"), said
    assert "not this node's facts" in str(fabric["sim04"]["reasons"])
    for node in ("sim01", "sim02", "sim03"):  # the group and every pair: garbage, never blamed on a node
        assert "all_reduce_perf printed no result rows" in str(fabric[node]["reasons"]), fabric[node]
    measured = (Path(str(fabric["sim01"]["results"])) / "fabric.json").read_text()
    assert "printed no result rows; last output: " in measured and "GARBAGE" in measured  # the excerpt
    for node in GROUP:  # nobody can be blamed: nobody drained
        assert lab.node_reason(node)[0] == "IDLE", lab.node_reason(node)
    assert "fabric:   incomplete sim[01-04] (4)" in said
    assert not lab.sweep_jobs()


def test_a_group_with_a_bad_majority_never_blames_the_good_node(sweep_lab: SweepLab, tmp_path: Path) -> None:
    lab = sweep_lab
    lab.reset()
    out = tmp_path / "sweep"
    for node in ("sim02", "sim03", "sim04"):
        lab.fault(node, "rail-degraded")
    sweep = lab.sweep(out, "--for", "600", "--max-share", "1", "--timeout", "60", "--gate", "slurm",
                      "--fabric-group", "4", nodes="sim[01-04]")
    said = _finish(sweep)
    assert sweep.returncode == 1, said
    fabric = _fabric(out)
    # every pair holds a bad node: nobody can be cleared, so nobody is named either (sim01 is innocent)
    assert {n: f["status"] for n, f in fabric.items()} == dict.fromkeys(GROUP, "incomplete"), said
    for node in GROUP:
        assert "could neither clear nor name" in str(fabric[node]["reasons"]), fabric[node]
        assert lab.node_reason(node)[0] == "IDLE", lab.node_reason(node)
    assert not lab.sweep_jobs()


def test_a_preempted_group_is_not_tested_and_an_interrupted_one_leaves_no_job(sweep_lab: SweepLab,
                                                                               tmp_path: Path) -> None:
    lab = sweep_lab
    lab.reset()
    out = tmp_path / "sweep"
    # sim01's collector in every group job says so and waits (the node's own job is call 1)
    _counting_python(lab, "sim01", tmp_path, 2, f'touch {tmp_path}/group-$n\n'
                                                f'while [ ! -e {tmp_path}/go ]; do sleep 0.1; done')
    sweep = lab.sweep(out, "--for", "600", "--max-share", "1", "--timeout", "60", "--gate", "slurm",
                      "--fabric-group", "2", nodes="sim[01-02]")
    try:
        lab.wait_for("the first group collecting", lambda: (tmp_path / "group-2").exists())
        urgent = lab.submit("urgent", "sim[01-02]", f"while [ ! -e {tmp_path}/release ]; do sleep 0.1; done")
        lab.wait_for("the urgent job running", lambda: lab.job_state(urgent) == "RUNNING")
        lab.wait_for("the sweep seeing its group preempted", lambda: all(
            (sweep_doc(out)[n].get("fabric") or {}).get("status") == "preempted" for n in ("sim01", "sim02")))
        (tmp_path / "release").touch()  # idle together again: a second group
        lab.wait_for("the second group collecting", lambda: (tmp_path / "group-3").exists())
        assert [j for j in lab.sweep_jobs() if j.nodes == "sim[01-02]"]
        sweep.terminate()
        said, _ = sweep.communicate(timeout=WAIT_S)
    finally:
        (tmp_path / "go").touch()
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
        left_unsaid = remove_shipped(out)
    assert sweep.returncode == 3 and "interrupted (SIGTERM)" in said, said
    assert not left_unsaid, left_unsaid  # whatever it left on the nodes, sweep.json says
    assert not lab.sweep_jobs()
    fabric = _fabric(out)
    for node in ("sim01", "sim02"):  # preempted: not tested, never a failure
        assert fabric[node]["status"] == "preempted" and not fabric[node]["tested"], fabric[node]
        assert [g["end"] for g in fabric[node]["groups"]] == ["preempted"], fabric[node]  # type: ignore[attr-defined]
        assert not lab.node_reason(node)[1].startswith("burnin:"), lab.node_reason(node)
