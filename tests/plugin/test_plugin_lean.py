"""The lean protocol (``--burnin-lean``, which ``burnin run`` passes): the same verdicts as pytest's phases.

Each suite below runs twice through pytest itself (pytester, in process): with
pytest's full protocol and with the lean one. verdicts.json (but durations),
gate.json (but its creation time) and pytest's exit status must be the same;
the lean run must have judged without pytest's per-test reports where it may,
and not at all where a plugin, a site fixture or an option could tell.
"""

from __future__ import annotations

import concurrent.futures.process  # noqa: F401  # see below
import json
import multiprocessing
import multiprocessing.resource_tracker  # see below
import multiprocessing.synchronize
import time
from pathlib import Path
from typing import Any

import pytest

from burnin.plugin_judge import JOBS_OPTION, POOL_MIN_NODES
from burnin.plugin_lean import LEAN_OPTION
from burnin.session import PYTEST_LEAN_ARGS

# pytester forgets the modules an in-process run imported; the worker pool's (multiprocessing's resource
# tracker) must outlive the run that started it, so they are imported here, once.

NODES = ("n01", "n02", "n03")


def _facts(node: str) -> dict[str, object]:
    if node == "n02":  # the kernel source failed: TOP-08 incomplete, facts.kernel() Unmeasurable
        return {"schema": 1, "sources": {"kernel": {"ok": False, "error": "sysctl: timed out", "duration_s": 0.0}},
                "commands": {}}
    return {"schema": 1, "sources": {"kernel": {"ok": True, "error": None, "duration_s": 0.0}}, "commands": {},
            "kernel": {"numa_balancing": 1 if node == "n03" else 0}}


@pytest.fixture
def facts_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "facts"
    folder.mkdir()
    for name in NODES:
        (folder / f"{name}.json").write_text(json.dumps(_facts(name)))
    return folder


VERDICT_TESTS = '''
import pytest
from burnin.suite import assert_passed

@pytest.mark.check("TOP-08")
def test_numa_balancing(verdict):
    """pass on n01, incomplete on n02, fail on n03"""
    assert_passed(verdict)

@pytest.mark.check("TOP-08")
def test_applicable_first(declared_applicable, verdict):
    assert_passed(verdict)
'''

VERDICTS_ONLY = VERDICT_TESTS + '''

@pytest.mark.check("TOP-08")
def test_verdict_first(verdict, declared_applicable, node, facts, topology):
    print("judged", node)  # output goes nowhere that could change a verdict
    assert_passed(verdict)
'''

EVERY_SHAPE = VERDICTS_ONLY + '''
from burnin.suite import not_applicable

@pytest.mark.check("TOP-08")
def test_passes_over_its_verdict(verdict):
    pass

@pytest.mark.check("TOP-08")
def test_stands_aside_after_its_verdict(verdict, node):
    not_applicable("stands aside on every node")

@pytest.mark.check("SITE-01")
def test_stands_aside_on_n02(node):
    if node == "n02":
        not_applicable("no such thing on n02")

@pytest.mark.check("SITE-02")
def test_site_assertion(node, facts):
    assert facts.kernel()["numa_balancing"] == 0, f"{node}: balancing on"

@pytest.mark.check("SITE-03")
def test_site_skip(node):
    if node == "n01":
        pytest.skip("no license server")

@pytest.mark.check("SITE-04")
def test_site_xfail(node):
    if node == "n03":
        pytest.xfail("vendor bug 123")

@pytest.mark.check("SITE-05")
def test_site_error(node):
    if node == "n02":
        raise RuntimeError("the site's tool crashed")

@pytest.mark.check("SITE-06")
def test_site_fails_its_own_way(node):
    if node == "n01":
        pytest.fail("n01 is out of warranty", pytrace=False)

def test_without_a_check_mark(node, topology):
    assert topology.name
'''


# pytest as `burnin run` starts it, the lean protocol aside: no terminal, logging, warnings...
PYTEST_ARGS = ("-p", "no:cacheprovider", "-p", "no:terminal", *(a for a in PYTEST_LEAN_ARGS if a != LEAN_OPTION))


def _run(pytester: pytest.Pytester, facts_dir: Path, name: str, *args: str) -> tuple[Any, Path]:
    out = pytester.path / name
    reprec = pytester.inline_run("--burnin-facts", str(facts_dir), "--burnin-out", str(out),
                                 "--rootdir", str(pytester.path), *PYTEST_ARGS, *args)
    return reprec, out


def _documents(out: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    verdicts = json.loads((out / "verdicts.json").read_text())
    for verdict in verdicts:
        verdict.pop("duration_s")
    gate = json.loads((out / "gate.json").read_text())
    gate.pop("created")
    gate.pop("facts")
    return verdicts, gate


def _test_reports(reprec: Any) -> list[Any]:
    return [r for r in reprec.getreports("pytest_runtest_logreport") if r.when in ("setup", "call", "teardown")]


@pytest.mark.parametrize("suite", [VERDICTS_ONLY, EVERY_SHAPE], ids=["verdicts-only", "every-shape"])
def test_the_lean_protocol_gives_the_same_verdicts(pytester: pytest.Pytester, facts_dir: Path, suite: str) -> None:
    pytester.makepyfile(test_site=suite)
    full, full_out = _run(pytester, facts_dir, "full")
    lean, lean_out = _run(pytester, facts_dir, "lean", LEAN_OPTION)
    verdicts, gate = _documents(full_out)
    assert _documents(lean_out) == (verdicts, gate)
    assert lean.ret == full.ret == pytest.ExitCode.TESTS_FAILED
    statuses = {(v["test"].split("[")[0], v["node"]): v["status"] for v in verdicts}
    assert statuses[("test_numa_balancing", "n01")] == "pass"
    assert statuses[("test_numa_balancing", "n02")] == "incomplete"
    assert statuses[("test_numa_balancing", "n03")] == "fail"
    assert {n: d["admitted"] for n, d in gate["nodes"].items()} == {"n01": suite is VERDICTS_ONLY, "n02": False,
                                                                     "n03": False}
    assert {r.nodeid for r in _test_reports(full)} == {f"test_site.py::{v['test']}" for v in verdicts}
    # the lean protocol's two reports of a test (setup, teardown) and no call: pytest's protocol ran only the
    # tests whose outcome the lean protocol does not map
    again = {r.nodeid for r in _test_reports(lean) if r.when == "call"}
    # and nothing read the others' reports (pytester's recorder watches hook calls, it implements none): the
    # plugin recorded their outcomes without making any
    assert {r.nodeid for r in _test_reports(lean)} == again
    if suite is VERDICTS_ONLY:
        assert again == set()
    else:
        assert again == {"test_site.py::test_site_assertion[n03]", "test_site.py::test_site_skip[n01]",
                         "test_site.py::test_site_xfail[n03]", "test_site.py::test_site_error[n02]",
                         "test_site.py::test_site_fails_its_own_way[n01]"}, again


CONFTEST_WATCHING = '''
def pytest_runtest_setup(item):
    item.config.stash.setdefault("seen", 0)
'''


@pytest.mark.parametrize(("files", "args"), [
    ({"conftest": CONFTEST_WATCHING}, ()),
    ({}, ("-x",)),
    ({"test_tmp": 'import pytest\n\n@pytest.mark.check("SITE-09")\ndef test_tmp(node, tmp_path):\n    pass\n'}, ()),
    ({"test_marked": 'import pytest\n\n@pytest.mark.check("SITE-09")\n@pytest.mark.slow\n'
                     'def test_marked(node):\n    pass\n'}, ()),
], ids=["a-conftest-watches-each-test", "maxfail", "a-fixture-of-pytest", "another-mark"])
@pytest.mark.filterwarnings("ignore::pytest.PytestUnknownMarkWarning")  # the site's mark, undeclared
def test_the_lean_protocol_stands_aside_where_something_could_tell(
        pytester: pytest.Pytester, facts_dir: Path, files: dict[str, str], args: tuple[str, ...]) -> None:
    pytester.makepyfile(test_site=VERDICTS_ONLY, **files)
    full, full_out = _run(pytester, facts_dir, "full", *args)
    lean, lean_out = _run(pytester, facts_dir, "lean", LEAN_OPTION, *args)
    assert _documents(lean_out) == _documents(full_out)
    assert len(_test_reports(lean)) == len(_test_reports(full)) > 0


class WrapsTheLoop:
    """Wraps pytest_runtestloop, new style, and runs no test itself (a timer, a progress bar)."""

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Any:
        return (yield)


def test_a_plugin_that_wraps_the_loop_leaves_the_lean_loop_in_place(
        pytester: pytest.Pytester, facts_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The plugin's own loop judges the tests (none goes through pytest_runtest_protocol), as the same verdicts."""
    from burnin.plugin import _PluginState

    through_pytest: list[str] = []
    protocol = _PluginState.pytest_runtest_protocol

    @pytest.hookimpl(tryfirst=True)
    def counted(self: _PluginState, item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
        through_pytest.append(item.nodeid)
        return protocol(self, item, nextitem)

    monkeypatch.setattr(_PluginState, "pytest_runtest_protocol", counted)
    pytester.makepyfile(test_site=VERDICTS_ONLY)
    _, full_out = _run(pytester, facts_dir, "full")
    through_pytest.clear()
    lean_out = pytester.path / "lean"
    pytester.inline_run("--burnin-facts", str(facts_dir), "--burnin-out", str(lean_out), "--rootdir",
                        str(pytester.path), *PYTEST_ARGS, LEAN_OPTION, plugins=[WrapsTheLoop()])
    assert _documents(lean_out) == _documents(full_out)
    assert through_pytest == []


class FactsReads:
    def __init__(self) -> None:
        self.nodes: list[str] = []

    def pytest_burnin_facts_read(self, node: str, path: Path) -> None:
        self.nodes.append(node)


class WhenOrdered:
    """Whether the judging workers had nodes to judge when pytest began to collect the tests, and when the tests
    were being ordered (after every test was collected, before ``-k`` deselected any)."""

    def __init__(self) -> None:
        self.collecting: bool | None = None
        self.handed_out: bool | None = None

    def pytest_collection(self, session: pytest.Session) -> None:
        from burnin.plugin import _STATE

        self.collecting = session.config.stash[_STATE].handed_out

    def pytest_collection_modifyitems(self, config: pytest.Config) -> None:
        from burnin.plugin import _STATE

        self.handed_out = config.stash[_STATE].handed_out


@pytest.mark.proc  # starts the judging workers
def test_a_large_fleet_is_judged_in_worker_processes_with_the_same_verdicts(pytester: pytest.Pytester,
                                                                            tmp_path: Path) -> None:
    folder = tmp_path / "fleet"
    folder.mkdir()
    nodes = [f"n{i:03d}" for i in range(1, POOL_MIN_NODES + 5)]
    for index, name in enumerate(nodes):
        (folder / f"{name}.json").write_text(json.dumps(_facts(NODES[index % 3])))
    (folder / "n007.json").write_text("{not json")  # no worker can judge it: the plugin does, as ever
    pytester.makepyfile(test_site=VERDICT_TESTS)
    documents, reads = [], []
    for name, args in (("alone", ()), ("workers", (JOBS_OPTION, "2"))):
        read, ordered = FactsReads(), WhenOrdered()
        out = pytester.path / name
        pytester.inline_run("--burnin-facts", str(folder), "--burnin-out", str(out), "--rootdir", str(pytester.path),
                            *PYTEST_ARGS, LEAN_OPTION, *args, plugins=[read, ordered])
        documents.append(_documents(out))
        reads.append(read.nodes)
        # the workers start on the first nodes (every registered check) while pytest collects the tests
        assert ordered.collecting is ordered.handed_out is bool(args)
    assert documents[0] == documents[1]
    verdicts, gate = documents[0]
    assert len(verdicts) == 2 * len(nodes)
    assert {n for n, d in gate["nodes"].items() if d["admitted"]} == set(nodes[0::3]) - {"n007"}
    assert next(v for v in verdicts if v["node"] == "n007")["status"] == "incomplete"
    # judged here: each node's facts read once (the unreadable one at each attempt); by the workers: here
    # only the node they could not judge
    assert [n for n in reads[0] if n != "n007"] == [n for n in nodes if n != "n007"]
    assert set(reads[1]) == {"n007"}
    assert _workers_gone()  # the session stopped them


def _workers_gone(within_s: float = 120.0) -> bool:
    """Waits for this process's worker processes to end (the deadline only ends a run that would hang)."""
    deadline = time.monotonic() + within_s
    while multiprocessing.active_children():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.proc  # starts the judging workers
def test_with_a_selection_the_workers_get_their_nodes_once_the_tests_are_selected(pytester: pytest.Pytester,
                                                                               tmp_path: Path) -> None:
    """-k deselects tests after the plugins order them: the workers get the selected ones' nodes then, and
    judge every node still (the plugin reads no facts document itself), with the same verdicts."""
    folder = tmp_path / "fleet"
    folder.mkdir()
    nodes = [f"n{i:03d}" for i in range(1, POOL_MIN_NODES + 5)]
    for index, name in enumerate(nodes):
        (folder / f"{name}.json").write_text(json.dumps(_facts(NODES[index % 3])))
    pytester.makepyfile(test_site=VERDICT_TESTS)
    documents = []
    for name, args in (("alone", ()), ("workers", (JOBS_OPTION, "2"))):
        read, ordered = FactsReads(), WhenOrdered()
        out = pytester.path / name
        pytester.inline_run("--burnin-facts", str(folder), "--burnin-out", str(out), "--rootdir", str(pytester.path),
                            *PYTEST_ARGS, LEAN_OPTION, "-k", "not applicable_first", *args, plugins=[read, ordered])
        documents.append(_documents(out))
        if args:
            assert ordered.collecting is ordered.handed_out is False
            assert read.nodes == []
    assert documents[0] == documents[1]
    assert len(documents[0][0]) == len(nodes)


class ReportReader:
    """Reads only when, nodeid, outcome and user_properties of reports, and says so (the history's recorder)."""

    burnin_lean_reports = True

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str, dict[str, object]]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seen.append((report.nodeid, report.when, report.outcome, dict(report.user_properties)))


def test_a_report_reader_that_says_so_keeps_the_lean_protocol_with_two_reports_a_test(
        pytester: pytest.Pytester, facts_dir: Path) -> None:
    pytester.makepyfile(test_site=EVERY_SHAPE)
    readers = {"full": ReportReader(), "lean": ReportReader()}
    results = {}
    for name, args in (("full", ()), ("lean", (LEAN_OPTION,))):
        out = pytester.path / name
        results[name] = pytester.inline_run("--burnin-facts", str(facts_dir), "--burnin-out", str(out),
                                            "--rootdir", str(pytester.path), *PYTEST_ARGS, *args,
                                            plugins=[readers[name]])
    assert _documents(pytester.path / "lean") == _documents(pytester.path / "full")
    assert results["lean"].ret == results["full"].ret
    # what the reader sees last of each test: the same outcome, the same final properties
    full = {nodeid: (outcome, props) for nodeid, when, outcome, props in readers["full"].seen if when == "teardown"}
    lean = {nodeid: (outcome, props) for nodeid, when, outcome, props in readers["lean"].seen if when == "teardown"}
    final = {nodeid: props for nodeid, (_, props) in full.items()}
    assert {nodeid: props for nodeid, (_, props) in lean.items()} == final
    judged = [r for r in _test_reports(results["lean"]) if r.when == "call"]  # only the tests run again
    assert {r.nodeid for r in judged} == {"test_site.py::test_site_assertion[n03]", "test_site.py::test_site_skip[n01]",
                                          "test_site.py::test_site_xfail[n03]", "test_site.py::test_site_error[n02]",
                                          "test_site.py::test_site_fails_its_own_way[n01]"}
    assert [when for nodeid, when, _, _ in readers["lean"].seen
            if nodeid == "test_site.py::test_numa_balancing[n01]"] == ["setup", "teardown"]
