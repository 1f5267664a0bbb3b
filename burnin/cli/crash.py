"""An unexpected exception is an internal error: exit 3 and one line, never exit 1 (a verdict).

The traceback goes to a crash file whose path the line names (in the temporary
folder, ``$TMPDIR``), or to stderr with ``--debug``.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
import traceback

MESSAGE_LIMIT = 300


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
        fd, path = tempfile.mkstemp(prefix="burnin-crash-", suffix=".txt")
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as handle:
            handle.write(header + details)
        return path
    except Exception:  # noqa: BLE001 - out of memory or disk: the one line still goes out
        return None


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
