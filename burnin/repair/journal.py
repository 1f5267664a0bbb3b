"""Every decision of the repair ladder, kept: ``repair.jsonl`` in burnin's state directory, and the history.

The journal is the ladder's memory (:func:`burnin.repair.policy.incidents_from` reads it): one JSON object a
line, appended under an exclusive ``flock``, each with ``at`` (seconds since the epoch), ``node``, ``class``,
``event`` and what the event carries:

- ``open``: an incident starts (``checks``: the drain reason's check ids, ``reason``);
- ``step``: a step is taken (``step``, ``rung``, ``why``, ``command``);
- ``attempt``: what followed it (``step``, ``outcome``: pass | fail | incomplete | not-taken, ``detail``);
- ``close``: the incident ends (``how``: resumed | vendor, ``bundle`` for the vendor);
- ``left``: a node the repair left alone, and why (an operator's drain, a state it cannot read).

Each entry also goes to the history database (``actions``, action ``repair-<event>``, source ``repair``) when
there is one, so ``burnin history NODE`` shows the ladder beside the runs; a history that cannot be written
is said once and the journal stands.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sqlite3
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from burnin.text import printable

JOURNAL_FILE = "repair.jsonl"


def journal_path(folder: Path | None = None) -> Path:
    from burnin.counters import state_dir

    return (folder or state_dir()) / JOURNAL_FILE


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[int]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)


def read(path: Path | None = None) -> list[dict[str, Any]]:
    """Every readable entry, oldest first (a line that is not a JSON object is skipped)."""
    path = path or journal_path()
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    entries = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


class Journal:
    """Appends entries to the journal file and mirrors them into the history (when one can be opened)."""

    def __init__(self, path: Path | None = None, *, history: bool = True) -> None:
        self.path = path or journal_path()
        self._history = history
        self.notes: list[str] = []

    def entries(self) -> list[dict[str, Any]]:
        return read(self.path)

    def add(self, entry: Mapping[str, Any]) -> dict[str, Any]:
        record = {key: value for key, value in entry.items() if value is not None}
        line = json.dumps(record, sort_keys=True) + "\n"
        with _locked(self.path) as fd:
            os.write(fd, line.encode())
        self._mirror(record)
        return record

    def _mirror(self, record: Mapping[str, Any]) -> None:
        if not self._history:
            return
        from burnin.history.store import HistoryError, default_path, open_history

        if default_path() is None:
            return
        detail = record.get("why") or record.get("detail") or record.get("reason") or record.get("how") or ""
        step = f" {record['step']}" if record.get("step") else ""
        outcome = f" -> {record['outcome']}" if record.get("outcome") else ""
        bundle = f" (bundle {record['bundle']})" if record.get("bundle") else ""
        try:
            with open_history(create=True) as store:
                store.add_action(at=float(record["at"]), node=str(record["node"]),
                                 action=f"repair-{record['event']}",
                                 check_ids=[str(c) for c in record.get("checks", [])],
                                 reason=f"{record.get('class', '')}{step}{outcome}: {detail}{bundle}",
                                 source="repair")
        except (HistoryError, OSError, ValueError, sqlite3.Error) as exc:
            self._history = False
            self.notes.append(printable(f"burnin repair: the history cannot be written ({exc}); "
                                        f"the journal {self.path} has every decision"))
