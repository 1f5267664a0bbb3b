"""The watch's incidents into the history as they happen (``burnin history NODE`` shows them in its timeline).

Every incident the watch journals (an Xid, a link down, a stall...) becomes one ``incidents`` row: when it was
detected, the node, its kind and check id, what the watch did (``drain``, ``evict``, ``record``; ``none`` with
the reason when the node already had as much; a dry run's or a failed action's said so) and its cause. A drain or
eviction that took the node out of the pool is also a gate action, keyed as ``burnin history import --journal``
keys it, so importing the same journal later adds it once only.

The journal comes first and the action before both: a history that cannot be opened or written is one warning
line for the daemon's life (it keeps trying, silently), never a lost journal line or action. The rows are written
by a thread of their own, never on the watch's event path: a busy SQLite file (its busy timeout is 30 s) or a slow
PostgreSQL server never delays the handling of the next event.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from burnin.history.records import finite_time
from burnin.history.store import Store, Target, default_path

WATCH_SOURCE = "burnin watch"
OUT_OF_POOL = ("drain", "evict")


@dataclass(frozen=True, slots=True)
class Incident:
    at: float
    node: str
    kind: str
    check: str
    action: str
    detail: str
    source: str
    origin: str
    """The incident's key: ``journal|node|detected_at|check`` (a retry's with ``|retry N``)."""
    action_origin: str
    """The gate action's key, as ``burnin history import --journal`` writes it."""
    taken: str | None
    """``drain`` or ``evict`` when the action took the node out of the pool (a gate action too)."""
    reason: str


def _text(value: object) -> str:
    return "" if value is None else str(value)


def incident(entry: Mapping[str, Any], journal: str) -> Incident | None:
    """A watch journal entry as an incident (None: not an incident's entry, e.g. a released job); a retried action
    is one more row of the same incident."""
    at = finite_time(entry.get("detected_at"))
    node, kind = entry.get("node"), entry.get("kind")
    if at is None or not isinstance(node, str) or not node or not isinstance(kind, str):
        return None
    if "action" not in entry or "check" not in entry:
        return None
    check, action = _text(entry.get("check")), _text(entry.get("action"))
    taken = action if action in OUT_OF_POOL and entry.get("out_of_pool") is True and not entry.get("dry_run") else None
    if action in OUT_OF_POOL and taken is None:
        action += " (dry run: not taken)" if entry.get("dry_run") else " (failed: retried)"
    note = _text(entry.get("note"))
    detail = _text(entry.get("cause")) + (f": {note}" if note else "")
    retry = entry.get("retry")
    if retry is not None:
        action += f" (retry {retry})"
    key = f"{journal}|{node}|{at!r}|{check}"
    source = WATCH_SOURCE + (f" ({entry['source']})" if entry.get("source") else "")
    return Incident(at, node, kind, check, action, detail, source, key + ("" if retry is None else f"|retry {retry}"),
                    key, taken,
                    _text(entry.get("reason") or entry.get("cause")))


class IncidentLog:
    """The watch's history writer: :meth:`record` queues an incident and returns; one thread writes the queue, one
    store kept open between incidents (reopened after a failure)."""

    CLOSE_WAIT_S = 40.0
    """How long stopping the watch waits for the incidents still queued (beyond SQLite's busy timeout)."""

    def __init__(self, warn: Callable[[str], object], target: Target | str | None = "default") -> None:
        self.warn = warn
        self._target = target
        self._store: Store | None = None
        self._queue: queue.Queue[Incident | None] = queue.Queue()
        self._writer: threading.Thread | None = None
        self._starting = threading.Lock()
        self.warned = False

    def record(self, item: Incident) -> None:
        """Queue ``item`` (and its gate action when it took one) for the writer thread."""
        with self._starting:
            if self._writer is None:
                self._writer = threading.Thread(target=self._write_queue, name="burnin-watch-history", daemon=True)
                self._writer.start()
        self._queue.put(item)

    def flush(self) -> None:
        """Wait until every incident queued so far is written (or given up on, with its one warning)."""
        self._queue.join()

    def _write_queue(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    self._close_store()
                    return
                self._write(item)
            finally:
                self._queue.task_done()

    def _write(self, item: Incident) -> None:
        try:
            if self._target == "default":
                self._target = default_path()
            if self._target is None:
                return
            if self._store is None:
                self._store = Store(self._target)
            self._store.add_incident(at=item.at, node=item.node, kind=item.kind, check_id=item.check,
                                     action=item.action, detail=item.detail, source=item.source, origin=item.origin)
            if item.taken is not None:
                self._store.add_action(at=item.at, node=item.node, action=item.taken, check_ids=(item.check,),
                                       reason=item.reason, source=WATCH_SOURCE, origin=item.action_origin)
        except Exception as exc:  # noqa: BLE001 - the history never costs the journal or the action
            self._close_store()
            if not self.warned:
                self.warned = True
                self.warn(f"history: incidents not recorded ({exc}); the journal has them "
                          "(burnin history import --journal); further failures not logged")

    def close(self) -> None:
        """Write what is queued (waiting at most :data:`CLOSE_WAIT_S`) and close the store."""
        with self._starting:
            writer, self._writer = self._writer, None
        if writer is None:
            return
        self._queue.put(None)
        writer.join(self.CLOSE_WAIT_S)

    def _close_store(self) -> None:
        store, self._store = self._store, None
        if store is not None:
            with contextlib.suppress(Exception):
                store.close()
