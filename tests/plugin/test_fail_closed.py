"""The plugin fails closed: only pass, or an explicit not-applicable with its reason, admits a node.

Each test here was a way to get a node admitted without a verdict (issue 9,
items 1, 5, 6 and 7): a skip, an xfail or xpass, an error outside the call,
a test that never ran, a deselected check, an interrupted session. Each is
run through pytest itself (pytester) with the plugin, then gate.json,
verdicts.json and junit.xml are read back.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

NODES = ("n01", "n02", "n03")


def _facts(numa_balancing: int, error: str | None = None) -> dict[str, object]:
    ok = error is None
    return {"schema": 1, "sources": {"kernel": {"ok": ok, "error": error, "duration_s": 0.0}}, "commands": {},
            **({"kernel": {"numa_balancing": numa_balancing}} if ok else {})}


@pytest.fixture
def facts_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "facts"
    folder.mkdir()
    for name in NODES:
        (folder / f"{name}.json").write_text(json.dumps(_facts(0)))
    return folder


@dataclass
class Run:
    result: pytest.RunResult
    out: Path

    @property
    def gate(self) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads((self.out / "gate.json").read_text())
        return doc

    @property
    def verdicts(self) -> list[dict[str, str]]:
        doc: list[dict[str, str]] = json.loads((self.out / "verdicts.json").read_text())
        return doc

    def verdict(self, node: str, check: str) -> dict[str, str]:
        return next(v for v in self.verdicts if v["node"] == node and v["check"] == check)

    def case(self, name: str) -> ET.Element:
        cases = {c.get("name"): c for c in ET.parse(self.out / "junit.xml").iter("testcase")}
        return cases[name]

    def properties(self, name: str) -> dict[str, str]:
        return {p.get("name", ""): p.get("value", "") for p in self.case(name).iter("property")}


def run(pytester: pytest.Pytester, facts_dir: Path, source: str, *args: str) -> Run:
    pytester.makepyfile(test_site=source)
    out = pytester.path / "out"
    result = pytester.runpytest("--burnin-facts", str(facts_dir), "--burnin-out", str(out),
                                "--junitxml", str(out / "junit.xml"), "-p", "no:cacheprovider",
                                "--rootdir", str(pytester.path), *args)
    return Run(result, out)


def _admitted(gate: dict[str, Any]) -> set[str]:
    return {n for n, d in gate["nodes"].items() if d["admitted"]}


PASSING = '''
import pytest

@pytest.mark.check("SITE-00")
def test_always_fine(node, facts):
    assert facts.kernel()["numa_balancing"] == 0
'''


# --- item 1: a skip, an xfail, an xpass or a missing outcome is incomplete ------------------------------------


def test_a_skip_on_one_node_keeps_that_node_out_with_the_reason(pytester: pytest.Pytester, facts_dir: Path) -> None:
    run_ = run(pytester, facts_dir, PASSING + '''
@pytest.mark.check("SITE-01")
def test_site(node):
    if node == "n02":
        pytest.skip("no license server on this node")
''')
    gate = run_.gate
    assert _admitted(gate) == {"n01", "n03"}
    assert gate["nodes"]["n02"]["incomplete"] == ["SITE-01"] and gate["nodes"]["n02"]["failed"] == []
    reason = gate["nodes"]["n02"]["reasons"][0]
    assert reason.startswith("SITE-01 skipped: no license server on this node"), reason
    assert run_.verdict("n02", "SITE-01")["status"] == "incomplete"
    # JUnit and pytest's exit status agree: not a skip, a test that did not pass
    assert run_.result.ret == pytest.ExitCode.TESTS_FAILED
    case = run_.case("test_site[n02]")
    assert case.find("skipped") is None and case.find("failure") is not None
    assert run_.properties("test_site[n02]")["verdict"] == "incomplete"
    assert run_.properties("test_site[n01]")["verdict"] == "pass"


@pytest.mark.parametrize(("decoration", "body", "what"), [
    ('@pytest.mark.xfail(reason="flaky on this rack")', "assert node != 'n02'", "xfailed: flaky on this rack"),
    ('@pytest.mark.xfail(reason="known issue")', "pass", "xpassed: known issue"),
    ('@pytest.mark.xfail(reason="known issue", strict=True)', "pass", "xpassed: known issue"),
    ("", "pytest.xfail('vendor bug 123')", "xfailed: vendor bug 123"),
    ('@pytest.mark.xfail(run=False, reason="hangs")', "pass", "xfailed: [NOTRUN] hangs"),
], ids=["xfail-fails", "xpass", "xpass-strict", "imperative-xfail", "xfail-not-run"])
def test_an_xfail_or_xpass_is_not_a_verdict(pytester: pytest.Pytester, facts_dir: Path, decoration: str,
                                            body: str, what: str) -> None:
    run_ = run(pytester, facts_dir, f'''
import pytest

@pytest.mark.check("SITE-02")
{decoration}
def test_site(node):
    {body}
''')
    gate = run_.gate
    assert _admitted(gate) == set(), gate  # where an xfail-marked test passed, it xpassed: no verdict either
    decision = gate["nodes"]["n02"]
    assert decision["incomplete"] == ["SITE-02"], decision
    assert decision["reasons"] == [f"SITE-02 xfail is not a verdict ({what})"]
    assert run_.result.ret == pytest.ExitCode.TESTS_FAILED
    case = run_.case("test_site[n02]")
    assert case.find("skipped") is None
    assert case.find("failure") is not None or case.find("error") is not None


@pytest.mark.parametrize("source", [
    '@pytest.mark.skip(reason="not today")\ndef test_site(node):\n    pass\n',
    '@pytest.mark.skipif(True, reason="not today")\ndef test_site(node):\n    pass\n',
    '@pytest.fixture\ndef tool():\n    pytest.skip("not today")\n\ndef test_site(node, tool):\n    pass\n',
], ids=["skip-marker", "skipif-marker", "skip-in-fixture"])
def test_a_skip_in_setup_is_incomplete_and_a_junit_error(pytester: pytest.Pytester, facts_dir: Path,
                                                          source: str) -> None:
    run_ = run(pytester, facts_dir, "import pytest\n\npytestmark = pytest.mark.check('SITE-03')\n\n" + source)
    gate = run_.gate
    assert _admitted(gate) == set()
    for name in NODES:
        assert gate["nodes"][name]["incomplete"] == ["SITE-03"]
        assert gate["nodes"][name]["reasons"][0].startswith("SITE-03 skipped: not today")
        error = run_.case(f"test_site[{name}]").find("error")
        assert error is not None and "SITE-03 skipped: not today" in error.get("message", "")


def test_an_error_in_setup_or_teardown_is_incomplete(pytester: pytest.Pytester, facts_dir: Path) -> None:
    run_ = run(pytester, facts_dir, '''
import pytest

@pytest.fixture
def broken_setup(node):
    if node == "n01":
        raise RuntimeError("license server down")

@pytest.fixture
def broken_teardown(node):
    yield
    if node == "n02":
        raise RuntimeError("cleanup failed")

@pytest.mark.check("SITE-04")
def test_site(node, broken_setup, broken_teardown):
    pass
''')
    gate = run_.gate
    assert _admitted(gate) == {"n03"}
    assert gate["nodes"]["n01"]["reasons"] == ["SITE-04 error in setup: RuntimeError: license server down"]
    assert gate["nodes"]["n02"]["reasons"] == ["SITE-04 error in teardown: RuntimeError: cleanup failed"]
    assert gate["nodes"]["n02"]["incomplete"] == ["SITE-04"]
    assert run_.verdict("n02", "SITE-04")["status"] == "incomplete"


def test_a_failure_outranks_a_teardown_error(pytester: pytest.Pytester, facts_dir: Path) -> None:
    run_ = run(pytester, facts_dir, '''
import pytest

@pytest.fixture
def broken_teardown():
    yield
    raise RuntimeError("cleanup failed")

@pytest.mark.check("SITE-05")
def test_site(node, broken_teardown):
    assert node != "n03", "n03 is broken"
''')
    decision = run_.gate["nodes"]["n03"]
    assert decision["failed"] == ["SITE-05"] and decision["incomplete"] == []
    assert "n03 is broken" in decision["reasons"][0]
    assert run_.gate["nodes"]["n01"]["incomplete"] == ["SITE-05"]


def test_a_test_that_never_ran_is_incomplete(pytester: pytest.Pytester, facts_dir: Path) -> None:
    """-x stops the session at the first failure: the tests after it have no outcome, not a pass."""
    run_ = run(pytester, facts_dir, '''
import pytest

@pytest.mark.check("SITE-06")
def test_first(node):
    assert node != "n01"

@pytest.mark.check("SITE-07")
def test_second(node):
    pass
''', "-x")
    gate = run_.gate
    assert _admitted(gate) == set()
    for name in ("n02", "n03"):
        assert gate["nodes"][name]["incomplete"] == ["SITE-06", "SITE-07"], gate["nodes"][name]
        assert gate["nodes"][name]["reasons"][0] == "SITE-06 has no outcome: the test did not run to the end"
    assert gate["nodes"]["n01"]["failed"] == ["SITE-06"]
    assert gate["nodes"]["n01"]["incomplete"] == ["SITE-07"]


def test_a_test_that_passes_over_its_failed_verdict_fails(pytester: pytest.Pytester, tmp_path: Path) -> None:
    facts = tmp_path / "facts2"
    facts.mkdir()
    (facts / "n01.json").write_text(json.dumps(_facts(1)))
    run_ = run(pytester, facts, '''
import pytest

@pytest.mark.check("TOP-08")
def test_forgets_to_assert(verdict):
    pass
''')
    decision = run_.gate["nodes"]["n01"]
    assert decision["failed"] == ["TOP-08"], decision
    assert "numa_balancing=1" in decision["reasons"][0]


# --- not-applicable: the one way to stand aside, with a reason ----------------------------------------------------


def test_not_applicable_with_a_reason_stands_in_for_a_verdict(pytester: pytest.Pytester, facts_dir: Path) -> None:
    run_ = run(pytester, facts_dir, PASSING + '''
from burnin.suite import not_applicable

@pytest.fixture
def storage_fabric(node):
    if node == "n02":
        not_applicable("this node type has no storage fabric")

@pytest.mark.check("SITE-08")
def test_storage(node, storage_fabric):
    pass

@pytest.mark.check("SITE-09")
def test_inside(node):
    if node == "n03":
        not_applicable("single-socket node")
''')
    gate = run_.gate
    assert run_.result.ret == pytest.ExitCode.OK
    assert gate["admitted"] == "n[01-03]" and gate["rejected"] == ""
    assert gate["nodes"]["n02"]["not_applicable"] == {"SITE-08": "SITE-08 not applicable: this node type has no "
                                                                 "storage fabric"}
    assert gate["nodes"]["n03"]["not_applicable"] == {"SITE-09": "SITE-09 not applicable: single-socket node"}
    assert "not_applicable" not in gate["nodes"]["n01"]
    assert run_.verdict("n02", "SITE-08")["status"] == "not-applicable"
    skipped = run_.case("test_storage[n02]").find("skipped")
    assert skipped is not None and skipped.get("message") == "SITE-08 not applicable: this node type has no storage " \
                                                             "fabric"
    assert run_.properties("test_inside[n03]")["verdict"] == "not-applicable"


def test_not_applicable_without_a_reason_is_incomplete(pytester: pytest.Pytester, facts_dir: Path) -> None:
    run_ = run(pytester, facts_dir, '''
import pytest
from burnin.suite import not_applicable

@pytest.mark.check("SITE-10")
def test_site(node):
    not_applicable("  ")
''')
    assert _admitted(run_.gate) == set()
    assert "without a reason" in run_.gate["nodes"]["n01"]["reasons"][0]


def test_not_applicable_cannot_overrule_a_failed_verdict(pytester: pytest.Pytester, tmp_path: Path) -> None:
    facts = tmp_path / "facts5"
    facts.mkdir()
    (facts / "n01.json").write_text(json.dumps(_facts(1)))
    run_ = run(pytester, facts, '''
import pytest
from burnin.suite import not_applicable

@pytest.mark.check("TOP-08")
def test_stands_aside_too_late(verdict):
    not_applicable("we do not care about NUMA balancing")
''')
    decision = run_.gate["nodes"]["n01"]
    assert decision["failed"] == ["TOP-08"] and "not_applicable" not in decision, decision


# --- item 5: a partial run admits nobody and says so --------------------------------------------------------------

TWO_CHECKS = '''
import pytest

@pytest.mark.check("SITE-11")
def test_inventory_like(node):
    pass

@pytest.mark.check("SITE-12")
def test_nvlink_like(node):
    assert node != "n01", "n01 NVLink down"
'''


def test_a_keyword_run_admits_nobody_and_records_the_selection(pytester: pytest.Pytester, facts_dir: Path) -> None:
    run_ = run(pytester, facts_dir, TWO_CHECKS, "-k", "inventory")
    gate = run_.gate
    assert gate["partial"] is True and gate["interrupted"] is False
    assert gate["selection"]["keyword"] == "inventory"
    assert (gate["selection"]["collected"], gate["selection"]["selected"], gate["selection"]["deselected"]) == (6, 3, 3)
    assert gate["admitted"] == "" and gate["rejected"] == "n[01-03]"
    for decision in gate["nodes"].values():
        assert not decision["admitted"] and decision["incomplete"] == ["RUN"]
        assert decision["reasons"][-1].startswith("RUN partial run (-k 'inventory' selected 3 of 6 tests)")
    # what was selected was still judged
    assert {v["check"] for v in run_.verdicts} == {"SITE-11"}


@pytest.mark.parametrize("args", [("-m", "not slow"), ("--deselect", "test_site.py::test_nvlink_like[n02]"),
                                  ("test_site.py::test_inventory_like",)], ids=["markexpr", "deselect", "node-id"])
def test_other_selections_are_partial_too(pytester: pytest.Pytester, facts_dir: Path, args: tuple[str, ...]) -> None:
    source = TWO_CHECKS.replace('@pytest.mark.check("SITE-12")', '@pytest.mark.slow\n@pytest.mark.check("SITE-12")')
    run_ = run(pytester, facts_dir, source, *args)
    assert run_.gate["partial"] is True
    assert _admitted(run_.gate) == set()


def test_a_module_skipped_at_collection_makes_the_run_partial(pytester: pytest.Pytester, facts_dir: Path) -> None:
    pytester.makepyfile(test_other='import pytest\npytest.skip("needs a site tool", allow_module_level=True)\n')
    run_ = run(pytester, facts_dir, PASSING)
    gate = run_.gate
    assert gate["partial"] is True and _admitted(gate) == set()
    assert "test_other.py skipped at collection: needs a site tool" in gate["nodes"]["n01"]["reasons"][-1]


def test_a_keyword_that_selects_everything_is_a_whole_run(pytester: pytest.Pytester, facts_dir: Path) -> None:
    run_ = run(pytester, facts_dir, PASSING, "-k", "always")
    assert run_.gate["partial"] is False
    assert run_.gate["admitted"] == "n[01-03]"


def test_a_healthy_rack_with_passing_site_tests_is_admitted_whole(pytester: pytest.Pytester,
                                                                  facts_dir: Path) -> None:
    run_ = run(pytester, facts_dir, PASSING + TWO_CHECKS.replace('assert node != "n01", "n01 NVLink down"', "pass"))
    gate = run_.gate
    assert run_.result.ret == pytest.ExitCode.OK
    assert gate["admitted"] == "n[01-03]" and gate["partial"] is False and gate["interrupted"] is False
    for decision in gate["nodes"].values():
        assert decision == {"admitted": True, "failed": [], "incomplete": [], "reasons": []}
    assert {v["status"] for v in run_.verdicts} == {"pass"}
    assert len(run_.verdicts) == 9


# --- item 6: an interrupted run admits nobody; no stale gate survives ----------------------------------------------


@pytest.mark.proc  # stops a pytest it starts with a signal
def test_an_interrupted_session_admits_nobody(pytester: pytest.Pytester, facts_dir: Path) -> None:
    pytester.makepyfile(test_site=PASSING + '''
@pytest.mark.check("SITE-13")
def test_stop(node):
    if node == "n02":
        raise KeyboardInterrupt
''')
    out = pytester.path / "out"
    (out).mkdir()
    (out / "gate.json").write_text(json.dumps({"nodes": {"n01": {"admitted": True}}, "admitted": "n01"}))
    result = pytester.runpytest_subprocess("--burnin-facts", str(facts_dir), "--burnin-out", str(out))
    assert result.ret == pytest.ExitCode.INTERRUPTED
    gate = json.loads((out / "gate.json").read_text())
    assert gate["interrupted"] is True and gate["admitted"] == "" and gate["summary"]["admitted"] == 0
    assert "KeyboardInterrupt" in gate["interrupted_reason"]
    for decision in gate["nodes"].values():
        assert not decision["admitted"] and "RUN" in decision["incomplete"]
        # node by node: SITE-00 and SITE-13 on n01, SITE-00 on n02, then the interrupt
        assert decision["reasons"][-1].startswith("RUN interrupted (KeyboardInterrupt) after 3 of 6 tests")
    # n01 passed every check it reached; the interrupt still keeps it out
    assert gate["nodes"]["n01"]["failed"] == []
    assert [f for f in out.iterdir() if f.name.endswith(".tmp")] == []


def test_a_collection_error_admits_nobody(pytester: pytest.Pytester, facts_dir: Path) -> None:
    pytester.makepyfile(test_broken="import no_such_module_for_burnin\n")
    run_ = run(pytester, facts_dir, PASSING)
    assert run_.result.ret == pytest.ExitCode.INTERRUPTED
    assert run_.gate["interrupted"] is True and _admitted(run_.gate) == set()
    assert "error during collection" in run_.gate["interrupted_reason"]


def test_a_stale_gate_is_removed_when_the_session_starts(pytester: pytest.Pytester, facts_dir: Path) -> None:
    """A plugin that fails before the end must leave no gate behind, least of all an old one."""
    out = pytester.path / "out"
    out.mkdir()
    (out / "gate.json").write_text('{"admitted": "n[01-03]"}')
    (out / "verdicts.json").write_text("[]")
    pytester.makeconftest('''
def pytest_runtestloop(session):
    import os
    assert not os.path.exists(os.path.join(session.config.getoption("--burnin-out"), "gate.json"))
    assert not os.path.exists(os.path.join(session.config.getoption("--burnin-out"), "verdicts.json"))
    raise SystemExit(3)
''')
    pytester.makepyfile(test_site=PASSING)
    pytester.runpytest("--burnin-facts", str(facts_dir), "--burnin-out", str(out))
    gate = json.loads((out / "gate.json").read_text())
    assert gate["admitted"] == "" and gate["interrupted"] is True


# --- item 7 and issue 10 item 5: one-line causes, node text escaped ------------------------------------------------


def test_an_incomplete_check_carries_its_one_line_cause_in_junit(pytester: pytest.Pytester, tmp_path: Path) -> None:
    facts = tmp_path / "facts3"
    facts.mkdir()
    (facts / "n01.json").write_text(json.dumps(_facts(0, error="/proc/sys/kernel unreadable")))
    run_ = run(pytester, facts, '''
import pytest
from burnin.suite import assert_passed

@pytest.mark.check("TOP-08")
def test_builtin(verdict):
    assert_passed(verdict)

@pytest.mark.check("SITE-14")
def test_site(node, facts):
    assert facts.kernel()["numa_balancing"] == 0
''')
    for name, tag in (("test_builtin[n01]", "error"), ("test_site[n01]", "failure")):
        element = run_.case(name).find(tag)
        assert element is not None, name
        text = (element.text or "").strip()
        assert "could not be measured" in text and "/proc/sys/kernel unreadable" in text, text
        assert len(text.splitlines()) == 1 and len(text) < 300, text
        assert "site-packages" not in text and "Traceback" not in text and "def " not in text
        assert run_.properties(name)["verdict"] == "incomplete"
    assert run_.gate["nodes"]["n01"]["incomplete"] == ["TOP-08", "SITE-14"]
    cause = "SITE-14 could not be measured: kernel: /proc/sys/kernel unreadable"
    assert run_.gate["nodes"]["n01"]["reasons"][1] == cause


def test_node_text_is_escaped_in_junit_and_gate(pytester: pytest.Pytester, tmp_path: Path) -> None:
    facts = tmp_path / "facts4"
    facts.mkdir()
    (facts / "n01.json").write_text(json.dumps(_facts(0, error="bad\x1b[2J\x00tool")))
    (facts / "n02.json").write_text(json.dumps(_facts(0)))
    run_ = run(pytester, facts, '''
import pytest

@pytest.mark.check("SITE-15")
def test_site(node, facts, record_property):
    record_property("measured", "model \\x1b]0;pwned\\x07")
    facts.kernel()
    if node == "n02":
        pytest.skip("tool said \\x1b[31mno\\x00")
''')
    raw = (run_.out / "junit.xml").read_text() + (run_.out / "gate.json").read_text() + \
        (run_.out / "verdicts.json").read_text()
    assert "\x1b" not in raw and "\x00" not in raw and "\\u001b" not in raw and "#x1B" not in raw
    reasons = run_.gate["nodes"]
    assert reasons["n01"]["reasons"] == ["SITE-15 could not be measured: kernel: bad\\x1b[2J\\x00tool"]
    assert reasons["n02"]["reasons"][0].startswith("SITE-15 skipped: tool said \\x1b[31mno\\x00")
    assert run_.properties("test_site[n01]")["measured"] == "model \\x1b]0;pwned\\x07"
    assert run_.properties("test_site[n01]")["reason"] == reasons["n01"]["reasons"][0]
