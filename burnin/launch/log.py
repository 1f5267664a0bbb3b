"""The command log: every command a launcher started, with its outcome, in one file per caller.

``OUT/fabric-commands.log``, ``OUT/megatron-commands.log``, ``OUT/slurm-commands.log``: one line per
command (``$ [where] argv``) and one for its outcome (``-> exit 0 in 1.23 s``, with the last lines of its
output when it failed), notes as ``# ...``. The file is made when the first line is written, so a run
that started nothing leaves none. The log is an aid: a file that cannot be written never stops a run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path

from burnin.transport.base import CommandResult

ARGV_CHARS = 2000
"""A logged argv is cut after this many characters (a placement probe's source is passed whole)."""


class CommandLog:
    """Appends to ``path`` (None: logs nothing)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()

    def line(self, text: str) -> None:
        if self.path is None:
            return
        with self._lock:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a", encoding="utf-8") as handle:
                    handle.write(f"{time.strftime('%H:%M:%S')} {text}\n")
            except OSError:
                pass  # the log is an aid; the run goes on

    def command(self, where: str, argv: Sequence[str], result: CommandResult) -> None:
        """``$ [where] argv`` and how it ended (``where`` empty: where burnin runs)."""
        if self.path is None:
            return
        shown = " ".join(argv)
        shown = shown if len(shown) <= ARGV_CHARS else shown[:ARGV_CHARS] + " ..."
        status = "timed out" if result.timed_out else result.error or f"exit {result.exit_status}"
        tail = result.tail(3).replace("\n", " | ") if not result.ok else ""
        self.line(f"$ {where + ' ' if where else ''}{shown}\n  -> {status} in {result.duration_s:.2f} s"
                  + (f"; {tail}" if tail and tail not in status else ""))


NO_LOG = CommandLog(None)
