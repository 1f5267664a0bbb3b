"""Storage-fabric isolation end to end (issue 12): `burnin run --sim` and `burnin probe` on simulated nodes.

The real collector, checks, node suite and gate: each storage fault rejects
exactly its node with exactly its STO check; a healthy rack passes every STO
check with nothing incomplete; a node type without a storage fabric reports
the STO checks as not applicable, by its topology's own declaration.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from burnin.checks.storage import STO_CHECKS
from burnin.resources import topologies_dir
from burnin.sim import SimNode, apply_fault, build_rack, parse_fault_spec
from burnin.topology.model import Topology


def burnin(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_")}  # the node's, not the tester's
    return subprocess.run([sys.executable, "-m", "burnin.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, check=False, env={**full, **(env or {})})


def run_sim(out: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any], list[dict[str, Any]]]:
    proc = burnin("run", *args, "--out", str(out))
    gate = json.loads((out / "gate.json").read_text()) if (out / "gate.json").exists() else {}
    verdicts = json.loads((out / "verdicts.json").read_text()) if (out / "verdicts.json").exists() else []
    return proc, gate, verdicts


def sto_verdicts(verdicts: list[dict[str, Any]], node: str) -> dict[str, dict[str, Any]]:
    return {v["check"]: v for v in verdicts if v["node"] == node and v["check"].startswith("STO")}


@pytest.fixture(scope="module")
def done_when(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], dict[str, Any],
                                                                   list[dict[str, Any]]]:
    out = tmp_path_factory.mktemp("sto-done-when")
    return run_sim(out, "--sim", "8", "--fault", "sim02:storage-route-via-ib", "--fault", "sim05:nccl-hca-leak",
                   "--fault", "sim07:storage-mtu-1500")


def test_done_when_rejects_exactly_the_three_faulted_nodes(done_when: Any) -> None:
    proc, gate, _ = done_when
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert gate["rejected"] == "sim[02,05,07]" and gate["admitted"] == "sim[01,03-04,06,08]"
    nodes = gate["nodes"]
    assert {n: (d["failed"], d["incomplete"]) for n, d in nodes.items() if not d["admitted"]} == {
        "sim02": (["STO-01"], []), "sim05": (["STO-02"], []), "sim07": (["STO-04"], [])}
    sim02, = nodes["sim02"]["reasons"]
    assert sim02 == ("STO-01 10.20.0.10 routed via ibp79s0 (IPoIB, mlx5_2) "
                     "(expected a BlueField netdev: enp41s0f0np0/enp177s0f0np0)")
    sim05, = nodes["sim05"]["reasons"]
    assert sim05.startswith("STO-02 /etc/nccl.conf NCCL_IB_HCA=") and "selects storage device mlx5_8 (enp41s0f0np0)" \
        in sim05
    sim07, = nodes["sim07"]["reasons"]
    assert sim07 == "STO-04 enp41s0f0np0 MTU 1500 (expected MTU 9000 on every BlueField netdev)"
    assert "REJECTED sim02: failed STO-01" in proc.stdout and "rejected: sim[02,05,07] (3)" in proc.stdout


def test_done_when_healthy_nodes_pass_every_sto_check(done_when: Any) -> None:
    _, gate, verdicts = done_when
    for node in ("sim01", "sim03", "sim04", "sim06", "sim08"):
        assert gate["nodes"][node] == {"admitted": True, "failed": [], "incomplete": [], "reasons": []}, node
        found = sto_verdicts(verdicts, node)
        assert set(found) == set(STO_CHECKS) and {v["status"] for v in found.values()} == {"pass"}, found


def test_done_when_faulted_nodes_pass_their_other_sto_checks(done_when: Any) -> None:
    _, _, verdicts = done_when
    for node, check in (("sim02", "STO-01"), ("sim05", "STO-02"), ("sim07", "STO-04")):
        statuses = {c: v["status"] for c, v in sto_verdicts(verdicts, node).items()}
        assert statuses == {c: ("fail" if c == check else "pass") for c in STO_CHECKS}, node


def test_the_other_storage_faults_are_caught_by_their_checks(tmp_path: Path) -> None:
    proc, gate, _ = run_sim(tmp_path, "--sim", "4", "--fault", "sim02:bf-nic-mode", "--fault", "sim03:qos-pfc-off",
                            "--fault", "sim04:arp-leak")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert gate["rejected"] == "sim[02-04]" and gate["admitted"] == "sim01"
    found = {n: (d["failed"], d["incomplete"]) for n, d in gate["nodes"].items() if not d["admitted"]}
    assert found == {"sim02": (["STO-06"], []), "sim03": (["STO-05"], []), "sim04": (["STO-07"], [])}
    assert "enp41s0f0np0 0000:29:00.0 NIC mode" in gate["nodes"]["sim02"]["reasons"][0]
    assert "enp41s0f0np0 trust dscp, PFC on none, ECN on 3" in gate["nodes"]["sim03"]["reasons"][0]
    assert "arp_ignore=0 arp_announce=0" in gate["nodes"]["sim04"]["reasons"][0]


def _without_storage(tmp_path: Path) -> Path:
    text = (topologies_dir() / "hgx-h100-8gpu.yaml").read_text()
    # the storage section, up to the next top-level key or comment (the software section must stay)
    text = re.sub(r"(?ms)^storage:.*?(?=^[a-z#])", "", text).replace("name: hgx-h100-8gpu", "name: h100-no-storage")
    assert "storage:" not in text
    path = tmp_path / "h100-no-storage.yaml"
    path.write_text(text)
    return path


def test_node_type_without_storage_fabric_stands_aside(tmp_path: Path) -> None:
    topology = _without_storage(tmp_path)
    proc, gate, verdicts = run_sim(tmp_path / "out", "--sim", "2", "--topology", str(topology))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for node in ("sim01", "sim02"):
        decision = gate["nodes"][node]
        assert decision["admitted"] and decision["failed"] == [] and decision["incomplete"] == []
        assert set(decision["not_applicable"]) == set(STO_CHECKS)
        for reason in decision["not_applicable"].values():
            assert "topology h100-no-storage declares no storage fabric" in reason
        assert {v["status"] for v in sto_verdicts(verdicts, node).values()} == {"not-applicable"}
    junit = (tmp_path / "out" / "junit.xml").read_text()
    assert junit.count("declares no storage fabric") >= 2 * len(STO_CHECKS)


# ------------------------------------------------------------------ the health probe


@pytest.fixture
def probe_node(tmp_path: Path, h100_topology: Topology) -> SimNode:
    return build_rack(tmp_path / "rack", h100_topology, ["sim01"], {})[0]


def probe(node: SimNode, *args: str) -> subprocess.CompletedProcess[str]:
    return burnin("probe", *args, env=node.environment(), timeout=60)


def test_probe_judges_the_cheap_sto_checks(probe_node: SimNode) -> None:
    doc = json.loads(probe(probe_node, "--json").stdout)
    statuses = {v["check"]: v["status"] for v in doc["verdicts"] if v["check"].startswith("STO")}
    assert statuses == {"STO-01": "pass", "STO-02": "pass", "STO-04": "pass", "STO-07": "pass"}
    apply_fault(probe_node.dir, parse_fault_spec("storage-route-via-ib"))
    proc = probe(probe_node)
    assert proc.returncode == 1
    assert proc.stdout.startswith("burnin: FAIL STO-01 ") and "10.20.0.10 routed via ibp79s0 (IPoIB, mlx5_2)" in \
        proc.stdout


def test_probe_on_a_node_type_without_storage_runs_no_sto_check(probe_node: SimNode, tmp_path: Path) -> None:
    proc = probe(probe_node, "--json", "--topology", str(_without_storage(tmp_path)))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not [v for v in json.loads(proc.stdout)["verdicts"] if v["check"].startswith("STO")]
