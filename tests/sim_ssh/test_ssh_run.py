"""`burnin run --via ssh` end to end: same verdicts, gate and JUnit as `burnin run --sim`.

Done-when of the SSH dispatch: sim05 (pcie-x8) is the only rejected node, with
GPU-08; JUnit carries the same test ids and properties as the simulated run;
with sim06's sshd killed, sim06 is rejected as incomplete (unreachable) and
every other node still gets its verdicts.
"""

from __future__ import annotations

import json
import os
import signal
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from sshrack import HEALTHY, SIM_FAULTS, Rack, burnin

from burnin_lab import ssh as lab_ssh

pytestmark = pytest.mark.sim_ssh

HOSTS = "sim[01-08]"


def _junit(path: Path) -> dict[str, dict[str, str]]:
    """testcase name → (node, check, measured, expected, verdict): burnin's junit.xml keeps them in
    system-out (junit-10.xsd allows no properties in a test case); pytest's own --junitxml as properties."""
    from burnin.report.junit import read_cases

    cases = read_cases(path)
    for case in ET.parse(path).getroot().iter("testcase"):
        props = {p.get("name", ""): p.get("value", "") for p in case.iter("property")}
        if props:
            cases[case.get("name", "")] = props
    return cases


@pytest.fixture(scope="module")
def ssh_run(ssh_rack: Rack, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("ssh-run")
    proc = burnin("run", "--via", "ssh", "--inventory", str(ssh_rack.inventory), "--hosts", HOSTS,
                  "--out", str(out), "--timeout", "60")
    return {"proc": proc, "out": out}


@pytest.fixture(scope="module")
def sim_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("sim-run")
    args = ["run", "--sim", str(len(HEALTHY)), "--out", str(out)]
    for fault in SIM_FAULTS:
        args += ["--fault", fault]
    return {"proc": burnin(*args), "out": out}


def test_ssh_run_rejects_only_the_faulty_node(ssh_run: dict[str, Any]) -> None:
    proc = ssh_run["proc"]
    assert proc.returncode == 1, proc.stderr[-2000:]
    gate = json.loads((ssh_run["out"] / "gate.json").read_text())
    rejected = sorted(n for n, d in gate["nodes"].items() if not d["admitted"])
    assert rejected == ["sim05"], json.dumps(gate, indent=1)[:3000]
    assert "GPU-08" in gate["nodes"]["sim05"]["failed"]
    assert sorted(gate["nodes"]) == HEALTHY


def test_ssh_junit_matches_the_simulated_run(ssh_run: dict[str, Any], sim_run: dict[str, Any]) -> None:
    assert sim_run["proc"].returncode == 1, sim_run["proc"].stderr[-2000:]
    over_ssh = _junit(ssh_run["out"] / "junit.xml")
    simulated = _junit(sim_run["out"] / "junit.xml")
    assert any("test_pcie_link[sim05]" in case for case in over_ssh)
    assert sorted(over_ssh) == sorted(simulated)
    for case, props in simulated.items():
        assert {"node", "check"} <= set(props), case
        for key in ("node", "check", "measured", "expected", "verdict"):
            assert over_ssh[case].get(key) == props.get(key), (case, key, over_ssh[case], props)


def test_killed_sshd_makes_that_node_incomplete_only(ssh_rack: Rack, tmp_path: Path) -> None:
    entry = lab_ssh.read_lab(ssh_rack.state)["nodes"]["sim06"]
    os.kill(entry["pid"], signal.SIGKILL)  # as an operator would: the node's sshd dies
    try:
        deadline = time.monotonic() + 60  # a bound: SIGKILL is quick, but a loaded machine schedules late
        while lab_ssh.pid_alive(entry["pid"]) and time.monotonic() < deadline:
            time.sleep(0.02)
        proc = burnin("run", "--via", "ssh", "--inventory", str(ssh_rack.inventory), "--hosts", HOSTS,
                      "--out", str(tmp_path), "--timeout", "60")
    finally:
        lab_ssh.start_node(ssh_rack.state, "sim06")
    assert proc.returncode == 1, proc.stderr[-2000:]
    gate = json.loads((tmp_path / "gate.json").read_text())
    sim06 = gate["nodes"]["sim06"]
    assert not sim06["admitted"] and sim06["incomplete"] and not sim06["failed"]
    assert any("unreachable" in r and "connection refused" in r for r in sim06["reasons"]), sim06
    assert "GPU-08" in gate["nodes"]["sim05"]["failed"]
    admitted = sorted(n for n, d in gate["nodes"].items() if d["admitted"])
    assert admitted == [n for n in HEALTHY if n not in ("sim05", "sim06")]
    facts = {p.stem for p in (tmp_path / "facts").glob("sim*.json")}
    assert facts == set(HEALTHY)


def test_xdist_suites_over_ssh_facts_match_the_serial_run(ssh_run: dict[str, Any], tmp_path: Path) -> None:
    """`pytest -n 2` reads the gathered facts files: no test opens a connection, same verdicts."""
    import subprocess
    import sys

    from burnin.resources import suites_dir

    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(suites_dir() / "node"), "--rootdir", str(suites_dir()),
         "-c", str(suites_dir() / "pytest.ini"), "-p", "no:cacheprovider", "-n", "2", "-q",
         "--burnin-facts", str(ssh_run["out"] / "facts"), "--burnin-topology", "hgx-h100-8gpu",
         "--burnin-out", str(tmp_path), "--junitxml", str(tmp_path / "junit.xml"),
         "-o", "junit_family=xunit1"],
        capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode in (0, 1), proc.stdout[-2000:] + proc.stderr[-2000:]
    serial = _junit(ssh_run["out"] / "junit.xml")
    parallel = _junit(tmp_path / "junit.xml")
    assert sorted(parallel) == sorted(serial)
    for case, props in serial.items():
        assert parallel[case].get("verdict") == props.get("verdict"), case
