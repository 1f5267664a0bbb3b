"""Node-provided text made safe to show: control characters escaped, length bounded.

Everything a node printed (tool output, NVML strings, dmesg lines) may carry
ESC, NUL or other C0/C1 bytes. Shown raw they rewrite an operator's terminal,
break XML and corrupt drain reasons. Every output surface (terminal, HTML,
JUnit, gate.json reasons, Slurm drain reasons) passes such text through
:func:`printable` first, so ``\\x1b[31m`` is shown as the six characters
``\\x1b[31m``.
"""

from __future__ import annotations

import re

# C0 controls except tab and newline, DEL, C1 controls, and the Unicode
# line/paragraph separators and bidi overrides that reorder what is shown.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_CONTROL_NO_NEWLINE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: object, *, keep_newlines: bool = False, limit: int | None = None) -> str:
    """``text`` with every control character shown as ``\\xNN`` (tab kept; newlines only if asked)."""
    value = str(text)
    if not value.isprintable():  # printable text (nearly all) holds none of the characters escaped
        pattern = _CONTROL if keep_newlines else _CONTROL_NO_NEWLINE
        value = pattern.sub(_escape, value)
    if limit is not None and len(value) > limit:
        value = value[: max(0, limit - 3)] + "..."
    return value


def has_control(text: str) -> bool:
    """True when ``text`` holds a character :func:`printable` would escape."""
    return _CONTROL_NO_NEWLINE.search(text) is not None
