"""The event journal (JSON lines in the state folder) and the rule that the watch never acts twice.

One incident is one key (check id, kind, device, code) heard again and again
within ``window`` seconds of its last sighting: the NVML event and the kernel
line of one Xid, the rate-limited repeats of an Xid 119. Only its first
sighting is recorded and acted on. Across incidents, a node is only ever
escalated: once evicted (or drained) within the window, a new incident of the
same or a lower action is recorded with ``"action": "none"`` and the reason it
was left alone. The journal's recent entries restore both after a restart.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from burnin.watch.events import Action, Decision

JOURNAL_FILE = "events.jsonl"
_TAIL_BYTES = 1 << 20


class Journal:
    """Append-only JSON lines, one per incident; each write is one ``write()`` on an O_APPEND file."""

    def __init__(self, state_dir: Path) -> None:
        self.path = Path(state_dir) / JOURNAL_FILE

    def append(self, entry: Mapping[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(entry, sort_keys=True, separators=(",", ":")) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def recent(self, since: float) -> list[dict[str, Any]]:
        """Entries detected at or after ``since`` (from the journal's last megabyte)."""
        try:
            with self.path.open("rb") as fh:
                fh.seek(max(0, fh.seek(0, os.SEEK_END) - _TAIL_BYTES))
                lines = fh.read().decode("utf-8", errors="replace").splitlines()
        except FileNotFoundError:
            return []
        entries: list[dict[str, Any]] = []
        for line in lines:
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                if isinstance(entry, dict) and float(entry.get("detected_at", 0)) >= since:
                    entries.append(entry)
        return entries


class Incidents:
    def __init__(self, window: float) -> None:
        self.window = window
        self._last_seen: dict[tuple[str, ...], float] = {}
        self._repeats: dict[tuple[str, ...], int] = {}
        self._acted: tuple[Action, float, str] | None = None  # highest action on the node, when, why
        self.duplicates = 0

    def duplicate(self, key: tuple[str, ...], now: float) -> bool:
        """True when ``key`` was heard within the window (and remember this sighting)."""
        last = self._last_seen.get(key)
        self._last_seen[key] = now
        if len(self._last_seen) > 4096:
            self._forget(now)
        if last is not None and now - last <= self.window:
            self.duplicates += 1
            self._repeats[key] = self._repeats.get(key, 0) + 1
            return True
        self._repeats.pop(key, None)
        return False

    def repeats(self, key: tuple[str, ...]) -> int:
        """Sightings of the incident ``key`` ignored so far."""
        return self._repeats.get(key, 0)

    def covered(self, action: Action, now: float) -> str | None:
        """Why ``action`` is not needed (the node got as much or more within the window), or None."""
        if action is Action.RECORD or self._acted is None:
            return None
        level, when, reason = self._acted
        if level >= action and now - when <= self.window:
            return f"node already {level.word}ed {now - when:.1f} s ago ({reason})"
        return None

    def acted(self, decision: Decision, now: float) -> None:
        if self._acted is None or decision.action >= self._acted[0] or now - self._acted[1] > self.window:
            self._acted = (decision.action, now, decision.reason())

    def restore(self, entries: Iterable[Mapping[str, Any]]) -> None:
        """Rebuild the memory from journal entries (oldest first)."""
        for entry in entries:
            key = tuple(str(part) for part in entry.get("key", ()))
            when = float(entry.get("detected_at", 0))
            if key:
                self._last_seen[key] = max(when, self._last_seen.get(key, 0.0))
            if entry.get("out_of_pool") and entry.get("action") in ("drain", "evict"):
                action = Action.EVICT if entry["action"] == "evict" else Action.DRAIN
                decision = Decision(action, str(entry.get("check", "")), str(entry.get("cause", "")), key)
                self.acted(decision, float(entry.get("acted_at", when)))

    def _forget(self, now: float) -> None:
        self._last_seen = {k: t for k, t in self._last_seen.items() if now - t <= self.window}
        self._repeats = {k: n for k, n in self._repeats.items() if k in self._last_seen}
