"""STO-02 runtime evidence end to end: `burnin run --sim 4 --suite fabric --fault sim02:nccl-hca-leak`.

The fabric phase's multi-node runs print the simulated NCCL's INFO lines of every
member; sim02's nccl.conf lets NCCL open its BlueField's RDMA device when a job
leaves NCCL_IB_HCA to the node, and NCCL's own ``NET/IB : Using`` line says so.
STO-02 in the fabric suite rejects sim02 quoting that line; the other members
of the same jobs are not charged with it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

LEAK = "NCCL with the node's own configuration opened storage device mlx5_8 (enp41s0f0np0): \"sim02:"


@pytest.fixture(scope="module")
def leak_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("sto02-runtime") / "run"
    env = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_")}  # the nodes', not the tester's
    proc = subprocess.run([sys.executable, "-m", "burnin.cli.main", "run", "--sim", "4", "--suite", "fabric",
                           "--fault", "sim02:nccl-hca-leak", "--out", str(out)],
                          capture_output=True, text=True, timeout=300, check=False, env=env)
    gate = json.loads((out / "gate.json").read_text()) if (out / "gate.json").exists() else {}
    verdicts = json.loads((out / "verdicts.json").read_text()) if (out / "verdicts.json").exists() else []
    return {"proc": proc, "out": out, "gate": gate, "verdicts": verdicts}


def sto02(run: dict[str, Any], node: str) -> dict[str, Any]:
    found, = [v for v in run["verdicts"] if v["node"] == node and v["check"] == "STO-02"]
    return dict(found)


def test_the_leaking_node_is_rejected_by_sto02_from_nccls_own_line(leak_run: dict[str, Any]) -> None:
    proc, gate = leak_run["proc"], leak_run["gate"]
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert gate["rejected"] == "sim02" and gate["admitted"] == "sim[01,03-04]"
    sim02 = gate["nodes"]["sim02"]
    assert (sim02["failed"], sim02["incomplete"]) == (["STO-02"], [])
    reason, = sim02["reasons"]
    assert LEAK in reason and "NCCL INFO NET/IB : Using [0]mlx5_0:1/IB" in reason and "[8]mlx5_8:1/RoCE" in reason
    assert "/etc/nccl.conf NCCL_IB_HCA==mlx5_0:1," in reason  # and the static configuration that caused it
    assert "REJECTED sim02: failed STO-02" in proc.stdout


def test_the_other_members_pass_sto02_on_their_own_lines(leak_run: dict[str, Any]) -> None:
    for node in ("sim01", "sim03", "sim04"):
        assert leak_run["gate"]["nodes"][node]["admitted"], node
        verdict = sto02(leak_run, node)
        assert verdict["status"] == "pass" and "NCCL opened compute HCAs only in 2 runs" in verdict["measured"]
        facts = json.loads((leak_run["out"] / "facts" / f"{node}.json").read_text())
        runs = facts["nccl_runtime"]["runs"]
        assert [(r["run"], r["host"], r["status"]) for r in runs] == [("group", node, "read"),
                                                                      ("node-config", node, "read")]
        assert "mlx5_8" not in json.dumps(runs)


def test_the_evidence_is_in_the_facts_and_the_fabric_suites_junit(leak_run: dict[str, Any]) -> None:
    facts = json.loads((leak_run["out"] / "facts" / "sim02.json").read_text())
    group, node_config = facts["nccl_runtime"]["runs"]
    assert "mlx5_8" not in json.dumps(group["devices"])  # burnin's exact NCCL_IB_HCA wins over nccl.conf
    assert node_config["ib_hca"] is None and node_config["devices"]["IB"][-1] == {
        "index": 8, "name": "mlx5_8", "port": 1, "transport": "RoCE"}
    assert node_config["lines"]["NET/IB"].startswith("sim02:")
    fabric = json.loads((leak_run["out"] / "fabric.json").read_text())
    assert sorted(fabric["nccl_runtime"]) == ["sim01", "sim02", "sim03", "sim04"]
    junit = (leak_run["out"] / "junit.xml").read_text()
    assert 'name="test_nccl_opened_compute_hcas_only[sim02]"' in junit
