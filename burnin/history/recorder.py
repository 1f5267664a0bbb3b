"""Recording a run into the history as it judges (a pytest plugin object handed to the run's pytest).

Each node test's final JUnit properties (``node``, ``check``, ``verdict``, ``measured``, ``expected``,
``reason``: the plugin's documented contract) become a verdict row; the rows of one node are committed
together when the run moves on to the next node (the suites run node by node: at the setup of the next
node's first test, before it can hang), and at least every :data:`FLUSH_S` seconds. A run killed outright
(SIGKILL) so leaves every node judged before it, and its run row without an end: readers show it as
incomplete. When the run ends, its gate decisions come from its ``gate.json`` (an interrupted or partial
run's say so), any verdict not yet recorded from ``verdicts.json``.

The history never costs a run its verdicts: a history that cannot be opened or written is one warning line
on stderr, and the run goes on to write gate.json and its reports as ever (the recorder stops recording).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from burnin.history.measure import measurement
from burnin.history.store import STATUS_CODES, Store, Target, default_path
from burnin.history.trendgate import TREND_MARK, Point, TrendFailure, judge, past_measurements
from burnin.nodes import fold
from burnin.runfiles import GATE_FILE, VERDICTS_FILE
from burnin.text import printable

DEFAULT_TREND_RUNS = 5
"""A TREND spans the node's last 5 runs (this one and 4 earlier), as ``burnin history --trends`` by default."""
FLUSH_S = 1.0
"""Verdicts are committed when the run moves on to the next node, and at least every FLUSH_S seconds."""
Row = tuple[str, str, str, "float | None", "str | None", str, str, str]


def stderr_line(line: str) -> None:
    print(printable(line, limit=400), file=sys.stderr)


def verdict_row(props: dict[str, Any]) -> Row | None:
    """A verdict row from a node test's properties or a verdicts.json record (None: not a node test)."""
    node, check = props.get("node"), props.get("check")
    if node is None or check is None:
        return None
    status = props.get("verdict", props.get("status"))
    if status not in STATUS_CODES:
        status = "incomplete"
    measured = props.get("measured", "")
    found = measurement(measured) if status in ("pass", "fail") else None
    value, unit = found if found is not None else (None, None)
    return (str(node), str(check), str(status), value, unit, str(measured), str(props.get("expected", "")),
            str(props.get("reason", "")))


class RunRecorder:
    """One run's recording; every method is safe to call after the history failed (it then does nothing)."""

    def __init__(self, store: Store | None, run: int | None, warn: Callable[[str], None] = stderr_line, *,
                 trend_limit: float | None = None, trend_runs: int = DEFAULT_TREND_RUNS,
                 unavailable: str = "") -> None:
        """``trend_limit``: the site's limit for a TREND failing a node (None: trends are only reported);
        ``unavailable``: why there is no history to record in (said if a trend was to be judged)."""
        self.store = store
        self.run = run
        self.warn = warn
        self.trend_limit = trend_limit
        self.trend_runs = trend_runs
        self.unavailable = unavailable
        self.recorded = 0
        self._pending: list[Row] = []
        self._last_flush = time.monotonic()

    @classmethod
    def start(cls, path: Target | None, *, kind: str, out_dir: Path, topology: str, nodes: Sequence[str],
              warn: Callable[[str], None] = stderr_line, trend_limit: float | None = None,
              trend_runs: int = DEFAULT_TREND_RUNS, unavailable: str = "BURNIN_HISTORY=off") -> RunRecorder:
        if path is None:
            return cls(None, None, warn, trend_limit=trend_limit, trend_runs=trend_runs, unavailable=unavailable)
        try:
            store = Store(path)
        except Exception as exc:  # noqa: BLE001 - the history never stops a run
            warn(f"burnin: history: not recorded: {exc}")
            return cls(None, None, warn, trend_limit=trend_limit, trend_runs=trend_runs, unavailable=str(exc))
        recorder = cls(store, None, warn, trend_limit=trend_limit, trend_runs=trend_runs)
        recorder._guard(lambda: setattr(recorder, "run", store.add_run(
            kind=kind, started=time.time(), out_dir=str(out_dir.resolve()), topology=topology,
            host=socket.gethostname(), pid=os.getpid(), nodes=len(nodes))))
        return recorder

    @property
    def plugins(self) -> list[object]:
        """What to hand pytest (nothing once the history failed, unless a trend is to be judged: it says why not)."""
        return [self] if self.store is not None or self.trend_limit is not None else []

    # -- a TREND failing the node (the site's choice) ----------------------------------------------

    def pytest_burnin_more_outcomes(self, outcomes: Sequence[Any]) -> list[TrendFailure]:
        """The trend failures of this run's passing measurements (``--fail-on-trend``), judged as the gate is."""
        if self.trend_limit is None:
            return []
        current: dict[tuple[str, str], Point] = {}
        for outcome in outcomes:
            found = measurement(outcome.measured) if outcome.status == "pass" else None
            if found is not None:
                current[(str(outcome.node), str(outcome.check))] = found
        nodes = sorted({node for node, _ in current})
        if not nodes:
            return []
        earlier = self.trend_runs - 1
        if self.store is None:
            self.warn(f"burnin: {TREND_MARK} not judged on {fold(nodes)}: no history to read "
                      f"({self.unavailable or 'it stopped recording'})")
            return []
        try:
            past, counted = past_measurements(self.store, nodes, runs=earlier, exclude_run=self.run)
        except Exception as exc:  # noqa: BLE001 - a history that cannot be read judges no trend; said once
            self.warn(f"burnin: {TREND_MARK} not judged on {fold(nodes)}: the history {self.store.path} cannot be "
                      f"read ({type(exc).__name__}: {exc})")
            return []
        short = [node for node in nodes if counted.get(node, 0) < earlier]
        if short:
            self.warn(f"burnin: {TREND_MARK} not judged on {fold(short)}: fewer than {earlier} earlier runs in "
                      f"{self.store.path}")
        return [failure for (node, check), point in sorted(current.items())
                if (failure := judge(node, check, past.get((node, check), []), point, runs=self.trend_runs,
                                     limit=self.trend_limit)) is not None]

    def _guard(self, action: Callable[[], object]) -> None:
        if self.store is None:
            return
        try:
            action()
        except Exception as exc:  # noqa: BLE001 - the database, OSError, a hostile value: warn once, stop recording
            store, self.store = self.store, None
            self.warn(f"burnin: history: stopped recording in {store.path} ({type(exc).__name__}: {exc}); "
                      "gate.json and the reports are written as ever")
            with contextlib.suppress(Exception):
                store.close()

    # -- pytest hook ---------------------------------------------------------------------------------

    burnin_lean_reports = True  # reads only when and user_properties: burnin run's lean protocol stays on

    def pytest_runtest_logreport(self, report: Any) -> None:
        if self.store is None:
            return
        try:
            props = dict(report.user_properties)
            if report.when == "setup":
                if self._pending and self._pending[-1][0] != str(props.get("node")):
                    self.flush()  # the run moved on to the next node: the last one's verdicts are all in
                return
            row = verdict_row(props) if report.when == "teardown" else None
        except (TypeError, ValueError):
            return
        if row is None:
            return
        self._pending.append(row)
        if time.monotonic() - self._last_flush >= FLUSH_S:
            self.flush()

    # -- writing ---------------------------------------------------------------------------------

    def flush(self) -> None:
        rows, self._pending = self._pending, []
        self._last_flush = time.monotonic()
        if rows and self.store is not None and self.run is not None:
            store, run = self.store, self.run

            def add() -> None:
                self.recorded += store.add_verdicts(run, rows)

            self._guard(add)

    def finish(self, out_dir: Path) -> None:
        """The run's end: its remaining verdicts, its gate decisions (from gate.json, if it wrote one)."""
        self.flush()
        if self.store is None or self.run is None:
            return
        store, run = self.store, self.run
        self._guard(lambda: _finish(store, run, out_dir, self.recorded))
        if self.store is not None:
            with contextlib.suppress(Exception):
                self.store.close()
            self.store = None


def _finish(store: Store, run: int, out_dir: Path, recorded: int) -> None:
    gate_file = out_dir / GATE_FILE
    if not gate_file.is_file():  # the suites never finished: the run stays incomplete, with what it judged
        store.finish_run(run, finished=time.time(), decisions=[], interrupted=True)
        return
    gate = json.loads(gate_file.read_text(encoding="utf-8"))
    nodes = gate.get("nodes") if isinstance(gate, dict) else None
    if not isinstance(nodes, dict):
        raise ValueError(f"{gate_file} holds no node decisions")
    expected = gate.get("selection", {}).get("node_tests") if isinstance(gate.get("selection"), dict) else None
    if not isinstance(expected, int) or recorded < expected:
        verdicts = json.loads((out_dir / VERDICTS_FILE).read_text(encoding="utf-8"))
        rows = [row for record in verdicts if isinstance(record, dict) and (row := verdict_row(record)) is not None]
        store.add_verdicts(run, rows)
    decisions = []
    for node, decision in nodes.items():
        if not isinstance(decision, dict):
            continue
        failed, incomplete = _ids(decision.get("failed")), _ids(decision.get("incomplete"))
        reasons = decision.get("reasons")
        reason = reasons[0] if isinstance(reasons, list) and reasons and isinstance(reasons[0], str) else ""
        admitted = decision.get("admitted") is True and not failed and not incomplete
        decisions.append((str(node), admitted, failed, incomplete, reason))
    store.finish_run(run, finished=time.time(), decisions=decisions, partial=bool(gate.get("partial")),
                     interrupted=bool(gate.get("interrupted")), dry_run=bool(gate.get("dry_run")))


def _ids(value: object) -> list[str]:
    return [str(item) for item in value] if isinstance(value, list) else []


@contextlib.contextmanager
def recording(out_dir: Path, *, nodes: Sequence[str], topology: str, kind: str = "run",
              path: Target | None = None, warn: Callable[[str], None] = stderr_line,
              trend_limit: float | None = None, trend_runs: int = DEFAULT_TREND_RUNS) -> Iterator[RunRecorder]:
    """Record the run whose suites run inside the ``with`` (hand :attr:`RunRecorder.plugins` to pytest);
    ``path``: the history (default: ``$BURNIN_HISTORY`` or the state directory's; ``off``: none);
    ``trend_limit``: a steady fall beyond it over the node's last ``trend_runs`` runs fails the node's check."""
    unavailable = "BURNIN_HISTORY=off"
    try:
        target = path if path is not None else default_path()
    except Exception as exc:  # noqa: BLE001 - no state directory to be found: the run goes on
        warn(f"burnin: history: not recorded: {exc}")
        target, unavailable = None, str(exc)
    recorder = RunRecorder.start(target, kind=kind, out_dir=out_dir, topology=topology, nodes=nodes, warn=warn,
                                 trend_limit=trend_limit, trend_runs=trend_runs, unavailable=unavailable)
    try:
        yield recorder
    finally:
        recorder.finish(out_dir)

