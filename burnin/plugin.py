"""pytest plugin: node-parametrized fixtures, JUnit properties, and the gate.

Registered through the ``pytest11`` entry point. Suites ask for ``node``,
``facts``, ``topology`` or ``verdict``; the plugin parametrizes them over the
nodes whose facts were gathered (``--burnin-facts DIR``), records the JUnit
properties ``node``, ``check``, ``measured``, ``expected`` and ``verdict``,
and at the end writes ``verdicts.json`` and ``gate.json`` to ``--burnin-out``.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import pytest

from burnin.errors import BurninError
from burnin.evaluate.verdict import Status, Unmeasurable, Verdict
from burnin.facts import Facts
from burnin.gate.decide import CheckOutcome, decide, gate_document
from burnin.suite import CheckIncomplete
from burnin.topology.model import Topology

_STATE = pytest.StashKey["_PluginState"]()
RUN_FILE = "_run.json"


class _PluginState:
    def __init__(self, facts_dir: Path | None, default_topology: str, out_dir: Path | None) -> None:
        self.facts_dir = facts_dir
        self.default_topology = default_topology
        self.out_dir = out_dir
        self.node_topology: dict[str, str] = {}
        self.nodes: list[str] = []
        self.outcomes: list[CheckOutcome] = []
        self._facts: dict[str, Facts] = {}
        self._topologies: dict[str, Topology] = {}
        if facts_dir is not None:
            run_file = facts_dir / RUN_FILE
            if run_file.exists():
                run = json.loads(run_file.read_text(encoding="utf-8"))
                self.node_topology = run.get("topology_by_node", {})
                self.nodes = list(run.get("nodes", []))
                self.default_topology = run.get("topology", default_topology)
            if not self.nodes:
                self.nodes = sorted(p.stem for p in facts_dir.glob("*.json") if p.name != RUN_FILE)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Turn each node-parametrized test's report into a check outcome."""
        outcome = outcome_from_report(report)
        if outcome is not None:
            self.outcomes.append(outcome)

    def facts(self, node: str) -> Facts:
        if node not in self._facts:
            assert self.facts_dir is not None
            path = self.facts_dir / f"{node}.json"
            if path.exists():
                self._facts[node] = Facts.load(path)
            else:
                self._facts[node] = Facts.unreachable_node(node, "no facts were gathered")
        return self._facts[node]

    def topology(self, node: str) -> Topology:
        from burnin.topology.load import find_topology

        name = self.node_topology.get(node, self.default_topology)
        if name not in self._topologies:
            self._topologies[name] = find_topology(name)
        return self._topologies[name]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("burnin", "burnin node acceptance")
    group.addoption("--burnin-facts", metavar="DIR", default=None,
                    help="folder of per-node facts JSON gathered by `burnin run` (or the collector)")
    group.addoption("--burnin-topology", metavar="NAME|FILE", default="hgx-h100-8gpu",
                    help="node type to judge against (default: hgx-h100-8gpu)")
    group.addoption("--burnin-out", metavar="DIR", default=None,
                    help="write verdicts.json and gate.json here at the end of the session")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "check(id): the catalog check id a test judges (e.g. GPU-10)")
    facts_dir = config.getoption("--burnin-facts", None)
    out_dir = config.getoption("--burnin-out", None)
    config.stash[_STATE] = _PluginState(
        Path(facts_dir) if facts_dir else None,
        config.getoption("--burnin-topology", "hgx-h100-8gpu"),
        Path(out_dir) if out_dir else None,
    )
    config.pluginmanager.register(config.stash[_STATE], "burnin-state")


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


def _check_id(item: pytest.Item) -> str:
    marker = item.get_closest_marker("check")
    if marker is not None and marker.args:
        return str(marker.args[0])
    return f"SITE:{item.originalname if isinstance(item, pytest.Function) else item.name}"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and "node" in callspec.params:
            item.user_properties.append(("node", callspec.params["node"]))
            item.user_properties.append(("check", _check_id(item)))


@pytest.fixture
def facts(request: pytest.FixtureRequest, node: str) -> Facts:
    """The node's facts, as the collector gathered them."""
    state: _PluginState = request.config.stash[_STATE]
    return state.facts(node)


@pytest.fixture
def topology(request: pytest.FixtureRequest, node: str) -> Topology:
    """The node type this node is judged against."""
    state: _PluginState = request.config.stash[_STATE]
    try:
        return state.topology(node)
    except BurninError as exc:
        raise pytest.UsageError(str(exc)) from None


@pytest.fixture
def verdict(request: pytest.FixtureRequest, node: str, facts: Facts, topology: Topology) -> Verdict:
    """The verdict of the test's ``@pytest.mark.check(ID)`` on this node.

    Records measured/expected/verdict as JUnit properties. An incomplete check
    raises here, in setup, so it is reported as an error, not a failure.
    """
    from burnin.checks import load_all

    marker = request.node.get_closest_marker("check")
    if marker is None or not marker.args:
        raise pytest.UsageError(f"{request.node.nodeid}: the verdict fixture needs @pytest.mark.check(ID)")
    checks = load_all()
    check_id = str(marker.args[0])
    if check_id not in checks:
        raise pytest.UsageError(f"{request.node.nodeid}: unknown check id {check_id!r}")
    result = checks[check_id].func(facts, topology)
    props = request.node.user_properties
    props.append(("measured", result.measured))
    props.append(("expected", result.expected))
    props.append(("verdict", result.status.value))
    props.append(("reason", result.reason))
    if result.status is Status.INCOMPLETE:
        raise CheckIncomplete(result.reason)
    return result


def outcome_from_report(report: pytest.TestReport) -> CheckOutcome | None:
    props = dict(report.user_properties)
    node, check = props.get("node"), props.get("check")
    if node is None or check is None:
        return None
    status: str | None = None
    if report.when == "setup" and report.failed:
        status = "incomplete"
    elif report.when == "call":
        status = "pass" if report.passed else "fail" if report.failed else None
        if status == "fail" and props.get("verdict") == "incomplete":
            status = "incomplete"
    if status is None:
        return None
    reason = str(props.get("reason") or "")
    if status != "pass" and not reason:
        reason = f"{check} {_crash_line(report)}".strip()
    return CheckOutcome(str(node), str(check), status, reason,
                        str(props.get("measured", "")), str(props.get("expected", "")))



@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A test that hit an unmeasurable fact (or CheckIncomplete) is incomplete, not failed."""
    report = yield
    excinfo = call.excinfo
    if excinfo is not None and isinstance(excinfo.value, Unmeasurable | CheckIncomplete):
        reason = excinfo.value.reason if isinstance(excinfo.value, Unmeasurable) else str(excinfo.value)
        props = dict(report.user_properties)
        if props.get("verdict") != "incomplete":
            report.user_properties.append(("verdict", "incomplete"))
        if not props.get("reason"):
            report.user_properties.append(("reason", f"{props.get('check', '')} could not be measured: {reason}"))
    return report


def _crash_line(report: pytest.TestReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return str(crash.message).splitlines()[0] if crash.message else ""
    text = str(report.longrepr or "").strip().splitlines()
    return text[-1] if text else ""


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if hasattr(session.config, "workerinput"):
        return  # xdist worker: the controller writes the gate
    state: _PluginState = session.config.stash[_STATE]
    if state.out_dir is None or state.facts_dir is None:
        return
    outcomes = list(state.outcomes)
    state.out_dir.mkdir(parents=True, exist_ok=True)
    (state.out_dir / "verdicts.json").write_text(
        json.dumps([dataclasses.asdict(o) for o in outcomes], indent=1),
        encoding="utf-8",
    )
    decisions = decide(state.nodes, outcomes)
    doc = gate_document(decisions, topology=state.default_topology,
                        created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                        facts=str(state.facts_dir))
    (state.out_dir / "gate.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
