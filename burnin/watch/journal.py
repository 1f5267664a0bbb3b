"""The event journal (JSON lines in the state folder) and the rule that the watch never acts twice.

One incident is one key (check id, kind, device, code) heard again and again
within ``window`` seconds of its last sighting: the NVML event and the kernel
line of one Xid, the rate-limited repeats of an Xid 119. Only its first
sighting is recorded and acted on. Across incidents, a node is only ever
escalated: once evicted (or drained) within the window, a new incident of the
same or a lower action is recorded with ``"action": "none"`` and the reason it
was left alone. The journal's recent entries restore both after a restart.

The memory of incidents is bounded: kept in the order of their last sighting,
so a sighting costs the same however many incidents are live (the ones older
than the window fall off its front), and at most ``capacity`` (4,096) are kept:
past that the least recently heard is forgotten (a later repeat of it is then
recorded once more; what the node was already given is remembered apart).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from burnin.watch.events import Action, Decision

JOURNAL_FILE = "events.jsonl"
_TAIL_BYTES = 1 << 20
CAPACITY = 4096  # incidents remembered at once


class Journal:
    """Append-only JSON lines, one per incident; each write is one ``write()`` on an O_APPEND file."""

    def __init__(self, state_dir: Path) -> None:
        self.path = Path(state_dir) / JOURNAL_FILE

    def append(self, entry: Mapping[str, Any]) -> None:
        line = json.dumps(entry, sort_keys=True, separators=(",", ":")) + "\n"
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except FileNotFoundError:  # the state folder is not there (yet, or any more)
            self.path.parent.mkdir(parents=True, exist_ok=True)
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


class _Sighting:
    __slots__ = ("last", "repeats")

    def __init__(self, last: float) -> None:
        self.last = last
        self.repeats = 0


class Incidents:
    def __init__(self, window: float, capacity: int = CAPACITY) -> None:
        self.window = window
        self.capacity = capacity
        self._seen: OrderedDict[tuple[str, ...], _Sighting] = OrderedDict()  # least recently heard first
        self._acted: tuple[Action, float, str] | None = None  # highest action on the node, when, why
        self.duplicates = 0
        self.forgotten = 0  # incidents dropped within their window because the table was full

    def __len__(self) -> int:
        return len(self._seen)

    def duplicate(self, key: tuple[str, ...], now: float) -> bool:
        """True when ``key`` was heard within the window (and remember this sighting)."""
        seen = self._seen.pop(key, None)
        self._forget(now)
        if seen is not None and now - seen.last <= self.window:
            seen.last = now
            seen.repeats += 1
            self.duplicates += 1
            self._seen[key] = seen
            return True
        self._remember(key, now)
        return False

    def repeats(self, key: tuple[str, ...]) -> int:
        """Sightings of the incident ``key`` ignored so far."""
        seen = self._seen.get(key)
        return 0 if seen is None else seen.repeats

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
                seen = self._seen.pop(key, None)
                self._remember(key, when if seen is None else max(when, seen.last))
            if entry.get("out_of_pool") and entry.get("action") in ("drain", "evict"):
                action = Action.EVICT if entry["action"] == "evict" else Action.DRAIN
                decision = Decision(action, str(entry.get("check", "")), str(entry.get("cause", "")), key)
                self.acted(decision, float(entry.get("acted_at", when)))

    def _remember(self, key: tuple[str, ...], when: float) -> None:
        self._seen[key] = _Sighting(when)
        while len(self._seen) > self.capacity:
            self._seen.popitem(last=False)
            self.forgotten += 1

    def _forget(self, now: float) -> None:
        """Drop the incidents last heard more than a window ago: from the front, stopping at the first live one."""
        while self._seen:
            key, oldest = next(iter(self._seen.items()))
            if now - oldest.last <= self.window:
                return
            del self._seen[key]
