"""The plugin at a fleet's size: node by node, each node's facts read once, verdicts in collection order.

A run of 1,024 nodes judges ~46,000 node tests; the plugin runs them node by
node so that each facts document is read once and then dropped (memory stays
that of a node or two), and verdicts.json still lists them as collected.
Reads are counted through the plugin's ``pytest_burnin_facts_read`` hook.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from burnin.gate.decide import CheckOutcome
from burnin.plugin import FACTS_KEPT, _PluginState, verdicts_document
from burnin.resources import topologies_dir
from burnin.text import printable

NODES = ("n01", "n02", "n03", "n04")

SUITE = '''
import pytest

@pytest.mark.check("SITE-01")
def test_reads_facts(facts):
    assert facts.kernel()["numa_balancing"] == 0

@pytest.mark.check("TOP-08")
def test_builtin_check(verdict):
    from burnin.suite import assert_passed
    assert_passed(verdict)

@pytest.mark.check("SITE-03")
def test_reads_everything(node, facts, topology):
    assert facts.node == node and topology.name
'''


class Recorder:
    """Facts reads and test starts, in the order they happened."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def pytest_burnin_facts_read(self, node: str, path: Path) -> None:
        assert path.name == f"{node}.json"
        self.events.append(("read", node))

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.events.append(("test", nodeid.rsplit("[", 1)[-1].rstrip("]")))

    @property
    def reads(self) -> list[str]:
        return [node for kind, node in self.events if kind == "read"]


def _facts(numa_balancing: int) -> dict[str, object]:
    return {"schema": 1, "sources": {"kernel": {"ok": True, "error": None, "duration_s": 0.0}}, "commands": {},
            "kernel": {"numa_balancing": numa_balancing}}


@pytest.fixture
def facts_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "facts"
    folder.mkdir()
    for name in NODES:
        (folder / f"{name}.json").write_text(json.dumps(_facts(1 if name == "n03" else 0)))
    return folder


def _run(pytester: pytest.Pytester, facts_dir: Path, *args: str) -> tuple[pytest.RunResult, Recorder, Path]:
    recorder = Recorder()
    out = pytester.path / "out"
    result = pytester.runpytest("--burnin-facts", str(facts_dir), "--burnin-out", str(out), "-p", "no:cacheprovider",
                                *args, plugins=[recorder])
    return result, recorder, out


def test_each_nodes_facts_are_read_once_however_many_tests_read_them(pytester: pytest.Pytester,
                                                                      facts_dir: Path) -> None:
    pytester.makepyfile(test_site=SUITE)
    result, recorder, out = _run(pytester, facts_dir)
    result.assert_outcomes(passed=10, failed=2)  # n03: numa balancing on, for SITE-01 and TOP-08
    assert recorder.reads == list(NODES)
    gate = json.loads((out / "gate.json").read_text())
    assert gate["nodes"]["n03"]["failed"] == ["SITE-01", "TOP-08"]
    assert gate["admitted"] == "n[01-02,04]"


def test_nodes_are_judged_one_after_the_other(pytester: pytest.Pytester, facts_dir: Path) -> None:
    """Every test of a node runs before the next node's facts are read, whatever file the tests are in."""
    pytester.makepyfile(test_site=SUITE, test_more='''
import pytest

@pytest.mark.check("SITE-04")
def test_another_file(facts):
    assert facts.kernel()
''')
    result, recorder, _ = _run(pytester, facts_dir)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    expected: list[tuple[str, str]] = []
    for node in NODES:
        expected += [("test", node), ("read", node)] + [("test", node)] * 3  # read in the first one's setup
    assert recorder.events == expected


def test_verdicts_keep_the_collection_order(pytester: pytest.Pytester, facts_dir: Path) -> None:
    pytester.makepyfile(test_site=SUITE)
    _, _, out = _run(pytester, facts_dir)
    verdicts = json.loads((out / "verdicts.json").read_text())
    assert [(v["check"], v["node"]) for v in verdicts] == [
        (check, node) for check in ("SITE-01", "TOP-08", "SITE-03") for node in NODES]
    assert [v["test"] for v in verdicts[:2]] == ["test_reads_facts[n01]", "test_reads_facts[n02]"]


def test_a_node_left_behind_is_read_again_not_kept(facts_dir: Path) -> None:
    """Only the last FACTS_KEPT nodes' facts stay parsed: a fleet's worth never piles up."""
    reads: list[str] = []

    class Hook:
        def pytest_burnin_facts_read(self, node: str, path: Path) -> None:
            reads.append(node)

    state = _PluginState(facts_dir, "hgx-h100-8gpu", None)
    state.hook = Hook()
    order = ["n01", "n01", "n02", "n02", "n03", "n04", "n01", "n04"]
    for node in order:
        assert state.facts(node).node == node
    assert FACTS_KEPT == 2
    assert reads == ["n01", "n02", "n03", "n04", "n01"]
    assert state.facts("n05").unreachable == "no facts were gathered"


def test_a_site_suite_stands_aside_where_its_node_type_says_so(pytester: pytest.Pytester, facts_dir: Path,
                                                               tmp_path: Path) -> None:
    """``declared_applicable`` is the plugin's: any suite asks for it, not only the node suite."""
    text = (topologies_dir() / "hgx-h100-8gpu.yaml").read_text()
    assert "dcgm:\n  required: true\n" in text
    topology = tmp_path / "no-dcgm.yaml"
    text = text.replace("dcgm:\n  required: true\n", "dcgm:\n  required: false\n", 1)
    version = next(line for line in text.splitlines() if line.startswith("  dcgm: "))  # software.dcgm
    topology.write_text(text.replace(version + "\n", "", 1))
    pytester.makepyfile(test_site='''
import pytest

@pytest.mark.check("GPU-12")
def test_dcgm_health(declared_applicable, verdict):
    raise AssertionError("a check its node type declares not applicable is never judged")
''')
    result, _, out = _run(pytester, facts_dir, "--burnin-topology", str(topology))
    result.assert_outcomes(skipped=4)
    gate = json.loads((out / "gate.json").read_text())
    for node in NODES:
        assert gate["nodes"][node]["not_applicable"] == {
            "GPU-12": "GPU-12 not applicable: topology hgx-h100-8gpu declares no DCGM (dcgm: {required: false})"}


def _document_line_by_line(outcomes: list[CheckOutcome]) -> str:
    """verdicts.json as specified: one JSON object per outcome, a line each, its shown text printable."""
    lines = []
    for outcome in outcomes:
        record = dataclasses.asdict(outcome)
        for name in ("reason", "measured", "expected"):
            record[name] = printable(record[name])
        lines.append(json.dumps(record))
    return "[\n" + ",\n".join(lines) + "\n]\n"


_TEXT = st.text(st.sampled_from(['}', ',', ' ', '{', '"', '\\', ':', 'n', 'o', 'd', 'e', '\n', '\x1b', 'é']),
                max_size=24) | st.sampled_from(['}, {"node": ', '"}, {"node": "x', '\\"}, {\\"node\\": '])


@given(st.lists(st.builds(CheckOutcome, _TEXT, _TEXT, st.sampled_from(["pass", "fail"]), _TEXT, _TEXT, _TEXT,
                          _TEXT, _TEXT, st.floats(allow_nan=False, allow_infinity=False)), max_size=6))
@example([])
@example([CheckOutcome("n1", "GPU-10", "fail", 'x"}, {"node": "n2', "}, {", '{"node": ')])
def test_verdicts_json_holds_one_outcome_a_line_whatever_their_text(outcomes: list[CheckOutcome]) -> None:
    document = verdicts_document(outcomes)
    assert document == _document_line_by_line(outcomes)
    assert [CheckOutcome(**record) for record in json.loads(document)] == [
        dataclasses.replace(o, reason=printable(o.reason), measured=printable(o.measured),
                            expected=printable(o.expected)) for o in outcomes]
