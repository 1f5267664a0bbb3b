"""``dcgmi``'s own failure lines (every subcommand prints them), apart from the diag parser.

The health probe reads them for ``dcgmi health -c`` (GPU-12) and never runs a
diag, so it imports this module, not :mod:`burnin.parsers.dcgmi` and its diag
result types.
"""

from __future__ import annotations

import re

from burnin.parsers._common import iter_lines

_COMMAND_ERROR = re.compile(r"^\s{0,8}Error: (\S.{0,400})$")


def command_errors(text: str) -> tuple[str, ...]:
    """dcgmi's own failure lines, ``Error: <what>`` outside any table (every ``dcgmi`` subcommand prints them).

    E.g. ``Error: Unable to connect to host engine. Host engine connection invalid/disconnected.``
    (NVIDIA/DCGM ``dcgmi/Command.cpp``) or ``Error: Health watches not enabled. Please enable watches.``
    (``dcgmi/Health.cpp``). Returned without the ``Error:`` prefix, in order.
    """
    out: list[str] = []
    for line in iter_lines(text):
        match = _COMMAND_ERROR.match(line.rstrip())
        if match is not None:
            out.append(match.group(1).strip())
    return tuple(out)
