"""Synthetic runs written straight into a history database (the recorder's store API), for the history tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from burnin.history.store import Store

Verdict = tuple[str, str, str, "float | None", "str | None", str, str, str]


def verdict(node: str, check: str, status: str = "pass", value: float | None = None, unit: str | None = None,
            measured: str = "", reason: str = "") -> Verdict:
    return (node, check, status, value, unit, measured, "expected", reason or f"{check} {status}")


def add_run(store: Store, at: float, verdicts: Sequence[Verdict], *, finished: bool = True,
            out_dir: str = "", decisions: Mapping[str, tuple[bool, Sequence[str], Sequence[str]]] | None = None) -> int:
    """A run at ``at`` holding ``verdicts``; its decisions follow from them unless given (``finished`` False:
    a run killed before its end, which has none)."""
    nodes = sorted({v[0] for v in verdicts} | set(decisions or {}))
    run = store.add_run(kind="run", started=at, out_dir=out_dir or f"/reports/{at:.0f}", nodes=len(nodes))
    store.add_verdicts(run, verdicts)
    if finished:
        rows = []
        for node in nodes:
            if decisions is not None and node in decisions:
                admitted, failed, incomplete = decisions[node]
            else:
                failed = [v[1] for v in verdicts if v[0] == node and v[2] == "fail"]
                incomplete = [v[1] for v in verdicts if v[0] == node and v[2] == "incomplete"]
                admitted = not failed and not incomplete
            rows.append((node, admitted, list(failed), list(incomplete), ""))
        store.finish_run(run, finished=at + 60, decisions=rows)
    return run


def open_store(path: Path) -> Store:
    return Store(path)
