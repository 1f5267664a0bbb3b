"""IB-05 (subnet manager) and INV-10 (host software manifest) end to end.

`burnin run --sim` with `sm-unreachable`, `sm-split` and `kernel-drift` rejects exactly the faulted
nodes, each with its measured-vs-expected reason, and admits the healthy ones whole; `burnin probe`
judges both checks on the node itself. The real collector reads the simulated sysfs and runs the
`ofed_info` and `dcgmi` shims (documented output shapes: ../shared holds no real capture of either).
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
from burnin.topology.model import Topology

UNSWEPT = "IB-05 mlx5_3 port 1 LID 0x0, SM LID 0x0 (expected a subnet manager: LID != 0, SM LID != 0)"
SPLIT = "IB-05 SM LID differs: mlx5_0..6 0x1, mlx5_7 0x5 (expected one subnet manager for all compute ports)"
DRIFT = "INV-10 kernel 5.15.0-91-generic (expected 5.15.0-112-generic)"
# node -> (fault, failed, incomplete, the reason of the fault's check)
PLAN: dict[str, tuple[str, set[str], set[str], str]] = {
    # a port no SM swept stays INIT: IB-01 fails it too; IB-02 and IB-09 judge an ACTIVE port only
    "sim02": ("sm-unreachable@mlx5_3", {"IB-01", "IB-05"}, {"IB-02", "IB-09"}, UNSWEPT),
    "sim03": ("sm-split@mlx5_7", {"IB-05"}, set(), SPLIT),
    # INV-11 too: the other four nodes run the golden kernel
    "sim04": ("kernel-drift", {"INV-10", "INV-11"}, set(), DRIFT),
}


def burnin(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "burnin.cli.main", *args], capture_output=True, text=True,
                          timeout=300, check=False, env=env)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("subnet-software")
    args = ["run", "--sim", "5", "--out", str(out)]
    for node, (fault, *_) in PLAN.items():
        args += ["--fault", f"{node}:{fault}"]
    proc = burnin(*args)
    gate = json.loads((out / "gate.json").read_text()) if (out / "gate.json").exists() else None
    verdicts = json.loads((out / "verdicts.json").read_text()) if (out / "verdicts.json").exists() else []
    return {"proc": proc, "gate": gate, "verdicts": verdicts}


def test_the_run_rejects_exactly_the_faulted_nodes(run: dict[str, Any]) -> None:
    proc, gate = run["proc"], run["gate"]
    assert proc.returncode == 1, proc.stdout + proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert gate["rejected"] == "sim[02-04]" and gate["admitted"] == "sim[01,05]"
    for node in ("sim01", "sim05"):
        assert gate["nodes"][node] == {"admitted": True, "failed": [], "incomplete": [], "reasons": []}


@pytest.mark.parametrize("node", sorted(PLAN))
def test_each_fault_gives_its_check_and_reason_on_its_node(run: dict[str, Any], node: str) -> None:
    _fault, failed, unmeasured, reason = PLAN[node]
    decision = run["gate"]["nodes"][node]
    assert not decision["admitted"]
    assert set(decision["failed"]) == failed, decision
    assert set(decision["incomplete"]) == unmeasured, decision
    check_id = reason.split()[0]
    assert next(r for r in decision["reasons"] if r.startswith(check_id + " ")) == reason
    assert f"REJECTED {node}: failed " in run["proc"].stdout


def test_healthy_nodes_pass_both_checks_with_what_they_measured(run: dict[str, Any]) -> None:
    mine = {(v["node"], v["check"]): v for v in run["verdicts"] if v["check"] in ("IB-05", "INV-10")}
    for node in ("sim01", "sim05"):
        assert mine[(node, "IB-05")]["status"] == "pass"
        assert mine[(node, "IB-05")]["measured"] == "8 compute ports with a LID, SM LID 0x1"
        assert mine[(node, "INV-10")]["status"] == "pass"
        assert mine[(node, "INV-10")]["measured"].startswith("kernel 5.15.0-112-generic, OFED MLNX_OFED_LINUX-24.04")
    assert mine[("sim04", "IB-05")]["status"] == "pass"  # the kernel moved, the fabric did not
    assert mine[("sim03", "INV-10")]["status"] == "pass"


def test_a_topology_without_a_manifest_stands_inv10_aside(tmp_path: Path) -> None:
    text = (topologies_dir() / "hgx-h100-8gpu.yaml").read_text()
    bare = tmp_path / "bare.yaml"
    bare.write_text(text[:text.index("software:\n")] + text[text.index("numa:\n"):])
    out = tmp_path / "run"
    proc = burnin("run", "--sim", "3", "--topology", str(bare), "--fault", "sim02:kernel-drift", "--out", str(out))
    assert proc.returncode == 1, proc.stdout + proc.stderr[-2000:]
    gate = json.loads((out / "gate.json").read_text())
    # without a manifest only the fleet comparison (INV-11) names the drifted kernel: the other two agree
    assert gate["admitted"] == "sim[01,03]" and gate["nodes"]["sim02"]["failed"] == ["INV-11"]
    assert gate["nodes"]["sim02"]["reasons"][0].startswith(
        "INV-11 kernel 5.15.0-91-generic (fleet: 5.15.0-112-generic on 2 of 3 nodes)")
    inv10 = [v for v in json.loads((out / "verdicts.json").read_text()) if v["check"] == "INV-10"]
    assert {v["status"] for v in inv10} == {"not-applicable"}
    assert "declares no software manifest" in inv10[0]["reason"]


# ------------------------------------------------------------------ the probe


@pytest.fixture
def sim_node(tmp_path: Path, h100_topology: Topology) -> SimNode:
    return build_rack(tmp_path / "rack", h100_topology, ["sim01"], {})[0]


def probe(node: SimNode, *args: str) -> subprocess.CompletedProcess[str]:
    return burnin("probe", *args, env={**os.environ, **node.environment()})


def test_the_probe_judges_both_on_a_healthy_node(sim_node: SimNode) -> None:
    proc = probe(sim_node, "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    verdicts = {v["check"]: v for v in json.loads(proc.stdout)["verdicts"]}
    assert verdicts["IB-05"]["status"] == verdicts["INV-10"]["status"] == "pass"


@pytest.mark.parametrize(("fault", "line"), [
    ("sm-split@mlx5_7", f"burnin: FAIL IB-05 {SPLIT}"),
    ("kernel-drift", f"burnin: FAIL INV-10 {DRIFT}"),
])
def test_the_probe_fails_the_faulted_node_with_the_reason(sim_node: SimNode, fault: str, line: str) -> None:
    apply_fault(sim_node.dir, parse_fault_spec(fault))
    proc = probe(sim_node)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.strip() == line


def test_the_probe_names_a_port_no_sm_swept(sim_node: SimNode) -> None:
    apply_fault(sim_node.dir, parse_fault_spec("sm-unreachable@mlx5_3"))
    proc = probe(sim_node)
    assert proc.returncode == 1
    assert proc.stdout.startswith("burnin: FAIL IB-01,IB-05 ") and UNSWEPT in proc.stdout
