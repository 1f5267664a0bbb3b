"""The breaker's files in burnin's state directory (``$BURNIN_STATE_DIR``, else /var/lib/burnin as root).

- ``breaker.json``: the site's settings and an operator's allowance (``burnin breaker allow N``),
  written atomically, read by every action;
- ``breaker.lock``: the claim file. Whoever decides takes an exclusive ``flock`` on it and keeps it
  until its drains are sent, writing in it who holds it and which nodes it is taking out; so two
  processes on one host never read the budget at the same moment;
- ``breaker-held.jsonl``: one line per node held by the breaker (time, node, who, cause, reason).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from burnin.atomic import write_text_atomic
from burnin.breaker.budget import Allowance, Settings
from burnin.counters import state_dir
from burnin.errors import UsageError
from burnin.text import printable

SETTINGS_FILE = "breaker.json"
LOCK_FILE = "breaker.lock"
HELD_FILE = "breaker-held.jsonl"


def directory() -> Path:
    return state_dir()


def _document(folder: Path) -> dict[str, Any]:
    path = folder / SETTINGS_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: not a breaker settings file ({printable(exc, limit=120)})") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: not a breaker settings file (not a JSON object)")
    return data


def _number(value: object, path: Path, key: str, *, minimum: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= minimum:
        raise UsageError(f"{path}: {key} must be a number of at least {minimum:g}, not {printable(repr(value))}")
    return float(value)


def _check_ids(value: object, path: Path) -> frozenset[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise UsageError(f"{path}: settings.record must be a list of check ids, not {printable(repr(value))}")
    return frozenset(value)


def load(folder: Path | None = None) -> tuple[Settings, Allowance | None]:
    """The settings (defaults for what the file does not set) and the allowance, if any."""
    folder = folder or directory()
    data = _document(folder)
    path = folder / SETTINGS_FILE
    raw = data.get("settings") or {}
    if not isinstance(raw, dict):
        raise UsageError(f"{path}: settings must be an object")
    defaults = Settings()
    settings = Settings(
        nodes=int(_number(raw.get("nodes", defaults.nodes), path, "settings.nodes", minimum=0)),
        percent=_number(raw.get("percent", defaults.percent), path, "settings.percent", minimum=0),
        window_s=_number(raw.get("window_s", defaults.window_s), path, "settings.window_s", minimum=1),
        record=_check_ids(raw.get("record", []), path),
    )
    allow = data.get("allow")
    allowance = None
    if isinstance(allow, dict):
        allowance = Allowance(int(_number(allow.get("extra"), path, "allow.extra", minimum=0)),
                              _number(allow.get("granted"), path, "allow.granted", minimum=0),
                              _number(allow.get("until"), path, "allow.until", minimum=0))
    return settings, allowance


def save(*, folder: Path | None = None, settings: Settings | None = None,
         allowance: Allowance | None = None) -> Path:
    """Write the settings and/or allowance (the other part kept), atomically."""
    folder = folder or directory()
    data = _document(folder)
    if settings is not None:
        data["settings"] = {"nodes": settings.nodes, "percent": settings.percent, "window_s": settings.window_s,
                            "record": sorted(settings.record)}
    if allowance is not None:
        data["allow"] = {"extra": allowance.extra, "granted": allowance.granted, "until": allowance.until}
    path = folder / SETTINGS_FILE
    write_text_atomic(path, json.dumps(data, indent=1, sort_keys=True) + "\n")
    return path


@contextlib.contextmanager
def claim(nodes: Sequence[str], by: str, folder: Path | None = None) -> Iterator[str | None]:
    """Hold the claim file (exclusive flock) while deciding and draining ``nodes``.

    Yields None, or why the lock could not be taken (no state directory to write): then the
    caller goes on unlocked, and only the race bound is wider.
    """
    folder = folder or directory()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        yield f"no claim file in {folder} ({exc.strerror or exc})"
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        holder = {"pid": os.getpid(), "host": socket.gethostname(), "by": by, "since": time.time(),
                  "nodes": list(nodes)}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(holder) + "\n").encode(), 0)
        yield None
    finally:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)  # releases the flock


def record_held(entries: Sequence[dict[str, Any]], folder: Path | None = None) -> str | None:
    """Append held nodes to the held log; why it could not be written (the hold stands either way)."""
    if not entries:
        return None
    folder = folder or directory()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with (folder / HELD_FILE).open("a", encoding="utf-8") as handle:
            handle.write("".join(json.dumps(entry, sort_keys=True) + "\n" for entry in entries))
    except OSError as exc:
        return f"{folder / HELD_FILE}: {exc.strerror or exc}"
    return None


def read_held(since: float, folder: Path | None = None) -> list[dict[str, Any]]:
    """Held records at or after ``since`` (unreadable lines skipped)."""
    path = (folder or directory()) / HELD_FILE
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    held = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("at"), int | float) and entry["at"] >= since:
            held.append(entry)
    return held
