"""`burnin run --via slurm --gate slurm` against real slurmctld/slurmd: drain, resume, hands off."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest
from simslurm_support import BURNIN, NODES, WAIT_S, SlurmLab

pytestmark = pytest.mark.sim_slurm


def _gate(out: Path) -> dict[str, dict[str, object]]:
    nodes: dict[str, dict[str, object]] = json.loads((out / "gate.json").read_text())["nodes"]
    return nodes


def _all_idle_but(lab: SlurmLab, *skip: str) -> float:
    return lab.wait_for("idle", lambda nodes: all(
        s.state == "IDLE" for n, s in nodes.items() if n not in skip))


def _probe_log(lab: SlurmLab, node: str) -> str:
    path = lab.state / "slurm" / "log" / f"probe-{node}.log"
    return path.read_text(encoding="utf-8") if path.exists() else ""


_PROBE_LINE = re.compile(r"^\d\d:\d\d:\d\d\.\d+ (burnin: .*)$")


def _next_verdict(lab: SlurmLab, node: str, after: str) -> str:
    """The line of the first health check of ``node`` begun after its log read ``after``, and not
    INCOMPLETE (a source may time out on a loaded machine); waits until there is one.

    A node's probes run one at a time: each writes its start time, reads the node, ends the line.
    One still running when ``after`` was read (its line unfinished) may have read the node before.
    """
    deadline = time.monotonic() + WAIT_S
    while True:
        text = _probe_log(lab, node)
        start = len(after)
        if after and not after.endswith("\n"):
            end = text.find("\n", len(after))
            start = end + 1 if end >= 0 else len(text)
        done = text[start:text.rfind("\n") + 1] if text.rfind("\n") >= start else ""
        verdicts = [m.group(1) for line in done.splitlines() if (m := _PROBE_LINE.match(line))]
        measured = [v for v in verdicts if not v.startswith("burnin: INCOMPLETE")]
        if measured:
            return measured[0]
        if time.monotonic() > deadline:
            pytest.fail(f"no health check measured {node} within {WAIT_S:g} s: {text[-800:]!r}")
        time.sleep(0.1)


def test_slurm_run_drains_only_the_faulty_node(slurm_lab: SlurmLab, tmp_path: Path) -> None:
    slurm_lab.reset()
    slurm_lab.fault("sim02", "ib-port-down")
    done = slurm_lab.run(tmp_path, "--gate", "slurm")
    assert done.returncode == 1, done.stdout + done.stderr
    gate = _gate(tmp_path)
    assert gate["sim02"]["admitted"] is False
    if "IB-01" not in gate["sim02"]["failed"]:  # type: ignore[operator]
        # The health check drained sim02 first, and again while the run waited to recheck it.
        facts = json.loads((tmp_path / "facts" / "sim02.json").read_text())
        assert "drained again while waiting to be rechecked" in facts["unreachable"], facts
    assert all(gate[n]["admitted"] for n in ("sim01", "sim03", "sim04")), gate
    sim02 = slurm_lab.nodes()["sim02"]
    assert sim02.drained and sim02.reason.startswith("burnin:") and "IB-01" in sim02.reason
    _all_idle_but(slurm_lab, "sim02")
    # one job step collects from every node of an allocation (a second one only for a recheck)
    log = (tmp_path / "slurm-commands.log").read_text()
    assert 1 <= log.count("--label") <= 2 and log.count("$ salloc") <= 2


def test_slurm_cleared_fault_is_resumed_by_the_next_run(slurm_lab: SlurmLab, tmp_path: Path) -> None:
    slurm_lab.reset()
    slurm_lab.scontrol("update", "NodeName=sim02", "State=DRAIN",
                       "Reason=burnin: IB-01 mlx5_2 port 1: Down (an earlier run)")
    done = slurm_lab.run(tmp_path, "--gate", "slurm")
    assert done.returncode == 0, done.stdout + done.stderr
    assert all(d["admitted"] for d in _gate(tmp_path).values())
    assert "resume sim02" in done.stdout
    _all_idle_but(slurm_lab)
    assert "No reservations" in slurm_lab.client.run(["scontrol", "show", "reservation"]).stdout


def test_slurm_operator_drain_is_never_resumed(slurm_lab: SlurmLab, tmp_path: Path) -> None:
    slurm_lab.reset()
    slurm_lab.scontrol("update", "NodeName=sim04", "State=DRAIN", "Reason=maintenance")
    done = slurm_lab.run(tmp_path / "run", "--gate", "slurm")
    assert done.returncode == 1, done.stdout + done.stderr  # sim04 could not be checked
    gate = _gate(tmp_path / "run")
    assert gate["sim04"]["admitted"] is False and not gate["sim04"]["failed"]
    assert all(gate[n]["admitted"] for n in ("sim01", "sim02", "sim03"))
    assert "sim04" in done.stdout and "left as it is" in done.stdout
    # the probe finds a fault on it: it still keeps its hands off
    slurm_lab.fault("sim04", "xid:79")
    log = _probe_log(slurm_lab, "sim04")
    line = _next_verdict(slurm_lab, "sim04", log)  # a health check begun after the fault: it read it
    assert "burnin: FAIL GPU-04" in line, line
    slurm_lab.wait_probes_done(["sim04"])  # and is done: whatever it did to Slurm is there
    sim04 = slurm_lab.nodes()["sim04"]
    assert sim04.drained and sim04.reason == "maintenance"
    _all_idle_but(slurm_lab, "sim04")


def test_slurm_dry_run_prints_the_commands(slurm_lab: SlurmLab, tmp_path: Path) -> None:
    slurm_lab.reset()
    slurm_lab.fault("sim03", "acs-enabled")  # TOP-04: the full suite sees it, the probe does not
    done = slurm_lab.run(tmp_path, "--gate", "slurm", "--dry-run")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "scontrol update NodeName=sim03 State=DRAIN 'Reason=burnin: TOP-04" in done.stdout
    _all_idle_but(slurm_lab)  # not drained (a drain stays): idle once the run's allocation is released
    assert "reservation" not in (tmp_path / "slurm-commands.log").read_text()


def test_slurm_run_inside_an_allocation_uses_its_nodes(slurm_lab: SlurmLab, tmp_path: Path) -> None:
    slurm_lab.reset()
    argv = ["salloc", "--nodes=2", "--nodelist=sim[01,03]", "--immediate=30", "--time=5",
            *BURNIN, "run", "--via", "slurm", "--out", str(tmp_path)]
    done = subprocess.run(argv, env=slurm_lab.env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(_gate(tmp_path)) == ["sim01", "sim03"]
    assert "$ salloc" not in (tmp_path / "slurm-commands.log").read_text()


def test_slurm_hung_node_is_incomplete_alone(slurm_lab: SlurmLab, tmp_path: Path) -> None:
    slurm_lab.reset()
    shim = slurm_lab.state / "nodes" / "sim03" / "bin" / "python3"
    shim.write_text("#!/bin/sh\nexec sleep 120\n", encoding="utf-8")
    shim.chmod(0o755)
    try:
        # the per-node bound must leave the healthy nodes time to answer on a loaded machine (a source
        # gets half of it); sim03 never answers, so the run lasts at least this long
        done = slurm_lab.run(tmp_path, "--timeout", "30", timeout=300)
    finally:
        shim.unlink()
    assert done.returncode == 1, done.stdout + done.stderr
    gate = _gate(tmp_path)
    assert gate["sim03"]["admitted"] is False and gate["sim03"]["incomplete"] and not gate["sim03"]["failed"]
    assert all(gate[n]["admitted"] for n in NODES if n != "sim03"), gate
    facts = json.loads((tmp_path / "facts" / "sim03.json").read_text())
    assert "timed out on sim03" in facts["unreachable"]
