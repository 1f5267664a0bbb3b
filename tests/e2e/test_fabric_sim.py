"""`burnin run --sim N --suite fabric`: nccl-tests and nvbandwidth shims, localisation and the gate, end to end.

Local dispatch: single-node runs on each simulated node, multi-node runs as
simulated jobs (one local process per job, its members named in the
environment). One faulted rack holds every fabric fault; each must be caught by
its check on its node only, and the healthy nodes must be admitted.
"""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from burnin.sim import FAULTS

PLAN = {"sim02": "nvlink-down", "sim03": "nccl-wrong", "sim04": "slow-hca", "sim05": "nccl-hang",
        "sim06": "slow-nvlink"}
HEALTHY = ["sim01", "sim07", "sim08"]


def burnin(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "burnin.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, check=False)


def properties(junit: Path) -> dict[str, dict[str, str]]:
    cases = {}
    for case in ET.parse(junit).iter("testcase"):
        cases[case.get("name", "")] = {p.get("name", ""): p.get("value", "") for p in case.iter("property")}
    return cases


@pytest.fixture(scope="module")
def faulted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("fabric")
    config = out / "fabric.yaml"
    config.write_text("timeout_s: 3\n")  # the hung node costs 3 s per launch, not 60
    args = ["run", "--sim", "8", "--suite", "fabric", "--fabric-config", str(config), "--out", str(out / "run")]
    for node, fault in PLAN.items():
        args += ["--fault", f"{node}:{fault}"]
    proc = burnin(*args)
    gate_file = out / "run" / "gate.json"
    gate = json.loads(gate_file.read_text()) if gate_file.exists() else None
    return {"proc": proc, "gate": gate, "out": out / "run"}


def test_faulted_rack_rejects_exactly_the_faulted_nodes(faulted: dict[str, Any]) -> None:
    proc, gate = faulted["proc"], faulted["gate"]
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert gate["rejected"] == "sim[02-06]" and gate["admitted"] == "sim[01,07-08]", gate
    for node in HEALTHY:
        assert gate["nodes"][node] == {"admitted": True, "failed": [], "incomplete": [], "reasons": []}


def test_the_plan_covers_every_fabric_fault() -> None:
    assert {name for name, spec in FAULTS.items() if spec.suite == "fabric"} <= set(PLAN.values())


@pytest.mark.parametrize(("node", "fault"), sorted((n, f) for n, f in PLAN.items() if FAULTS[f].suite == "fabric"))
def test_each_fabric_fault_is_caught_by_its_check(faulted: dict[str, Any], node: str, fault: str) -> None:
    spec = FAULTS[fault]
    decision = faulted["gate"]["nodes"][node]
    assert not decision["admitted"]
    assert spec.check_id in decision[{"fail": "failed", "incomplete": "incomplete"}[spec.outcome]], decision


def test_nvlink_down_fails_nccl_01(faulted: dict[str, Any]) -> None:
    decision = faulted["gate"]["nodes"]["sim02"]
    assert decision["failed"] == ["NCCL-01"]
    reason = decision["reasons"][0]
    assert "GB/s at 8 GiB" in reason and ">= 440 GB/s" in reason


def test_nccl_wrong_fails_nccl_05_and_is_named(faulted: dict[str, Any]) -> None:
    decision = faulted["gate"]["nodes"]["sim03"]
    assert "NCCL-05" in decision["failed"] and "NCCL-04" in decision["failed"]
    assert any(r.startswith("NCCL-05") and "wrong" in r for r in decision["reasons"])


def test_slow_hca_named_by_nccl_04_with_the_hca(faulted: dict[str, Any]) -> None:
    decision = faulted["gate"]["nodes"]["sim04"]
    assert set(decision["failed"]) == {"NCCL-03", "NCCL-04"} and decision["incomplete"] == []
    reason = next(r for r in decision["reasons"] if r.startswith("NCCL-04"))
    assert "slow HCA mlx5_2" in reason and "sim04+" in reason


def test_nccl_hang_is_incomplete_with_the_last_output_lines(faulted: dict[str, Any]) -> None:
    decision = faulted["gate"]["nodes"]["sim05"]
    assert "NCCL-01" in decision["incomplete"] and decision["failed"] == []
    reason = next(r for r in decision["reasons"] if r.startswith("NCCL-01"))
    assert "hung on sim05" in reason and "no result within 3 s" in reason
    assert "last output:" in reason and "float sum" in reason  # the rows it printed before it stopped


def test_slow_nvlink_fails_nvl_01(faulted: dict[str, Any]) -> None:
    decision = faulted["gate"]["nodes"]["sim06"]
    assert "NVL-01" in decision["failed"] and "NCCL-01" in decision["failed"]
    assert any(r.startswith("NVL-01") and "gpu3" in r for r in decision["reasons"])


def test_junit_names_the_node_and_carries_measured_values(faulted: dict[str, Any]) -> None:
    cases = properties(faulted["out"] / "junit.xml")
    case = cases["test_nccl_single_node_all_reduce[sim02]"]
    assert case["node"] == "sim02" and case["check"] == "NCCL-01" and case["verdict"] == "fail"
    assert "GB/s" in case["measured"] and ">= 440" in case["expected"]
    for name, props in cases.items():
        assert name.endswith(f"[{props['node']}]"), name
        assert {"node", "check"} <= set(props)


def test_fabric_json_and_command_log(faulted: dict[str, Any]) -> None:
    out = faulted["out"]
    doc = json.loads((out / "fabric.json").read_text())
    assert "sim05" in doc["excluded"]
    assert set(doc["localization"]["named"]) >= {"sim03", "sim04"}
    assert doc["localization"]["rounds"] >= 3 and doc["regroup_passed"]
    facts = json.loads((out / "facts" / "sim04.json").read_text())
    assert facts["fabric"]["multi"]["localization"]["slow_hcas"][0]["hca"] == "mlx5_2"
    log = (out / "fabric-commands.log").read_text()
    assert "NCCL_IB_HCA==mlx5_0:1," in log and "NCCL_IB_HCA==mlx5_2:1" in log and "mlx5_8" not in log


def test_healthy_rack_passes_with_localize_and_every_collective(tmp_path: Path) -> None:
    config = tmp_path / "fabric.yaml"
    config.write_text("collectives: [all_reduce, all_gather, reduce_scatter, alltoall, sendrecv]\n")
    out = tmp_path / "run"
    proc = burnin("run", "--sim", "4", "--suite", "fabric", "--localize", "--fabric-config", str(config),
                  "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    gate = json.loads((out / "gate.json").read_text())
    assert gate["admitted"] == "sim[01-04]"
    doc = json.loads((out / "fabric.json").read_text())
    assert doc["group_passed"] and doc["localization"]["rounds"] == 1 and doc["localization"]["named"] == []
    assert set(doc["single"]["sim01"]) == {"all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv"}
    cases = properties(out / "junit.xml")
    assert len(cases) == 7 * 4
    assert all(p["verdict"] == "pass" for p in cases.values())
    assert "all_gather" in cases["test_nccl_single_node_other_collectives[sim02]"]["measured"]


def test_a_single_node_skips_the_multi_node_checks(tmp_path: Path) -> None:
    proc = burnin("run", "--sim", "1", "--suite", "fabric", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    verdicts = json.loads((tmp_path / "verdicts.json").read_text())
    checks = {v["check"] for v in verdicts if v["status"] != "not-applicable"}
    assert checks == {"NCCL-01", "NCCL-05", "NVL-01", "NVL-02"}
    # the multi-node checks stand aside explicitly, with the reason (burnin.suite.not_applicable)
    aside = {v["check"]: v["reason"] for v in verdicts if v["status"] == "not-applicable"}
    assert {"NCCL-03", "NCCL-04"} <= set(aside) and all(aside.values()), aside


def test_other_collectives_and_host_bandwidth_catch_their_faults(tmp_path: Path) -> None:
    """NCCL-02 (all_gather & co.) and NVL-02 (host<->device) each catch a fault, on that node only."""
    config = tmp_path / "fabric.yaml"
    config.write_text("collectives: [all_reduce, all_gather, reduce_scatter]\n")
    out = tmp_path / "run"
    proc = burnin("run", "--sim", "4", "--suite", "fabric", "--fabric-config", str(config), "--out", str(out),
                  "--fault", "sim02:slow-nvlink", "--fault", "sim03:pcie-x8")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    gate = json.loads((out / "gate.json").read_text())
    assert gate["rejected"] == "sim[02-03]", gate
    assert "NCCL-02" in gate["nodes"]["sim02"]["failed"]
    assert "NVL-02" in gate["nodes"]["sim03"]["failed"]
    reason = next(r for r in gate["nodes"]["sim03"]["reasons"] if r.startswith("NVL-02"))
    assert "expected" in reason
    for node in ("sim01", "sim04"):
        assert gate["nodes"][node]["admitted"]
