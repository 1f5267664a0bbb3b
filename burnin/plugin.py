"""pytest plugin: node-parametrized fixtures, JUnit properties, and the gate.

Registered through the ``pytest11`` entry point. Suites ask for ``node``,
``facts``, ``topology`` or ``verdict``; the plugin parametrizes them over the
nodes whose facts were gathered (``--burnin-facts DIR``), records the JUnit
properties ``node``, ``check``, ``measured``, ``expected``, ``verdict`` and
``reason``, and at the end writes ``verdicts.json`` and ``gate.json`` to
``--burnin-out``, atomically and once.

It fails closed. Every node-parametrized test ends as pass, fail, incomplete
or not-applicable (:func:`burnin.suite.not_applicable`, with its reason). A
skip, an xfail or xpass, an error in setup or teardown, or a test that never
reported is ``incomplete`` for that node, and is reported to JUnit as a
failure or error carrying the one-line cause. A run that deselected tests
(``-k``, ``-m``), was interrupted, or judged the facts of ``burnin run --dry-run``
(``--burnin-dry-run``) admits nobody and says so in gate.json.

It judges node by node: the node tests are run in node-major order (every
check of one node, then the next node), so that each node's facts document is
read and parsed once and dropped when its node is done, whatever the size of
the fleet; verdicts.json keeps the order in which the tests were collected.
The fixtures ask pytest for no ``request`` (pytest builds two fixture
definitions for each fixture that asks, in every test): the plugin knows the
test being set up and the session's state itself.

At a fleet's size ``burnin run`` passes ``--burnin-lean``: where nothing in the
session could tell the difference, the plugin judges each node test itself
instead of through pytest's three phases (:mod:`burnin.plugin_lean`), and from
:data:`~burnin.plugin_judge.POOL_MIN_NODES` nodes on the checks run in worker
processes (``--burnin-jobs``, :mod:`burnin.plugin_judge`); the verdicts are the
same either way.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import operator
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pytest

from burnin.atomic import write_text_atomic
from burnin.errors import BurninError
from burnin.evaluate.verdict import Status, Verdict
from burnin.facts import Facts
from burnin.gate.decide import FAIL, INCOMPLETE, NOT_APPLICABLE, PASS, CheckOutcome, decide, gate_document, hold_all
from burnin.outcomes import (
    ItemResult,
    judge_phase,
    outcome_from_properties,
    set_property,
    skip_message,
    suite_name,
    test_name,
)
from burnin.plugin_judge import JOBS_OPTION, POOL_MIN_NODES, STARTED_JUDGES, FleetJudging, StartedJudges
from burnin.plugin_lean import LEAN_OPTION, judge_lean, lean_session
from burnin.runfiles import GATE_FILE, RUN_FILE, VERDICTS_FILE
from burnin.suite import CheckIncomplete, not_applicable
from burnin.text import printable
from burnin.topology.model import Topology

if TYPE_CHECKING:
    from burnin.checks.base import CheckSpec
    from burnin.history.trendgate import TrendFailure

_STATE = pytest.StashKey["_PluginState"]()
_ITEM_RESULT = pytest.StashKey["ItemResult"]()
_ITEM_CHECK = pytest.StashKey[str]()
_ITEM_NODE = pytest.StashKey["str | None"]()
_FULL_PROTOCOL = pytest.StashKey[bool]()
FACTS_KEPT = 2
"""Parsed facts documents kept at once: the node being judged and the one before (node-major order)."""
DRY_RUN_HOLD = "dry run: --dry-run launched nothing, and a dry run admits nobody"


class _PluginState:
    def __init__(self, facts_dir: Path | None, default_topology: str, out_dir: Path | None) -> None:
        self.facts_dir = facts_dir
        self.default_topology = default_topology
        self.out_dir = out_dir
        self.node_topology: dict[str, str] = {}
        self.nodes: list[str] = []
        self.outcomes: dict[str, CheckOutcome] = {}  # test id -> final outcome, in report order
        self.expected: dict[str, tuple[str, str]] = {}  # selected test id -> (node, check)
        self.durations: dict[str, float] = {}  # test id -> seconds so far (setup + call + teardown)
        self.selected = 0
        self.deselected = 0
        self.collect_skips: list[str] = []
        self.stopped: str | None = None
        self.current: pytest.Item | None = None  # the test being set up
        self.current_check: str | None = None  # its check mark's id (None: it has none)
        self.order: dict[str, int] = {}  # selected test id -> its place in collection order
        self._facts: OrderedDict[str, Facts] = OrderedDict()
        self._topologies: dict[str, Topology] = {}
        self._suites: dict[str, str] = {}  # test file -> suite name
        self._checks: dict[str, CheckSpec] | None = None
        self.hook: Any = None  # config.hook: pytest_burnin_facts_read and pytest_burnin_judged
        self.lean = False  # every test is judged by the lean protocol (burnin.plugin_lean)
        self._lean_files: dict[Path, tuple[str, bool]] = {}  # test file -> its path in reports, readers
        self.jobs = 1  # worker processes a lean run of POOL_MIN_NODES or more judges its checks in
        self._workers: FleetJudging | None = None
        if facts_dir is not None:
            run_file = facts_dir / RUN_FILE
            if run_file.exists():
                run = json.loads(run_file.read_text(encoding="utf-8"))
                self.node_topology = run.get("topology_by_node", {})
                self.nodes = list(run.get("nodes", []))
                self.default_topology = run.get("topology", default_topology)
            if not self.nodes:
                self.nodes = sorted(p.stem for p in facts_dir.glob("*.json") if p.name != RUN_FILE)

    # -- pytest hooks of this run (registered as a plugin object) --------------------------------

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.deselected += len(items)

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        """Every test is collected: the judging workers learn which checks each node's tests ask now, while
        pytest and the plugins order and select the tests (unless ``-k``/``-m`` will deselect some: then
        once they have)."""
        if self._workers is not None and not _selecting(config):
            self._workers.ask(self._asked(items))

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.selected = len(session.items)
        for item in session.items:
            node = _node_of(item)
            if node is not None:
                self.expected[item.nodeid] = (node, _check_id(item))
        self.lean = self.facts_dir is not None and lean_session(session, __name__)
        if not self.lean:
            self.close_pool()
        elif self._workers is not None and _selecting(session.config):
            self._workers.ask(self._asked(session.items))

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool | None:
        """A lean session's tests judged one after the other without a hook call each (pytest's own loop
        otherwise, or where another plugin runs the tests: xdist; one that wraps the loop runs none)."""
        if not self.lean or session.config.option.collectonly or session.testsfailed or any(
                impl.plugin is not self and impl.plugin_name != "main"
                for impl in session.config.hook.pytest_runtestloop.get_hookimpls()
                if not (impl.hookwrapper or impl.wrapper)):
            return None
        for item in session.items:
            self.judge_lean_item(item, session)
            if session.shouldfail:
                raise session.Failed(session.shouldfail)
            if session.shouldstop:
                raise session.Interrupted(session.shouldstop)
        return True

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
        if not self.lean or item.stash.get(_FULL_PROTOCOL, False):
            return None
        self.judge_lean_item(item, item.session)
        return True

    def judge_lean_item(self, item: pytest.Item, session: pytest.Session) -> None:
        """Judge a node test through the lean protocol (:mod:`burnin.plugin_lean`); what it does not map runs
        again through pytest's whole protocol, as the last test of the session (nothing set up is left behind).

        Its two reports (setup, then teardown with the outcome) go to the report readers there are
        (:data:`~burnin.plugin_lean.LEAN_REPORTS`); with none, the outcome is recorded and counted as
        pytest's session counts a failed report, without reports."""
        assert isinstance(item, pytest.Function)
        node, mark = _node_of(item), _check_mark(item)
        assert node is not None
        props = item.user_properties
        before = list(props)
        location, readers = self._lean_files.get(item.path) or self._lean_file(item)
        if readers:
            item.ihook.pytest_runtest_logreport(report=pytest.TestReport(  # a node's first test: the recorder commits
                item.nodeid, (location, None, item.name), {}, "passed", None, "setup", user_properties=before))
        self.current, self.current_check = item, mark
        started = time.perf_counter()
        judged = judge_lean(item, node, mark if mark is not None else _check_id(item), _FIXTURE_VALUES)
        if judged is None:
            item.user_properties[:] = before
            item.stash[_FULL_PROTOCOL] = True
            item.ihook.pytest_runtest_protocol(item=item, nextitem=None)
            return
        result = ItemResult()
        result.add(*judged)
        _set_outcome(item, result)
        # the outcome as pytest's reports carry it: failed (pytest's exit status counts it), skipped, passed
        status = result.status
        outcome: Literal["passed", "failed", "skipped"] = "failed" if status in (FAIL, INCOMPLETE) else \
            "skipped" if status == NOT_APPLICABLE else "passed"
        properties: list[tuple[str, object]] = [
            (name, value if type(value) is str and value.isprintable() else printable(value))
            for name, value in item.user_properties]
        if readers:
            longrepr = (location, 0, result.reason) if outcome == "skipped" else result.reason or None
            item.ihook.pytest_runtest_logreport(report=pytest.TestReport(
                item.nodeid, (location, None, item.name), {}, outcome, longrepr, "teardown",
                user_properties=properties, duration=time.perf_counter() - started))
            return
        test_id = item.nodeid
        self.record(test_id, test_id.partition("::")[0], properties, time.perf_counter() - started)
        if outcome == "failed":
            session.testsfailed += 1  # as pytest's session counts a failed report (no --maxfail in a lean run)

    def _lean_file(self, item: pytest.Item) -> tuple[str, bool]:
        """A test file's path in pytest's reports and whether anything there reads test reports but the
        plugin and pytest's session (which counts the failed ones)."""
        readers = any(impl.plugin is not self and impl.plugin_name != "session"
                      for impl in item.ihook.pytest_runtest_logreport.get_hookimpls())
        found = self._lean_files[item.path] = (item.location[0], readers)
        return found

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        self.current, self.current_check = item, _check_mark(item)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.skipped:
            self.collect_skips.append(f"{report.nodeid or 'a test module'} skipped at collection: "
                                      f"{printable(skip_message(report.longrepr))}")

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        self.stopped = printable(excinfo.exconly().strip() or excinfo.typename, limit=200)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """The teardown report carries the test's final outcome (see :func:`pytest_runtest_makereport`)."""
        self.durations[report.nodeid] = self.durations.get(report.nodeid, 0.0) + float(report.duration or 0.0)
        if report.when == "teardown":
            self.record(report.nodeid, report.fspath, report.user_properties, self.durations.pop(report.nodeid, 0.0))

    def record(self, test_id: str, path: str, properties: list[tuple[str, object]], duration_s: float) -> None:
        """A test's outcome, from its final properties (``path``: its file as pytest's reports name it)."""
        suite = self._suites.get(path)
        if suite is None:
            suite = self._suites[path] = suite_name(path)
        outcome = outcome_from_properties(properties, test=test_name(test_id), suite=suite, duration_s=duration_s)
        if outcome is None:
            return
        self.outcomes[test_id] = outcome
        if self.hook is not None:
            self.hook.pytest_burnin_judged(node=outcome.node, check=outcome.check, status=outcome.status)

    # -- the checks judged in worker processes (a lean run of a large fleet) ----------------------

    def start_pool(self, config: pytest.Config, started: StartedJudges | None = None) -> None:
        """Start the judging workers (they load the checks and node types while pytest collects), or take those
        ``started`` before the session, and, unless ``-k``/``-m`` will deselect tests, hand them their first
        nodes now."""
        assert self.facts_dir is not None
        topologies: dict[str, Topology] = {}
        for name in sorted({self.default_topology, *self.node_topology.values()}) if started is None else ():
            with contextlib.suppress(Exception):  # its nodes are judged here, where the error is the run's
                topologies[name] = self.topology_named(name)
        try:
            self._workers = FleetJudging(
                self.jobs, self.facts_dir, self.nodes, lambda node: self.node_topology.get(node, self.default_topology),
                topologies, started=started)
        except Exception:  # noqa: BLE001  # no workers (no process left, a broken pool): judged here, as ever
            self._workers = None
            return
        if not _selecting(config):
            self._workers.start()

    @staticmethod
    def _asked(items: list[pytest.Item]) -> dict[str, tuple[str, ...]]:
        """Node -> the checks its tests ask a verdict of."""
        checks: dict[str, dict[str, None]] = {}
        for item in items:
            node, mark = _node_of(item), _check_mark(item)
            if node is not None and mark is not None and "verdict" in getattr(item, "fixturenames", ()):
                checks.setdefault(node, {})[mark] = None
        return {node: tuple(ids) for node, ids in checks.items()}

    @property
    def handed_out(self) -> bool:
        """Whether the judging workers have nodes to judge (they judge them from then on)."""
        return self._workers is not None and self._workers.handed_out

    def pooled(self, node: str, check: str) -> Verdict | None:
        """The workers' verdict of ``check`` on ``node`` (None: judge it here, as without workers)."""
        return self._workers.verdict(node, check) if self._workers is not None else None

    def close_pool(self) -> None:
        if self._workers is not None:
            self._workers.close()
        self._workers = None

    # -- facts and topologies --------------------------------------------------------------------

    def facts(self, node: str) -> Facts:
        """The node's facts, read once while its tests run (the last :data:`FACTS_KEPT` nodes are kept)."""
        found = self._facts.get(node)
        if found is not None:
            self._facts.move_to_end(node)
            return found
        assert self.facts_dir is not None
        path = self.facts_dir / f"{node}.json"
        if path.exists():
            if self.hook is not None:
                self.hook.pytest_burnin_facts_read(node=node, path=path)
            found = Facts.load(path)
        else:
            found = Facts.unreachable_node(node, "no facts were gathered")
        self._facts[node] = found
        while len(self._facts) > FACTS_KEPT:
            self._facts.popitem(last=False)
        return found

    def topology(self, node: str) -> Topology:
        return self.topology_named(self.node_topology.get(node, self.default_topology))

    def topology_named(self, name: str) -> Topology:
        """The node type ``name`` (a BurninError when it cannot be loaded), loaded once."""
        found = self._topologies.get(name)
        if found is None:
            from burnin.topology.load import find_topology

            found = self._topologies[name] = find_topology(name)
        return found

    def check(self, check_id: str) -> CheckSpec | None:
        """The registered check ``check_id`` (None: no such check)."""
        if self._checks is None:
            from burnin.checks import load_all

            self._checks = load_all()
        return self._checks.get(check_id)

    # -- the end of the run ----------------------------------------------------------------------

    def final_outcomes(self) -> list[CheckOutcome]:
        """Every reported outcome, plus ``incomplete`` for each selected test that never finished."""
        outcomes = dict(self.outcomes)
        for test_id, (node, check) in self.expected.items():
            if test_id not in outcomes:
                outcomes[test_id] = CheckOutcome(node, check, INCOMPLETE,
                                                 f"{check} has no outcome: the test did not run to the end",
                                                 test=test_name(test_id), suite=suite_name(test_id.split("::")[0]))
        # in collection order (they ran node by node: self.order holds it); any other test after them, as recorded
        ordered = [outcomes.pop(test_id) for test_id in self.order if test_id in outcomes]
        return ordered + list(outcomes.values())

    def partial_reasons(self, config: pytest.Config) -> list[str]:
        """Why this run did not judge every check of its suites (empty: it did)."""
        reasons = []
        if self.deselected:
            how = [f"-k {config.option.keyword!r}"] if getattr(config.option, "keyword", "") else []
            if getattr(config.option, "markexpr", ""):
                how.append(f"-m {config.option.markexpr!r}")
            collected = self.selected + self.deselected
            reasons.append(f"{' '.join(how) + ' ' if how else ''}selected {self.selected} of {collected} tests")
        if any("::" in str(arg) for arg in config.args):
            reasons.append("single tests were named on the command line")
        reasons.extend(self.collect_skips)
        return reasons

    def selection(self, config: pytest.Config) -> dict[str, Any]:
        return {
            "keyword": getattr(config.option, "keyword", "") or None,
            "markexpr": getattr(config.option, "markexpr", "") or None,
            "collected": self.selected + self.deselected,
            "selected": self.selected,
            "deselected": self.deselected,
            "node_tests": len(self.expected),
            "judged": len(self.outcomes),
            "skipped_at_collection": list(self.collect_skips),
        }


def _stop_reason(state: _PluginState, exitstatus: int | pytest.ExitCode) -> str | None:
    if state.stopped:
        return state.stopped
    if exitstatus in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR, pytest.ExitCode.USAGE_ERROR):
        return f"pytest stopped with exit status {int(exitstatus)} ({pytest.ExitCode(exitstatus).name.lower()})"
    return None


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("burnin", "burnin node acceptance")
    group.addoption("--burnin-facts", metavar="DIR", default=None,
                    help="folder of per-node facts JSON gathered by `burnin run` (or the collector)")
    group.addoption("--burnin-topology", metavar="NAME|FILE", default="hgx-h100-8gpu",
                    help="node type to judge against (default: hgx-h100-8gpu)")
    group.addoption("--burnin-out", metavar="DIR", default=None,
                    help="write verdicts.json and gate.json here at the end of the session")
    group.addoption("--burnin-dry-run", action="store_true", default=False,
                    help="the facts come from `burnin run --dry-run`, which launched nothing: the gate admits nobody")
    group.addoption(JOBS_OPTION, type=int, default=1, metavar="N",
                    help=f"with {LEAN_OPTION}, judge the checks of {POOL_MIN_NODES} nodes or more in N worker "
                         "processes (burnin run: the CPUs it may use)")
    group.addoption(LEAN_OPTION, action="store_true", default=False,
                    help="judge node tests without pytest's per-test machinery where no plugin or option could "
                         "tell (burnin run; see burnin.plugin_lean)")


_ACTIVE: list[_PluginState] = []
"""The states of the pytest sessions running in this process, innermost last (pytester runs one inside
another): the fixtures find theirs here instead of asking pytest for ``request``."""


class _Hookspecs:
    @pytest.hookspec
    def pytest_burnin_facts_read(self, node: str, path: Path) -> None:
        """Called each time the plugin reads a node's facts document ``path`` from disk (once per node)."""

    @pytest.hookspec
    def pytest_burnin_judged(self, node: str, check: str, status: str) -> None:
        """Called when a node test's outcome is in (``burnin run``'s progress counts them)."""

    @pytest.hookspec
    def pytest_burnin_more_outcomes(self, outcomes: list[CheckOutcome]) -> list[TrendFailure]:
        """Called once every node test is judged, before the gate decides: failures judged beyond the node tests
        (the history's recorder: a TREND beyond the site's limit, ``burnin run --fail-on-trend``)."""
        return []


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(_Hookspecs)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "check(id): the catalog check id a test judges (e.g. GPU-10)")
    facts_dir = config.getoption("--burnin-facts", None)
    out_dir = config.getoption("--burnin-out", None)
    state = _PluginState(
        Path(facts_dir) if facts_dir else None,
        config.getoption("--burnin-topology", "hgx-h100-8gpu"),
        Path(out_dir) if out_dir else None,
    )
    state.hook = config.hook
    state.jobs = max(1, int(config.getoption(JOBS_OPTION, 1) or 1))
    config.stash[_STATE] = state
    config.pluginmanager.register(state, "burnin-state")
    _ACTIVE.append(state)


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is not None:
        state.close_pool()
    if state in _ACTIVE:
        _ACTIVE.remove(state)


def _active() -> _PluginState:
    return _ACTIVE[-1]


def pytest_sessionstart(session: pytest.Session) -> None:
    """A gate.json left by an earlier run in the same folder must never be read as this run's."""
    state: _PluginState = session.config.stash[_STATE]
    if state.out_dir is not None and state.facts_dir is not None and not hasattr(session.config, "workerinput"):
        for name in (GATE_FILE, VERDICTS_FILE):
            with contextlib.suppress(FileNotFoundError):
                (state.out_dir / name).unlink()
    if (state.facts_dir is None or not session.config.getoption(LEAN_OPTION, False)
            or hasattr(session.config, "workerinput")):
        return
    started = session.config.pluginmanager.get_plugin(STARTED_JUDGES)
    if isinstance(started, StartedJudges):  # started before the session, for it: used whatever the fleet's size
        state.start_pool(session.config, started)
    elif state.jobs > 1 and len(state.nodes) >= POOL_MIN_NODES:
        state.start_pool(session.config)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "node" not in metafunc.fixturenames:
        return
    state = metafunc.config.stash[_STATE]
    if state.facts_dir is not None:
        metafunc.parametrize("node", state.nodes, ids=state.nodes)


@pytest.fixture
def node() -> str:
    """The node under test; parametrized over every node when ``--burnin-facts`` is given."""
    raise pytest.UsageError("burnin: suites need nodes: pass --burnin-facts DIR (see `burnin run`)")


def _selecting(config: pytest.Config) -> bool:
    """Whether ``-k`` or ``-m`` will deselect tests once they are collected."""
    return bool(getattr(config.option, "keyword", "") or getattr(config.option, "markexpr", ""))


def _check_mark(item: pytest.Item) -> str | None:
    """The id of the item's ``@pytest.mark.check(ID)`` (None: it has none), looked up once per item."""
    try:
        return item.stash[_ITEM_CHECK] or None
    except KeyError:
        pass
    # the closest marker is the item's own first (pytest's get_closest_marker walks the item, then its parents)
    marker = next((m for m in item.own_markers if getattr(m, "name", None) == "check"), None) \
        or item.get_closest_marker("check")
    mark = item.stash[_ITEM_CHECK] = str(marker.args[0]) if marker is not None and marker.args else ""
    return mark or None


def _check_id(item: pytest.Item) -> str:
    mark = _check_mark(item)
    if mark is not None:
        return mark
    return f"SITE:{item.originalname if isinstance(item, pytest.Function) else item.name}"


def _node_of(item: pytest.Item) -> str | None:
    try:
        return item.stash[_ITEM_NODE]
    except KeyError:
        pass
    callspec = getattr(item, "callspec", None)
    node = str(callspec.params["node"]) if callspec is not None and "node" in callspec.params else None
    item.stash[_ITEM_NODE] = node
    return node


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Label the node tests with their node and check, and run them node by node (each node's facts are
    read once, then dropped); the collection order is kept for verdicts.json."""
    state: _PluginState = config.stash[_STATE]
    place = {name: index for index, name in enumerate(state.nodes)}
    unknown = len(place)
    keys = []  # each item's place in the run's order of nodes (-1: no node test)
    for index, item in enumerate(items):
        node = _node_of(item)
        if node is not None:
            item.user_properties += (("node", node), ("check", _check_id(item)))
            state.order[item.nodeid] = index
            keys.append(place.get(node, unknown))
        else:
            keys.append(-1)
    if state.facts_dir is not None:  # a stable sort: each node's tests in their collection order
        items[:] = [items[index] for index in sorted(range(len(items)), key=keys.__getitem__)]


@pytest.fixture
def facts(node: str) -> Facts:
    """The node's facts, as the collector gathered them."""
    return _facts_of(node)


def _facts_of(node: str) -> Facts:
    return _active().facts(node)


@pytest.fixture
def topology(node: str) -> Topology:
    """The node type this node is judged against."""
    return _topology_of(node)


def _topology_of(node: str) -> Topology:
    try:
        return _active().topology(node)
    except BurninError as exc:
        raise pytest.UsageError(str(exc)) from None


def _current_check() -> tuple[pytest.Item, str]:
    """The test being set up and its check id (a UsageError without ``@pytest.mark.check(ID)``)."""
    state = _active()
    item, mark = state.current, state.current_check
    if item is None or mark is None:
        where = item.nodeid if item is not None else "a test"
        raise pytest.UsageError(f"{where}: the verdict fixture needs @pytest.mark.check(ID)")
    return item, mark


@pytest.fixture
def declared_applicable(node: str) -> None:
    """Stand aside, with the topology's reason, where the node type declares the test's check not applicable.

    Requested before ``verdict``: a RoCE-only node type is never judged on a subnet manager (IB-05), a node
    type without a software manifest never on one (INV-10), one without a storage fabric never on it (STO),
    one that runs no DCGM never on DCGM's answers (GPU-12, GPU-13).
    """
    _stand_aside_where_declared(node)


def _stand_aside_where_declared(node: str) -> None:
    from burnin.checks.base import not_applicable_reason

    _, check = _current_check()
    reason = not_applicable_reason(check, _topology_of(node))
    if reason is not None:
        not_applicable(reason)


@pytest.fixture
def verdict(node: str) -> Verdict:
    """The verdict of the test's ``@pytest.mark.check(ID)`` on this node.

    Judges the facts the plugin read for the node (the ``facts`` fixture's) against its node type.
    Records measured/expected/verdict as JUnit properties. An incomplete check
    raises here, in setup, so it is reported as an error, not a failure.
    """
    return _verdict_of(node)


def _verdict_of(node: str) -> Verdict:
    item, check = _current_check()
    state = _active()
    spec = state.check(check)
    if spec is None:
        raise pytest.UsageError(f"{item.nodeid}: unknown check id {check!r}")
    result = state.pooled(node, check)
    if result is None:
        result = spec.func(state.facts(node), _topology_of(node))
    status = result.status
    item.user_properties += (("measured", result.measured), ("expected", result.expected),
                             ("verdict", status.value), ("reason", result.reason))
    if status is Status.INCOMPLETE:
        raise CheckIncomplete(result.reason)
    return result


_FIXTURE_VALUES: dict[str, Callable[[str], object]] = {
    "facts": _facts_of, "topology": _topology_of, "declared_applicable": _stand_aside_where_declared,
    "verdict": _verdict_of,
}
"""What each of the plugin's fixtures gives a node's test (``node`` is the test's parameter): the lean
protocol (:mod:`burnin.plugin_lean`) sets them up without pytest's fixture machinery."""

@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Judge each phase of a node test; the teardown report carries the final verdict and reason.

    Runs outermost (after pytest's skip/xfail handling) so that a skip or an
    xfail can be turned into the ``incomplete`` it is.
    """
    report: pytest.TestReport = yield
    node = _node_of(item)
    if node is None:
        return report
    check = _check_id(item)
    result = item.stash.setdefault(_ITEM_RESULT, ItemResult())
    judged = judge_phase(report, call, check, dict(item.user_properties))
    if judged is not None:
        result.add(*judged)
    if report.when == "teardown" and result.status is None:
        result.add(INCOMPLETE, f"{check} has no outcome: the test reported no result")
    _set_outcome(item, result)
    report.user_properties = [(name, printable(value)) for name, value in item.user_properties]
    return report


def _set_outcome(item: pytest.Item, result: ItemResult) -> None:
    """The test's final verdict and reason in its properties."""
    if result.status is not None:
        set_property(item.user_properties, "verdict", result.status)
        if result.reason or result.status != PASS:
            set_property(item.user_properties, "reason", result.reason)


_OUTCOME_FIELDS = tuple(field.name for field in dataclasses.fields(CheckOutcome))
_OUTCOME_VALUES = operator.attrgetter(*_OUTCOME_FIELDS)
_PRINTABLE_AT = tuple(_OUTCOME_FIELDS.index(name) for name in ("reason", "measured", "expected"))
_BETWEEN = '}, {"' + _OUTCOME_FIELDS[0] + '": '
"""Where one outcome's JSON object ends and the next begins in a JSON list of them: nowhere else, as a string
holds no unescaped quote and every value is a string or a number."""


def verdicts_document(outcomes: list[CheckOutcome]) -> str:
    """verdicts.json: a JSON list of the outcomes, one per line (json's C encoder writes the list at once, and
    each object is put on a line of its own)."""
    records = []
    for outcome in outcomes:
        values = list(_OUTCOME_VALUES(outcome))
        for index in _PRINTABLE_AT:
            values[index] = printable(values[index])
        records.append(dict(zip(_OUTCOME_FIELDS, values, strict=True)))
    listed = json.dumps(records)[1:-1]
    return "[\n" + listed.replace(_BETWEEN, "},\n" + _BETWEEN[3:]) + "\n]\n"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    state: _PluginState = session.config.stash[_STATE]
    state.close_pool()
    if hasattr(session.config, "workerinput"):
        return  # xdist worker: the controller writes the gate
    if state.out_dir is None or state.facts_dir is None:
        return
    outcomes = state.final_outcomes()
    outcomes += [CheckOutcome(f.node, f.check, FAIL, f.reason, f.measured, f.expected, f"trend[{f.node}]", "history")
                 for found in session.config.hook.pytest_burnin_more_outcomes(outcomes=list(outcomes))
                 for f in found]
    decisions = decide(state.nodes, outcomes)
    stopped = _stop_reason(state, exitstatus)
    partial = state.partial_reasons(session.config)
    if stopped:
        decisions = hold_all(decisions, f"interrupted ({stopped}) after {len(state.outcomes)} of "
                                        f"{len(state.expected)} tests: an interrupted run admits nobody")
    if partial:
        decisions = hold_all(decisions, f"partial run ({'; '.join(partial)}): "
                                        "a run that did not judge every check admits nobody")
    dry_run = bool(session.config.getoption("--burnin-dry-run", False))
    if dry_run:
        decisions = hold_all(decisions, DRY_RUN_HOLD)
    meta: dict[str, Any] = {
        "topology": state.default_topology,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "facts": str(state.facts_dir),
        "partial": bool(partial),
        "interrupted": bool(stopped),
        "dry_run": dry_run,
        "selection": state.selection(session.config),
    }
    if stopped:
        meta["interrupted_reason"] = stopped
    if partial:
        meta["partial_reasons"] = partial
    doc = gate_document(decisions, **meta)
    # verdicts first: whoever sees gate.json sees the verdicts it came from
    write_text_atomic(state.out_dir / VERDICTS_FILE, verdicts_document(outcomes))
    write_text_atomic(state.out_dir / GATE_FILE, json.dumps(doc, indent=2) + "\n")
