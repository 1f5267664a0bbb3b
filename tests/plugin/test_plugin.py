"""The pytest plugin, through pytester: ids, fixtures, JUnit properties, the gate."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

SITE_TEST = '''
import pytest

@pytest.mark.check("SITE-01")
def test_numa_balancing_off(node, facts, topology):
    assert facts.kernel()["numa_balancing"] == 0, f"{node}: numa_balancing on"

@pytest.mark.check("TOP-08")
def test_builtin_check(verdict):
    from burnin.suite import assert_passed
    assert_passed(verdict)
'''


def _facts(numa_balancing: int | None) -> dict[str, object]:
    sources = {"kernel": {"ok": numa_balancing is not None, "error": None if numa_balancing is not None
                          else "proc unreadable", "duration_s": 0.0}}
    data: dict[str, object] = {"schema": 1, "sources": sources, "commands": {}}
    if numa_balancing is not None:
        data["kernel"] = {"numa_balancing": numa_balancing}
    return data


@pytest.fixture
def facts_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "facts"
    folder.mkdir()
    (folder / "n01.json").write_text(json.dumps(_facts(0)))
    (folder / "n02.json").write_text(json.dumps(_facts(1)))
    (folder / "n03.json").write_text(json.dumps(_facts(None)))
    (folder / "n04.json").write_text(json.dumps({"unreachable": "ssh: connection refused"}))
    return folder


def test_site_tests_parametrized_per_node_with_gate(pytester: pytest.Pytester, facts_dir: Path,
                                                    tmp_path: Path) -> None:
    pytester.makepyfile(test_site=SITE_TEST)
    out = tmp_path / "out"
    result = pytester.runpytest("--burnin-facts", str(facts_dir), "--burnin-out", str(out),
                                "--junitxml", str(out / "junit.xml"), "-v")
    result.stdout.fnmatch_lines([
        "*test_numa_balancing_off?n01? PASSED*",
        "*test_numa_balancing_off?n02? FAILED*",
        "*test_builtin_check?n02? FAILED*",
        "*test_builtin_check?n03? ERROR*",
    ])
    gate = json.loads((out / "gate.json").read_text())
    assert gate["admitted"] == "n01"
    assert gate["rejected"] == "n[02-04]"
    assert gate["nodes"]["n02"]["failed"] == ["SITE-01", "TOP-08"]
    assert "numa_balancing=1" in " ".join(gate["nodes"]["n02"]["reasons"])
    assert gate["nodes"]["n03"]["incomplete"] == ["SITE-01", "TOP-08"]
    assert gate["nodes"]["n03"]["failed"] == []
    assert gate["nodes"]["n04"]["failed"] == []
    assert gate["nodes"]["n04"]["incomplete"] == ["SITE-01", "TOP-08"]
    assert "connection refused" in " ".join(gate["nodes"]["n04"]["reasons"])

    tree = ET.parse(out / "junit.xml")
    cases = {c.get("name"): c for c in tree.iter("testcase")}
    case = cases["test_builtin_check[n02]"]
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["node"] == "n02" and props["check"] == "TOP-08"
    assert props["measured"] == "kernel.numa_balancing=1"
    assert props["expected"] == "kernel.numa_balancing=0"
    assert props["verdict"] == "fail"
    assert case.find("failure") is not None
    # could not measure -> a JUnit error, not a failure
    assert cases["test_builtin_check[n03]"].find("error") is not None


def test_verdict_fixture_needs_a_check_marker(pytester: pytest.Pytester, facts_dir: Path) -> None:
    pytester.makepyfile(test_bad="def test_x(verdict):\n    pass\n")
    result = pytester.runpytest("--burnin-facts", str(facts_dir))
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*needs @pytest.mark.check*"])


def test_suites_without_nodes_give_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_site=SITE_TEST)
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*suites need nodes: pass --burnin-facts DIR*"])


def test_a_projects_own_node_fixture_wins_without_facts(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_own="""
import pytest

@pytest.fixture
def node():
    return "mine"

def test_uses_own_node(node):
    assert node == "mine"
""")
    pytester.runpytest().assert_outcomes(passed=1)


def test_plain_tests_are_untouched(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain="def test_ok():\n    assert 1\n")
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)
