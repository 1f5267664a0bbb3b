"""`burnin run --sim`: no node joins the pool without a verdict on every check (issue 9, items 1, 5, 6, 7).

Each run goes through the real command line in a subprocess: collector,
checks, suites under pytest, the plugin and the gate.
"""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest


def burnin(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "burnin.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, check=False)


def _gate(out: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((out / "gate.json").read_text())
    return doc


def _site(tmp_path: Path, source: str, name: str = "site") -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "test_site.py").write_text(source)
    return folder


SKIPS_AND_XFAILS = '''
import pytest

@pytest.mark.check("SITE-01")
def test_license_server(node):
    if node == "sim02":
        pytest.skip("license server unreachable from this node")

@pytest.mark.check("SITE-02")
def test_known_issue(node):
    if node == "sim03":
        pytest.xfail("vendor bug 1234")
'''


def test_a_site_test_that_skips_or_xfails_keeps_that_node_out(tmp_path: Path) -> None:
    site = _site(tmp_path, SKIPS_AND_XFAILS)
    out = tmp_path / "out"
    proc = burnin("run", "--sim", "3", "--suite", "node", "--suite", str(site), "--out", str(out))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    gate = _gate(out)
    assert gate["admitted"] == "sim01" and gate["rejected"] == "sim[02-03]"
    assert gate["nodes"]["sim02"]["incomplete"] == ["SITE-01"] and gate["nodes"]["sim02"]["failed"] == []
    assert gate["nodes"]["sim02"]["reasons"][0].startswith(
        "SITE-01 skipped: license server unreachable from this node")
    assert gate["nodes"]["sim03"]["incomplete"] == ["SITE-02"]
    assert gate["nodes"]["sim03"]["reasons"] == ["SITE-02 xfail is not a verdict (xfailed: vendor bug 1234)"]
    assert "REJECTED sim02: incomplete SITE-01" in proc.stdout


HEALTHY_SITE = '''
import pytest
from burnin.suite import not_applicable

@pytest.mark.check("SITE-10")
def test_numa_balancing_off(node, facts):
    assert facts.kernel()["numa_balancing"] == 0

@pytest.mark.check("SITE-11")
def test_storage_fabric(node, topology):
    not_applicable(f"{topology.name} has no storage fabric")
'''


def test_a_healthy_rack_with_a_passing_site_suite_is_admitted_whole(tmp_path: Path) -> None:
    site = _site(tmp_path, HEALTHY_SITE)
    out = tmp_path / "out"
    proc = burnin("run", "--sim", "4", "--suite", "node", "--suite", str(site), "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    gate = _gate(out)
    assert gate["admitted"] == "sim[01-04]" and gate["rejected"] == ""
    assert gate["partial"] is False and gate["interrupted"] is False
    for decision in gate["nodes"].values():
        assert decision["admitted"] and decision["failed"] == [] and decision["incomplete"] == []
        assert decision["not_applicable"] == {"SITE-11": "SITE-11 not applicable: hgx-h100-8gpu has no storage fabric"}
    cases = {c.get("name"): c for c in ET.parse(out / "junit.xml").iter("testcase")}
    case = cases["test_storage_fabric[sim02]"]
    skipped = case.find("skipped")
    assert skipped is not None and "has no storage fabric" in skipped.get("message", "")


def test_a_keyword_run_admits_nobody_and_says_it_is_partial(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = burnin("run", "--sim", "2", "--fault", "sim01:nvlink-down", "-k", "inventory", "--out", str(out))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    gate = _gate(out)
    assert gate["partial"] is True and gate["admitted"] == "" and gate["rejected"] == "sim[01-02]"
    selection = gate["selection"]
    assert selection["keyword"] == "inventory"
    assert 0 < selection["selected"] < selection["collected"]
    assert selection["deselected"] == selection["collected"] - selection["selected"]
    for decision in gate["nodes"].values():
        assert not decision["admitted"] and "RUN" in decision["incomplete"]
        assert any(r.startswith("RUN partial run (-k 'inventory'") for r in decision["reasons"])
    assert "admitted: - (0)" in proc.stdout


@pytest.mark.parametrize("extra", [["--dry-run"], []], ids=["dry-run", "live"])
def test_gate_slurm_refuses_a_keyword_run_before_touching_anything(tmp_path: Path, extra: list[str]) -> None:
    out = tmp_path / "out"
    proc = burnin("run", "--sim", "2", "--fault", "sim01:nvlink-down", "-k", "inventory", "--gate", "slurm",
                  *extra, "--out", str(out))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert "refuses a partial run" in proc.stderr and "-k 'inventory'" in proc.stderr
    assert "scontrol" not in proc.stdout + proc.stderr
    assert not (out / "gate.json").exists() and not (out / "facts").exists()


def test_gate_slurm_refuses_a_run_that_turned_out_partial(tmp_path: Path) -> None:
    """A site module that skipped itself leaves its checks unjudged: no drain, no resume."""
    site = _site(tmp_path, 'import pytest\npytest.skip("needs the site tool", allow_module_level=True)\n')
    out = tmp_path / "out"
    proc = burnin("run", "--sim", "2", "--suite", "node", "--suite", str(site), "--gate", "slurm", "--dry-run",
                  "--out", str(out))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "refuses a partial run" in proc.stderr and "needs the site tool" in proc.stderr
    assert "scontrol" not in proc.stdout
    gate = _gate(out)
    assert gate["partial"] is True and gate["admitted"] == ""


INTERRUPTING_SITE = '''
import os
import signal
import time

import pytest

@pytest.mark.check("SITE-20")
def test_operator_presses_ctrl_c(node):
    if node == "sim02":
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(3000):  # the handler runs between two bytecodes; give it every chance
            time.sleep(0.01)
        raise AssertionError("SIGINT was not delivered")
'''


def test_sigint_while_judging_leaves_no_gate_that_admits_a_node(tmp_path: Path) -> None:
    site = _site(tmp_path, INTERRUPTING_SITE)
    out = tmp_path / "out"
    out.mkdir()
    # an earlier run's gate in the same folder must not survive as if it were this run's
    (out / "gate.json").write_text(json.dumps({"admitted": "sim[01-03]", "rejected": "",
                                               "nodes": {f"sim0{i}": {"admitted": True} for i in (1, 2, 3)}}))
    proc = burnin("run", "--sim", "3", "--suite", "node", "--suite", str(site), "--out", str(out))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    if (out / "gate.json").exists():  # none at all, or one that admits nobody and says why
        gate = _gate(out)
        assert not any(d["admitted"] for d in gate["nodes"].values()), gate
        assert gate["interrupted"] is True and gate["admitted"] == ""
        assert all(any(r.startswith("RUN interrupted") for r in d["reasons"]) for d in gate["nodes"].values())
    assert "interrupted" in proc.stderr and "Traceback" not in proc.stderr
    assert [p.name for p in out.iterdir() if p.name.endswith(".tmp")] == []


def test_an_incomplete_check_in_junit_carries_the_one_line_cause(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = burnin("run", "--sim", "2", "--fault", "sim01:gpu-lost", "--out", str(out))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    gate = _gate(out)
    assert gate["nodes"]["sim01"]["incomplete"], gate["nodes"]["sim01"]
    errors = 0
    for case in ET.parse(out / "junit.xml").iter("testcase"):
        for element in (case.find("error"), case.find("failure")):
            if element is None:
                continue
            text = (element.get("message") or element.text or "").strip()
            assert len(text.splitlines()) == 1 and len(text) < 400, (case.get("name"), text)
            assert "site-packages" not in text and "Traceback" not in text and "burnin/plugin.py" not in text
            errors += element.tag == "error"
            if element.tag == "error":
                assert "could not be measured" in text, text
    assert errors >= 1
