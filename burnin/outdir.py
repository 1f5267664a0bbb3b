"""One output folder has one owner (DESIGN.md): run ids that never collide, and a lock on the folder.

A run or soak writes its folder for minutes or days; a second one writing the
same files would mix two runs' verdicts into one ``gate.json``. So:

- :func:`new_run_id` names a default folder by the second *and* a random
  part, so two runs started in the same second (on one host or on several
  sharing ``reports/``) get two folders;
- :func:`own` takes an exclusive ``flock`` on ``FOLDER/.burnin.lock`` for
  the life of the run, or refuses (:class:`FolderInUse`, exit 2) naming the
  holder: its pid, host, start time and command, which it wrote into the
  lock file. The kernel releases the lock when its holder dies, however it
  dies, so a crashed soak's folder is free for ``--resume`` at once, and a
  living one is not.

Releasing removes the lock file (while still holding the lock); a contender
that opened the removed file finds, once it holds the lock, that the path
no longer names what it locked, and starts again.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import shlex
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from burnin.errors import UsageError
from burnin.text import printable

LOCK_FILE = ".burnin.lock"
"""In the output folder: held (flock) by the process that owns the folder, and says who that is."""
COMMAND_CHARS = 160
"""How much of the holder's command line a refusal quotes."""
_STAMP = "%Y%m%dT%H%M%SZ"


def new_run_id(prefix: str = "", now: float | None = None) -> str:
    """``<prefix>20260101T000000Z-3f9a1c2e``: the UTC second (folders sort by time) and 32 random bits."""
    return f"{prefix}{time.strftime(_STAMP, time.gmtime(now))}-{secrets.token_hex(4)}"


class FolderInUse(UsageError):
    """Another living process owns the folder: a usage error (exit 2) whose message names it."""


@dataclass(frozen=True)
class Holder:
    """Who owns a folder, as its lock file says."""

    pid: int | None
    host: str
    started: float | None
    command: str

    def to_json(self) -> str:
        return json.dumps({"pid": self.pid, "host": self.host, "started": self.started, "command": self.command})

    @classmethod
    def from_text(cls, text: str) -> Holder | None:
        """The holder a lock file names (None: empty, written halfway, or not ours)."""
        try:
            data = json.loads(text)
            pid, started = data.get("pid"), data.get("started")
            return cls(pid=pid if isinstance(pid, int) else None, host=str(data.get("host") or "?"),
                       started=float(started) if isinstance(started, (int, float)) else None,
                       command=str(data.get("command") or ""))
        except (ValueError, AttributeError, TypeError):
            return None

    def describe(self) -> str:
        """``pid 4242 on node7 since 2026-01-01T00:00:00Z (burnin run --sim 4)``, one printable line."""
        since = f" since {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(self.started))}" if self.started else ""
        command = self.command if len(self.command) <= COMMAND_CHARS else self.command[:COMMAND_CHARS] + "..."
        return printable(f"pid {self.pid if self.pid is not None else '?'} on {self.host}{since}"
                         + (f" ({command})" if command else ""))


class Ownership:
    """The lock a process holds on its output folder; :meth:`release` (or leaving a ``with``) gives it back."""

    def __init__(self, folder: Path, fd: int) -> None:
        self.folder = folder
        self._fd: int | None = fd

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Remove the lock file, then unlock (idempotent)."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            (self.folder / LOCK_FILE).unlink()
        os.close(self._fd)  # closing the last descriptor releases the flock
        self._fd = None

    def __enter__(self) -> Ownership:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.release()


def make_folder(folder: Path, *, flag: str = "--out") -> None:
    """Create ``folder`` (and its parents) for a run's output; an existing file or an unwritable place is a
    usage error naming ``flag``."""
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{flag} {folder}: exists and is not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{flag} {folder}: cannot write there ({exc.strerror or exc})") from None


def own(folder: Path, command: Sequence[str], *, flag: str = "--out") -> Ownership:
    """Take ``folder`` (which exists) for this process, or refuse with one line naming its owner.

    ``flag`` names how the user gave the folder (``--out``, ``--resume``; empty: an argument), for the messages.
    """
    given = f"{flag} {folder}" if flag else str(folder)
    path = folder / LOCK_FILE
    record = Holder(pid=os.getpid(), host=socket.gethostname(), started=time.time(), command=shlex.join(command))
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise UsageError(f"{given}: cannot write there ({exc.strerror or exc})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = Holder.from_text(_read(fd))
            os.close(fd)
            who = holder.describe() if holder else "another burnin process (starting: it has not said who yet)"
            raise FolderInUse(f"{given} is in use by {who}: one output folder has one owner; "
                              "wait for it to end, or stop it") from None
        except OSError as exc:  # a file system without locks: refuse rather than share the folder unowned
            os.close(fd)
            raise UsageError(f"{given}: cannot lock {LOCK_FILE} there ({exc.strerror or exc})") from None
        if _same_file(fd, path):
            break
        os.close(fd)  # its owner released it (and removed it) between our open and our lock: again
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, (record.to_json() + "\n").encode(), 0)
    except OSError as exc:
        os.close(fd)
        raise UsageError(f"{given}: cannot write there ({exc.strerror or exc})") from None
    return Ownership(folder, fd)


def _read(fd: int) -> str:
    try:
        return os.pread(fd, 4096, 0).decode("utf-8", errors="replace")
    except OSError:
        return ""


def _same_file(fd: int, path: Path) -> bool:
    try:
        named = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)
