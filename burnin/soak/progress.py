"""The soak's progress on stderr: a live table on a terminal, one line per interval otherwise.

The table (rich) shows elapsed and remaining soak time, the running stage and,
per node, its state, how long it has soaked and why it failed. Without a
terminal (logs, CI) each sample round prints one line::

    soak +10:00:00/24:00:00 (42%) stage gpu: 7 running, 0 done, 1 failed (sim03 GPU-04)

and each node that fails prints its reason once, as it happens.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

from burnin.soak.plan import hms
from burnin.soak.scheduler import View
from burnin.soak.state import DONE, FAILED, HELD, RUNNING
from burnin.text import printable


def summary_line(view: View) -> str:
    share = min(1.0, view.now / view.duration_s) if view.duration_s > 0 else 1.0
    counts = {status: sum(1 for n in view.nodes if n.status == status) for status in (RUNNING, DONE, FAILED)}
    failed = [n for n in view.nodes if n.status == FAILED]
    named = ", ".join(f"{n.name} {n.reason.split(' ', 1)[0]}" for n in failed[:8])
    more = f", +{len(failed) - 8} more" if len(failed) > 8 else ""
    line = (f"soak +{hms(view.now)}/{hms(view.duration_s)} ({share:.0%}) stage {view.stage or '-'}: "
            f"{counts[RUNNING]} running, {counts[DONE]} done, {counts[FAILED]} failed")
    held = sum(1 for n in view.nodes if n.status == HELD)
    return line + (f" ({named}{more})" if failed else "") + (f", {held} not soaked (rejected by acceptance)"
                                                             if held else "")


class LineProgress:
    """One line per sample round, and each failure as it happens."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream or sys.stderr

    def update(self, view: View) -> None:
        for event in view.events:
            self._stream.write(printable(f"soak FAILED {event.node}: {event.reason}") + "\n")
        self._stream.write(printable(summary_line(view)) + "\n")
        self._stream.flush()

    def close(self) -> None:
        self._stream.flush()


class LiveProgress:
    """A rich table redrawn after each sample round (only on a terminal)."""

    def __init__(self, console: Any = None) -> None:
        from rich.console import Console
        from rich.live import Live

        self._console = console or Console(stderr=True)
        self._live: Any = Live(console=self._console, refresh_per_second=4, transient=False)
        self._live.start()

    def update(self, view: View) -> None:
        from rich.table import Table
        from rich.text import Text

        # node text is shown as text, never read as rich markup
        table = Table(title=Text(printable(summary_line(view))), title_justify="left", expand=False)
        for column in ("node", "state", "soaked", "reason"):
            table.add_column(column)
        style = {RUNNING: "cyan", DONE: "green", FAILED: "bold red", HELD: "red"}
        for node in view.nodes:
            table.add_row(Text(node.name), Text(node.status, style=style.get(node.status, "")),
                          hms(node.elapsed_s), Text(printable(node.reason)[:120]))
        self._live.update(table)

    def close(self) -> None:
        self._live.stop()


def progress_for(stream: TextIO | None = None) -> LineProgress | LiveProgress:
    """The live table on a terminal, lines otherwise."""
    target = stream or sys.stderr
    if target is sys.stderr and target.isatty():
        return LiveProgress()
    return LineProgress(target)
