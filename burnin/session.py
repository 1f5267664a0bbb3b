"""One acceptance run: gather facts, run the suites' phases, run the suites under pytest, write the gate.

This is the single run path for simulated, SSH and Slurm nodes; only the
dispatcher differs. The active phases (:mod:`burnin.phases`) come in as
:class:`~burnin.phases.PhaseRun` items: the session names no suite and no dispatcher.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from burnin.dispatch.base import Dispatcher
from burnin.errors import BurninError, UsageError
from burnin.facts import Facts
from burnin.gate.decide import NodeDecision, passed_checks
from burnin.resources import suites_dir
from burnin.runfiles import GATE_FILE, RUN_FILE, VERDICTS_FILE

if TYPE_CHECKING:
    from burnin.phases import PhaseRun
    from burnin.plugin_judge import StartedJudges

METRICS_FILE = "metrics.prom"


class SuiteError(BurninError):
    """pytest could not run the suites (usage or internal error)."""


@dataclass(frozen=True, slots=True)
class RunResult:
    out_dir: Path
    decisions: dict[str, NodeDecision]
    gate: dict[str, object]
    pytest_exit: int


def remove_stale_results(out_dir: Path) -> None:
    """Remove an earlier run's gate.json and verdicts.json: no gate may outlive the run that wrote it."""
    for name in (GATE_FILE, VERDICTS_FILE):
        (out_dir / name).unlink(missing_ok=True)


def write_facts(out_dir: Path, facts: dict[str, Facts], topology: str,
                topology_by_node: dict[str, str]) -> Path:
    facts_dir = out_dir / "facts"
    facts_dir.mkdir(parents=True, exist_ok=True)
    for node, node_facts in facts.items():  # json's C encoder (no indent): 2.5x faster at ~250 KB a node
        (facts_dir / f"{node}.json").write_text(json.dumps(node_facts.data), encoding="utf-8")
    run = {"nodes": list(facts), "topology": topology, "topology_by_node": topology_by_node}
    (facts_dir / RUN_FILE).write_text(json.dumps(run, indent=1), encoding="utf-8")
    return facts_dir


def suite_paths(suites: Sequence[str]) -> list[str]:
    paths = []
    for suite in suites:
        path = Path(suite) if (os.sep in suite or Path(suite).is_dir()) else suites_dir() / suite
        if not path.is_dir():
            known = ", ".join(sorted(p.name for p in suites_dir().iterdir() if p.is_dir()))
            raise UsageError(f"unknown suite {suite!r} (known: {known})")
        paths.append(str(path))
    return paths


def write_reports(out_dir: Path, gate: dict[str, Any], facts: dict[str, Facts],
                  duration_s: float | None = None) -> None:
    """junit.xml (valid against junit-10.xsd) and metrics.prom, from the verdicts the gate came from;
    ``duration_s``: the run's wall time so far (metrics.prom's ``burnin_run_duration_seconds``)."""
    from burnin.report.junit import Case, write_junit
    from burnin.report.metrics import exposition, write_textfile

    verdicts = json.loads((out_dir / VERDICTS_FILE).read_text(encoding="utf-8"))
    meta: dict[str, str] = {k: str(gate[k]) for k in ("topology", "created", "partial", "interrupted") if k in gate}
    write_junit(out_dir / "junit.xml", [Case.from_outcome(v) for v in verdicts], meta=meta,
                timestamp=str(gate.get("created", "")))
    node_facts = {node: f.data for node, f in facts.items()}
    write_textfile(out_dir / METRICS_FILE, exposition(gate, verdicts, node_facts, timestamp=time.time(),
                                                      duration_s=duration_s))


PLUGIN_ARGS = ("--disable-plugin-autoload",)
"""No plugin but pytest's own and burnin's (:class:`_BurninPlugin`): a third-party plugin installed beside burnin
(pytest-rerunfailures retrying a failed check, pytest-xdist, hypothesis) never joins the session that judges
nodes, and costs no import. A site suite that needs one loads it itself (``pytest_plugins = ["name"]`` in its
conftest.py)."""


class _BurninPlugin:
    """Registers :mod:`burnin.plugin` under its entry point's name, ``burnin``, as autoloading did, and the
    judging workers started for the session (:class:`~burnin.plugin_judge.StartedJudges`) under theirs.

    ``-p burnin`` would also mark every burnin module for pytest's assertion rewriting (a rewritten module is
    compiled again on every run), and a plugin object given to ``pytest.main`` is registered under its module's
    name, which the lean protocol does not know (:data:`burnin.plugin_lean.KNOWN_PLUGINS`).
    """

    def __init__(self, judges: StartedJudges | None = None) -> None:
        self.judges = judges

    def pytest_addhooks(self, pluginmanager: Any) -> None:
        from burnin import plugin
        from burnin.plugin_judge import STARTED_JUDGES

        if pluginmanager.get_plugin("burnin") is None:
            pluginmanager.register(plugin, "burnin")
        if self.judges is not None and pluginmanager.get_plugin(STARTED_JUDGES) is None:
            pluginmanager.register(self.judges, STARTED_JUDGES)

PYTEST_LEAN_ARGS = (
    "-p", "no:logging", "-p", "no:warnings", "-p", "no:unraisableexception", "-p", "no:threadexception",
    "--capture=sys", "--burnin-lean",
)
"""pytest's plugins that wrap every phase of every test and that judging has no use for (checks are pure:
they log nothing, warn nothing, start no thread), sys-level capture instead of file descriptors, and the
plugin's lean protocol (:mod:`burnin.plugin_lean`: node tests judged without pytest's per-test phases where
nothing could tell the difference): at a fleet's size (1,024 nodes x 45 checks) each costs seconds
(bench/judge)."""


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity), for the judging workers of a large fleet."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def run_suites(facts_dir: Path, out_dir: Path, topology: str, suites: Sequence[str],
               keyword: str | None = None, extra_args: Sequence[str] = (),
               on_test: Callable[[], None] | None = None, dry_run: bool = False,
               plugins: Sequence[object] = (), judges: StartedJudges | None = None) -> int:
    """Run pytest in-process on the suites against gathered facts; returns pytest's exit code.

    ``dry_run``: the facts are a dry run's, so the gate the plugin writes admits nobody; ``plugins``: more
    plugin objects for pytest (the history's recorder); ``judges``: judging workers started for this session
    (the caller closes them)."""
    import pytest

    args = [
        *suite_paths(suites),
        "--rootdir", str(suites_dir()),
        "-c", str(suites_dir() / "pytest.ini"),
        "--burnin-facts", str(facts_dir),
        "--burnin-topology", topology,
        "--burnin-out", str(out_dir),
        *PLUGIN_ARGS,
        "-p", "no:cacheprovider",
        "-p", "no:terminal",
        *PYTEST_LEAN_ARGS, "--burnin-jobs", str(usable_cpus()),
        *(["--burnin-dry-run"] if dry_run else []),
        *extra_args,
    ]
    if keyword:
        args += ["-k", keyword]

    class _Progress:
        interrupt: KeyboardInterrupt | None = None

        def pytest_burnin_judged(self) -> None:
            if on_test is not None:
                on_test()

        def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
            # pytest stops on SIGINT and still finishes the session (the plugin writes a gate.json
            # that admits nobody); the interrupt then goes on to the caller. A collection error
            # (pytest's Session.Interrupted) is not an interrupt by the user.
            value = excinfo.value
            if isinstance(value, KeyboardInterrupt) and not isinstance(value, pytest.Session.Interrupted):
                self.interrupt = value

    progress = _Progress()
    # burnin's plugin registered last, as autoloading did: its hooks run before those of the ones given here
    code = int(pytest.main(args, plugins=[progress, *plugins, _BurninPlugin(judges)]))
    if progress.interrupt is not None:
        raise progress.interrupt
    return code


def run_collector_sources(topology: str, by_node: dict[str, str]) -> str:
    """What `burnin run` asks the collector for: ``all`` plus the storage targets whose routes it looks up
    (STO-01), for every node type (bench/fanout gives clush the same)."""
    from burnin.checks.storage import collector_sources
    from burnin.topology.load import find_topology

    return collector_sources("all", [find_topology(name) for name in sorted({topology, *by_node.values()})])


def execute(dispatcher: Dispatcher, *, topology: str, out_dir: Path, suites: Sequence[str] = ("node",),
            keyword: str | None = None, timeout: float = 120.0,
            on_gathered: Callable[[str], None] | None = None,
            on_test: Callable[[], None] | None = None,
            phases: Sequence[PhaseRun] = (), dry_run: bool = False,
            say: Callable[[str], None] = print, trend_limit: float | None = None,
            trend_runs: int = 5) -> RunResult:
    """Gather facts, run each phase (it adds its measurements to the facts), run the suites, read the gate.

    ``dry_run`` (``burnin run --dry-run``): facts are gathered as ever (the collector only reads), each phase
    prints every command it would launch (``say``) and launches none, so its checks are incomplete; the
    suites judge what was gathered, and the gate admits nobody. ``trend_limit`` (``--fail-on-trend``): a
    measurement falling steadily beyond it over the node's last ``trend_runs`` runs in the history fails the node.
    """
    started = time.monotonic()
    out_dir.mkdir(parents=True, exist_ok=True)
    remove_stale_results(out_dir)
    judges = _start_judges(dispatcher, topology)
    try:
        prepared: list[bool] = []

        def gathered(node: str) -> None:
            if not prepared:  # the first node's facts are in, the others' still on their way: import meanwhile
                prepared.append(True)
                prepare_judging()
            if on_gathered is not None:
                on_gathered(node)

        facts = dispatcher.gather(sources=run_collector_sources(topology, dispatcher.topology_by_node), timeout=timeout,
                                  on_done=gathered)
        if phases:
            from burnin.phases import PhaseContext
            from burnin.topology.load import find_topology

            context = PhaseContext(dispatcher, facts, find_topology(topology), out_dir, dry_run=dry_run, say=say)
            for run in phases:
                run.phase.run(context, run.options)
        facts_dir = write_facts(out_dir, facts, topology, dispatcher.topology_by_node)
        from burnin.history.recorder import recording

        with recording(out_dir, nodes=list(facts), topology=topology,  # verdicts recorded as judged
                       trend_limit=trend_limit, trend_runs=trend_runs) as history:
            code = run_suites(facts_dir, out_dir, topology, suites, keyword, on_test=on_test, dry_run=dry_run,
                              plugins=history.plugins, judges=judges)
        gate_file = out_dir / GATE_FILE
        if code not in (0, 1) or not gate_file.exists():
            if code == 5:
                raise UsageError(f"no test matched (-k {keyword!r})" if keyword else "the suites hold no test")
            raise SuiteError(f"pytest could not run the suites (exit {code}); see {out_dir}")
        gate = json.loads(gate_file.read_text(encoding="utf-8"))
        write_reports(out_dir, gate, facts, duration_s=time.monotonic() - started)
        passed = passed_checks(json.loads((out_dir / VERDICTS_FILE).read_text(encoding="utf-8")))
        decisions = {  # what a gate may resume a node for: the checks of its verdicts that passed
            node: NodeDecision(node, d["admitted"], tuple(d["failed"]), tuple(d["incomplete"]), tuple(d["reasons"]),
                            tuple(d.get("not_applicable", {}).items()), passed.get(node, ()) if d["admitted"] else ())
            for node, d in gate["nodes"].items()
        }
        return RunResult(out_dir, decisions, gate, code)
    finally:  # the workers go, whatever happened
        if judges is not None:
            judges.close()


def prepare_judging() -> None:
    """Import what judging and the reports will import (pytest and the plugin, every check module and its parsers,
    jinja2), while the gather waits on the nodes: ~0.4 s of CPU a run no longer spends after its facts are in.
    Called in the main thread, as the first node's facts come in. An import that fails here fails again where
    judging imports it, and is reported there."""
    with contextlib.suppress(Exception):
        import jinja2  # noqa: F401

        from burnin import plugin  # noqa: F401
        from burnin.checks import load_all
        from burnin.report import junit, metrics  # noqa: F401

        load_all()


def _start_judges(dispatcher: Dispatcher, topology: str) -> StartedJudges | None:
    """The judging workers of a fleet of :data:`~burnin.plugin_judge.PRESTART_MIN_NODES` nodes or more, started
    before the gather so that their start overlaps it (None: the session judges alone)."""
    from burnin.plugin_judge import PRESTART_MIN_NODES, start_judges

    jobs = usable_cpus()
    if jobs < 2 or len(dispatcher.nodes) < PRESTART_MIN_NODES:
        return None
    return start_judges(jobs, {topology, *dispatcher.topology_by_node.values()})
