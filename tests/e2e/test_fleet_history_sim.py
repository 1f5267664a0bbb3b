"""INV-11 and `burnin history` end to end on simulated racks.

A node whose storage HCAs were all flashed apart passes every per-node check (INV-09 sees them agree),
so only INV-11 names it (against the storage firmware the topology names; the run's fleet counts are kept in
the facts); a healthy rack passes whole, at 8 nodes and at 2.
`burnin history` then reads the two runs' output folders: the node failed once, for INV-11, and was
admitted again by the next run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

FLEET_REASON = ("INV-11 storage HCA firmware 32.41.1000 (not the topology's) "
                "(expected storage HCA firmware 32.38.3056 as topology hgx-h100-8gpu names it)")


def burnin(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "burnin.cli.main", *args], capture_output=True, text=True,
                          timeout=300, check=False)


def _gate(out: Path) -> dict[str, Any]:
    gate: dict[str, Any] = json.loads((out / "gate.json").read_text(encoding="utf-8"))
    return gate


def _fleet_verdicts(out: Path) -> dict[str, dict[str, Any]]:
    verdicts = json.loads((out / "verdicts.json").read_text(encoding="utf-8"))
    return {v["node"]: v for v in verdicts if v["check"] == "INV-11"}


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, subprocess.CompletedProcess[str]]:
    """A run with sim05's storage firmware drifted, then a healthy run of the same rack."""
    base = tmp_path_factory.mktemp("fleet")
    drifted, healthy = base / "reports" / "1-drifted", base / "reports" / "2-healthy"
    proc = burnin("run", "--sim", "8", "--fault", "sim05:storage-fw-drift", "--out", str(drifted))
    again = burnin("run", "--sim", "8", "--out", str(healthy))
    assert again.returncode == 0, again.stdout + again.stderr
    return drifted, healthy, proc


def test_only_the_fleet_comparison_names_the_drifted_node(two_runs: tuple[Path, Path, Any]) -> None:
    drifted, _, proc = two_runs
    assert proc.returncode == 1, proc.stdout + proc.stderr
    gate = _gate(drifted)
    assert gate["rejected"] == "sim05" and gate["admitted"] == "sim[01-04,06-08]"
    assert gate["nodes"]["sim05"] == {"admitted": False, "failed": ["INV-11"], "incomplete": [],
                                      "reasons": [FLEET_REASON]}
    assert FLEET_REASON in proc.stdout
    statuses = {node: v["status"] for node, v in _fleet_verdicts(drifted).items()}
    assert statuses == {f"sim0{i}": "fail" if i == 5 else "pass" for i in range(1, 9)}
    facts = json.loads((drifted / "facts" / "sim01.json").read_text(encoding="utf-8"))
    assert facts["fleet"]["values"]["storage_hca_firmware"] == {
        "32.38.3056": {"count": 7}, "32.41.1000": {"count": 1, "nodes": "sim05"}}


def test_a_healthy_rack_passes_the_fleet_comparison_whole(two_runs: tuple[Path, Path, Any]) -> None:
    _, healthy, _ = two_runs
    assert _gate(healthy)["rejected"] == ""
    verdicts = _fleet_verdicts(healthy)
    assert {v["status"] for v in verdicts.values()} == {"pass"} and len(verdicts) == 8
    assert verdicts["sim01"]["reason"].endswith("the fleet's on every field (8 hgx-h100-8gpu nodes in the run)")


def test_two_healthy_nodes_pass(tmp_path: Path) -> None:
    proc = burnin("run", "--sim", "2", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [v["status"] for v in _fleet_verdicts(tmp_path).values()] == ["pass", "pass"]


def test_history_of_the_two_runs(two_runs: tuple[Path, Path, Any], tmp_path: Path) -> None:
    drifted, healthy, _ = two_runs
    stopped = drifted.parent / "3-stopped"
    stopped.mkdir(exist_ok=True)
    (stopped / "run.json").write_text("{}", encoding="utf-8")
    proc = burnin("history", str(drifted.parent), "--json", str(tmp_path / "history.json"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"skipped {stopped}: no gate.json" in proc.stderr
    doc = json.loads((tmp_path / "history.json").read_text(encoding="utf-8"))
    assert doc["fleet"]["nodes"] == 8 and doc["fleet"]["runs"] == 2
    assert doc["fleet"]["failures"] == 1 and doc["fleet"]["failures_by_check"] == {"INV-11": 1}
    assert doc["fleet"]["out_of_pool"] == [] and doc["fleet"]["lemons"] == []
    sim05 = doc["nodes"]["sim05"]
    outage, = sim05["outages"]
    assert outage["failed"] == ["INV-11"] and outage["reason"] == FLEET_REASON
    assert outage["start"] == _gate(drifted)["created"] and outage["end"] == _gate(healthy)["created"]
    assert outage["origins"] == [str(drifted)]
    assert sim05["mttr_s"] == outage["duration_s"] >= 0
    assert all(not doc["nodes"][f"sim0{i}"]["outages"] for i in (1, 2, 3, 4, 6, 7, 8))
    assert "│ sim05 " in proc.stdout and "fleet: 1 failures attributed (INV-11 1)" in proc.stdout
    assert "out of the pool now: none" in proc.stdout
