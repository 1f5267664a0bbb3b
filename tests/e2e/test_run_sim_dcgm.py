"""GPU-12 and GPU-13 end to end: the real collector runs the simulated nodes' dcgmi, the node suite judges,
the gate decides; `burnin probe` runs `dcgmi health -c` and never a diag.

- `burnin run --sim 5` with one DCGM fault per node rejects exactly those nodes, each for its check, with
  DCGM's words as the measured value and the expectation beside them.
- A node type that declares no DCGM (`dcgm: {required: false}`) has no dcgmi, and both checks stand aside with
  the topology's reason (gate.json `not_applicable`): the nodes are admitted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from burnin.resources import topologies_dir
from burnin.sim import SimNode, apply_fault, build_rack, parse_fault_spec
from burnin.sim.build import render_node
from burnin.topology.model import Topology

HEALTH = "(expected DCGM Overall Health Healthy (dcgmi health -c))"
DIAG = "(expected every DCGM deployment test Pass (dcgmi diag -r 1))"
PLAN = {
    "sim02": ("dcgm-health-warn@gpu2", ["GPU-12"], [
        f"GPU-12 gpu2 PCIe system Warning: Detected more than 8 PCIe replays per minute for GPU 2 : 13 {HEALTH}"]),
    "sim03": ("dcgm-diag-fail@gpu5", ["GPU-13"], [
        f"GPU-13 gpu5 Inforom Fail: A corrupt InfoROM has been detected in GPU 5. {DIAG}"]),
    "sim04": ("dcgm-health-fail", ["GPU-12"], [
        f"GPU-12 gpu3 Memory system Failure: GPU had an uncontained error (XID 95) {HEALTH}"]),
}
NO_DCGM = "topology hgx-h100-8gpu declares no DCGM (dcgm: {required: false})"


def burnin(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "burnin.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, check=False, env={**os.environ, **(env or {})})


def no_dcgm_topology(tmp_path: Path) -> Path:
    text = (topologies_dir() / "hgx-h100-8gpu.yaml").read_text()
    assert "dcgm:\n  required: true\n" in text
    path = tmp_path / "no-dcgm.yaml"
    text = text.replace("dcgm:\n  required: true\n", "dcgm:\n  required: false\n", 1)
    # no DCGM, so no DCGM version in the software manifest either (software.dcgm)
    version = next(line for line in text.splitlines() if line.startswith("  dcgm: "))
    path.write_text(text.replace(version + "\n", "", 1))
    return path


@pytest.fixture(scope="module")
def faulted_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("dcgm-run")
    args = ["run", "--sim", "4", "--out", str(out)]
    for node, (fault, _, _) in PLAN.items():
        args += ["--fault", f"{node}:{fault}"]
    proc = burnin(*args)
    gate = json.loads((out / "gate.json").read_text()) if (out / "gate.json").exists() else None
    return {"proc": proc, "gate": gate, "out": out}


def test_each_dcgm_fault_rejects_its_node_for_its_check(faulted_run: dict[str, Any]) -> None:
    proc, gate = faulted_run["proc"], faulted_run["gate"]
    assert proc.returncode == 1 and gate is not None, proc.stdout + proc.stderr
    assert gate["rejected"] == "sim[02-04]" and gate["admitted"] == "sim01"
    for node, (_, failed, reasons) in PLAN.items():
        assert gate["nodes"][node] == {"admitted": False, "failed": failed, "incomplete": [], "reasons": reasons}
    assert gate["nodes"]["sim01"] == {"admitted": True, "failed": [], "incomplete": [], "reasons": []}


def test_healthy_node_passed_both_dcgm_checks(faulted_run: dict[str, Any]) -> None:
    verdicts = json.loads((faulted_run["out"] / "verdicts.json").read_text())
    sim01 = {v["check"]: v for v in verdicts if v["node"] == "sim01"}
    assert sim01["GPU-12"]["status"] == sim01["GPU-13"]["status"] == "pass"
    assert sim01["GPU-13"]["measured"] == "9 deployment tests Pass"
    facts = json.loads((faulted_run["out"] / "facts" / "sim01.json").read_text()) \
        if (faulted_run["out"] / "facts" / "sim01.json").exists() else None
    if facts is not None:
        assert facts["commands"]["dcgmi-diag"]["argv"] == ["dcgmi", "diag", "-r", "1"]


def test_a_node_type_without_dcgm_stands_aside(tmp_path: Path) -> None:
    topology = no_dcgm_topology(tmp_path)
    out = tmp_path / "out"
    proc = burnin("run", "--sim", "2", "--topology", str(topology), "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr  # nothing else held: INV-10 does not look for DCGM
    gate = json.loads((out / "gate.json").read_text())
    for node in ("sim01", "sim02"):  # sim01 runs the suite's first test, before the check modules were imported
        decision = gate["nodes"][node]
        assert not {"GPU-12", "GPU-13"} & {*decision["failed"], *decision["incomplete"]}, decision
        assert decision["not_applicable"] == {"GPU-12": f"GPU-12 not applicable: {NO_DCGM}",
                                              "GPU-13": f"GPU-13 not applicable: {NO_DCGM}"}


# ------------------------------------------------------------------ burnin probe


def probe(node: SimNode, *args: str) -> subprocess.CompletedProcess[str]:
    return burnin("probe", *args, env=node.environment(), timeout=60)


@pytest.fixture
def sim_node(tmp_path: Path, h100_topology: Topology) -> SimNode:
    return build_rack(tmp_path / "rack", h100_topology, ["sim01"], {})[0]


def test_probe_judges_dcgm_health(sim_node: SimNode) -> None:
    doc = json.loads(probe(sim_node, "--json").stdout)
    verdicts = {v["check"]: v["status"] for v in doc["verdicts"]}
    assert verdicts["GPU-12"] == "pass" and "GPU-13" not in verdicts
    apply_fault(sim_node.dir, parse_fault_spec("dcgm-health-fail@gpu6"))
    proc = probe(sim_node)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.strip() == ("burnin: FAIL GPU-12 GPU-12 gpu6 Memory system Failure: GPU had an uncontained "
                                   f"error (XID 95) {HEALTH}")


def test_probe_never_runs_the_diag(sim_node: SimNode) -> None:
    apply_fault(sim_node.dir, parse_fault_spec("dcgm-diag-fail@gpu1"))  # only a diag would see it
    proc = probe(sim_node)
    assert proc.returncode == 0 and proc.stdout.startswith("burnin: OK ("), proc.stdout


def test_probe_with_a_silent_host_engine_is_incomplete(sim_node: SimNode) -> None:
    state = sim_node.state()
    state.host.dcgm.hostengine = False
    render_node(sim_node.dir, state)
    proc = probe(sim_node)
    assert proc.returncode == 2, proc.stdout
    assert proc.stdout.startswith("burnin: INCOMPLETE GPU-12 GPU-12 could not be measured: nv-hostengine is not "
                                  "answering (dcgmi health -c: Error: unable to establish a connection")


def test_probe_on_a_node_type_without_dcgm_skips_gpu12(tmp_path: Path) -> None:
    from burnin.topology.load import load_topology

    path = no_dcgm_topology(tmp_path)
    node, = build_rack(tmp_path / "rack", load_topology(path), ["sim01"], {})
    proc = probe(node, "--topology", str(path), "--json")
    doc = json.loads(proc.stdout)
    assert "GPU-12" not in {v["check"] for v in doc["verdicts"]}
    assert "GPU-12" not in probe(node, "--topology", str(path)).stdout
