"""An unexpected exception is an internal error: exit 3 and one line, never exit 1 (a verdict).

The traceback goes to a crash file whose path the line names (in the temporary
folder, ``$TMPDIR``; the newest 20 are kept), or to stderr with ``--debug``.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
import traceback

MESSAGE_LIMIT = 300
CRASH_PREFIX = "burnin-crash-"
KEEP_CRASH_FILES = 20
"""Crash files kept per user in the temporary folder (older ones are removed when a new one is written)."""


def one_line(exc: BaseException) -> str:
    """``Type: message`` on one line, control characters escaped, bounded in length."""
    from burnin.text import printable

    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 - a broken __str__ must not hide the error
        text = ""
    text = printable(" ".join(text.split()), limit=MESSAGE_LIMIT)
    name = type(exc).__name__
    return f"{name}: {text}" if text else name


def write_crash_file(prog: str, exc: BaseException) -> str | None:
    """Write the traceback to a new ``burnin-crash-*.txt``; its path, or None when that failed too."""
    try:
        details = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        header = (f"{prog} internal error at {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n"
                  f"argv: {sys.argv!r}\npython: {sys.version.split()[0]}\n\n")
        fd, path = tempfile.mkstemp(prefix=CRASH_PREFIX, suffix=".txt")
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as handle:
            handle.write(header + details)
    except Exception:  # noqa: BLE001 - out of memory or disk: the one line still goes out
        return None
    with contextlib.suppress(Exception):
        prune_crash_files(os.path.dirname(path), keep=KEEP_CRASH_FILES)
    return path


def prune_crash_files(folder: str, *, keep: int) -> list[str]:
    """Remove this user's crash files in ``folder`` beyond the newest ``keep``; the paths removed."""
    uid = os.getuid()
    found: list[tuple[float, str]] = []
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.name.startswith(CRASH_PREFIX) and entry.name.endswith(".txt") and entry.is_file(
                    follow_symlinks=False):
                info = entry.stat(follow_symlinks=False)
                if info.st_uid == uid:
                    found.append((info.st_mtime, entry.path))
    removed = [path for _, path in sorted(found, reverse=True)[keep:]]
    for path in removed:
        with contextlib.suppress(OSError):
            os.unlink(path)
    return removed


def report(prog: str, exc: BaseException, *, debug: bool) -> str:
    """Print the traceback (``--debug``) or write the crash file; return the one line to print."""
    summary = f"{prog}: internal error: {one_line(exc)}"
    if debug:
        with contextlib.suppress(Exception):  # keep going to the one line
            traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
        return summary
    path = write_crash_file(prog, exc)
    if path is None:
        return f"{summary} (no crash file could be written; rerun with --debug for the traceback)"
    return f"{summary} (details: {path})"
