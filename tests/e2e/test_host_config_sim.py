"""TOP-06, 07, 09, 10 end to end: the real collector, checks, suite and gate on simulated racks.

Each fault rejects exactly its node with its check id and a measured-vs-expected reason;
the health probe catches them too (they are fast checks).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from burnin.sim import FAULTS, SimNode, apply_fault, build_rack, parse_fault_spec
from burnin.topology.model import Topology

# fault -> what the reason must say it measured
CASES = {
    "governor-powersave": "TOP-06 governor powersave on CPUs 0-223 (224/224 online) (expected governor performance",
    "hugepages-reserved": "TOP-07 static hugepages 32 GiB (16384 x 2048 kB) (expected THP always or madvise; "
                          "static hugepages 0 GiB)",
    "dimm-missing": "TOP-09 MemTotal 1951.0 GiB; numa1 MemTotal 943.5 GiB (6.4% below the largest node) "
                    "(expected MemTotal 1995..2048 GiB",
    "nvme-missing": "TOP-10 NVMe 9 on the bus (expected 8 GPUs, 4 NVSwitches, 8 compute HCAs, 2 storage NICs, "
                    "10 NVMe)",
}


def burnin(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "burnin.cli.main", *args], capture_output=True, text=True,
                          timeout=300, check=False, env=env)


@pytest.mark.parametrize("fault", sorted(CASES))
def test_the_fault_rejects_exactly_its_node(tmp_path: Path, fault: str) -> None:
    check_id = FAULTS[fault].check_id
    proc = burnin("run", "--sim", "4", "--fault", f"sim02:{fault}", "--out", str(tmp_path))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    gate = json.loads((tmp_path / "gate.json").read_text())
    assert gate["rejected"] == "sim02" and gate["admitted"] == "sim[01,03-04]"
    decision = gate["nodes"]["sim02"]
    assert decision["failed"] == [check_id] and decision["incomplete"] == [], decision
    assert decision["reasons"][0].startswith(CASES[fault]), decision["reasons"]
    assert f"REJECTED sim02: failed {check_id}" in proc.stdout


def test_the_faults_are_listed_with_their_checks() -> None:
    out = burnin("faults").stdout
    for fault in CASES:
        line = next(line for line in out.splitlines() if line.startswith(fault + " "))
        assert FAULTS[fault].check_id in line


@pytest.fixture
def sim_node(tmp_path: Path, h100_topology: Topology) -> SimNode:
    return build_rack(tmp_path / "rack", h100_topology, ["sim01"], {})[0]


def probe(node: SimNode, *args: str) -> subprocess.CompletedProcess[str]:
    return burnin("probe", *args, env={**os.environ, **node.environment()})


def test_the_probe_judges_them_and_catches_a_governor_change_on_a_live_node(sim_node: SimNode) -> None:
    healthy = json.loads(probe(sim_node, "--json").stdout)
    judged = {v["check"]: v["status"] for v in healthy["verdicts"]}
    assert {judged[c] for c in ("TOP-06", "TOP-07", "TOP-09", "TOP-10")} == {"pass"}, judged
    apply_fault(sim_node.dir, parse_fault_spec("governor-powersave"))
    proc = probe(sim_node)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.startswith("burnin: FAIL TOP-06 ") and "powersave" in proc.stdout
