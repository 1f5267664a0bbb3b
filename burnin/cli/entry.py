"""The ``burnin`` console script.

``burnin probe`` is asked of the resident probe first, when one serves this node with the same options
(burnin.cli.probe_ask: nothing else is imported for it); every other command, and every probe the resident
probe does not answer, goes to :func:`burnin.cli.main.main`.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing costs ~12 ms to import: this is what the probe's answer costs in all
if TYPE_CHECKING:
    from typing import NoReturn


def main() -> int:
    argv = sys.argv[1:]
    if argv[:1] == ["probe"]:
        try:
            from burnin.cli.probe_ask import ask_resident

            answer = ask_resident(argv[1:])
        except KeyboardInterrupt:
            print("burnin probe: interrupted (SIGINT)", file=sys.stderr)
            _exit(3)
        if answer is not None:
            code, line = answer
            _print(line)
            _exit(code)
    from burnin.cli.main import main as run_command

    return run_command()


def _print(line: str) -> None:
    """The answer's line on stdout; a character stdout cannot encode as ``\\uXXXX``; a reader gone: nothing."""
    try:
        try:
            print(line)
        except UnicodeEncodeError:
            sys.stdout.buffer.write(line.encode("ascii", "backslashreplace") + b"\n")
    except (OSError, ValueError):  # the reader went away: the exit code is the answer
        pass


def _exit(code: int) -> NoReturn:
    """Out with ``code`` once stdout and stderr are flushed (as burnin.cli.main does: nothing left to tear down)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)
