"""Helpers shared by the parsers.

Everything here is pure: text in, values out. Number helpers return ``None``
instead of raising, so a parser decides itself what an unreadable value means.
Regular expressions in this package are written so that their running time is
linear in the line length (no nested or adjacent unbounded quantifiers over the
same characters); a test feeds every parser long pathological lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import NoReturn

from burnin.errors import ParseError

# A decimal number with optional exponent; anchored by the callers.
_FLOAT = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
_INT = re.compile(r"[-+]?\d+")
_HEX = re.compile(r"0[xX][0-9a-fA-F]+")
# Longest digit string we convert. Python refuses int() of more than 4300
# digits; no tool prints anything near this.
_MAX_DIGITS = 40
NOT_AVAILABLE = frozenset({"n/a", "[n/a]", "na", "-", "--", "", "unknown", "[unknown error]"})
# Lines that tools never print but that copy-pasted outputs carry.
ELISIONS = frozenset({"[...]", "...", "[..]", "[ ... ]", "…"})


def split_lines(text: str) -> list[str]:
    """Split text on ``\\n``, ``\\r\\n`` or ``\\r``; drop a byte-order mark and NULs."""
    if text.startswith("\ufeff"):
        text = text[1:]
    text = text.replace("\x00", "")
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


_NEWLINE = re.compile(r"\r\n|\r|\n")
_CHUNK_CHARS = 1 << 16
"""Text split into lines at a time by :func:`iter_lines` (str.split's speed, a bounded list)."""


def iter_lines(text: str) -> Iterator[str]:
    """The lines :func:`split_lines` gives, one at a time: no list of them all, no copy of ``text``.

    For outputs of hundreds of MB (a kernel log, a training log) a list of lines
    costs about twice the text again; parsers that read line by line use this.
    Text with ``\\n`` line ends alone (nearly all) is split ``str.split``'s way a
    chunk of about :data:`_CHUNK_CHARS` characters at a time, ten times faster than
    a match per line.
    """
    start = 1 if text.startswith("\ufeff") else 0
    if "\x00" in text:  # rare: one copy without the NULs
        text = text[start:].replace("\x00", "")
        start = 0
    if "\r" in text:
        for match in _NEWLINE.finditer(text, start):
            yield text[start : match.start()]
            start = match.end()
        yield text[start:]
        return
    while True:
        end = text.find("\n", start + _CHUNK_CHARS)
        if end < 0:
            yield from text[start:].split("\n")
            return
        yield from text[start:end].split("\n")
        start = end + 1


# Any run of three or more dots (or ellipsis characters), bare or in brackets: "....", "[ .... ]", "(...)".
_DOTS = re.compile(r"(?:\.{3,}|…+|\[\s*(?:\.{2,}|…+)\s*\]|\(\s*(?:\.{2,}|…+)\s*\))")


def is_elision(line: str) -> bool:
    """True for ``[...]``-style lines (and ``....``) that mark text cut out of a quoted output."""
    if "." not in line and "…" not in line:  # every elision has a dot or an ellipsis (most lines: neither)
        return False
    s = line.strip().lstrip(">").strip()
    return s in ELISIONS or _DOTS.fullmatch(s) is not None


# "[root@cn3 ~]# ", "root@node-008:~# ", "centos7@centos7:~$ ": a prompt naming its user and host.
_HOST_PROMPT = re.compile(r"^(?:\[[^\]\s][^\]]{0,80}\]|[\w.-]{1,64}@[\w.-]{1,64}(?::\S{0,200}?)?)\s?[#$](?:\s|$)")


def is_prompt(line: str) -> bool:
    """True for a shell prompt line that precedes a quoted command output.

    ``$ cmd``, ``# cmd``, a root prompt written without its space (``#ibstatus``),
    a prompt with user and host (``[root@cn3 ~]# cmd``, ``root@node:~# cmd``) and
    Markdown fences. Only parsers of tools that never print a line starting with
    ``#`` or ``$`` ask this.
    """
    if "#" not in line and "$" not in line and "`" not in line:  # every prompt or fence has one (most lines: none)
        return False
    s = line.strip()
    if s.startswith(("# ", "```")) or s in ("```", "#"):
        return True
    if s[:1] == "#" and s[1:2].isalpha():
        return True
    return is_user_prompt(s)


def is_user_prompt(line: str) -> bool:
    """A prompt that cannot be a comment: ``$ cmd``, ``$cmd`` or one naming user and host.

    For tools whose own output has ``# `` comment lines (``lscpu -p``).
    """
    if "$" not in line and "#" not in line:  # every such prompt has one (most lines: neither)
        return False
    s = line.strip()
    if s.startswith("$ ") or s == "$" or (s[:1] == "$" and s[1:2].isalpha()):
        return True
    return _HOST_PROMPT.match(s) is not None


def is_command_echo(line: str, *commands: str) -> bool:
    """The command itself, pasted without a prompt above its output: ``ibstat``, ``sudo ibstat mlx5_0 1``."""
    if len(commands) == 1:  # most lines name none
        if commands[0] not in line:
            return False
    elif not any(command in line for command in commands):
        return False
    words = line.split()
    if words[:1] == ["sudo"]:
        words = words[1:]
    return bool(words) and words[0] in commands and not any(w.endswith(":") for w in words)


def parse_int(text: str | None) -> int | None:
    """Parse a decimal (or ``0x`` hex) integer; ``None`` when it is not one."""
    if text is None:
        return None
    s = text.strip()
    if len(s) > _MAX_DIGITS:
        return None
    if s.isascii() and s.isdigit():  # plain decimal digits (nearly every value): no other question to ask
        return int(s)
    if s.lower() in NOT_AVAILABLE:
        return None
    if _INT.fullmatch(s):
        return int(s)
    if _HEX.fullmatch(s):
        return int(s, 16)
    return None


def unquote(line: str) -> str:
    """A line stripped of whitespace and of leading ``>`` quote marks (outputs pasted into issues)."""
    s = line.strip()
    while s.startswith(">"):
        s = s[1:].strip()
    return s


def int_header(tokens: list[str]) -> tuple[int, ...] | None:
    """The column numbers of a matrix header (``0 1 2 ...``), or None when a token is not an integer."""
    numbers = [parse_int(t) for t in tokens]
    if not numbers or any(n is None for n in numbers):
        return None
    return tuple(n for n in numbers if n is not None)


def parse_float(text: str | None) -> float | None:
    """Parse a decimal number (``nan``/``inf`` allowed); ``None`` when it is not one."""
    if text is None:
        return None
    s = text.strip()
    if len(s) > _MAX_DIGITS or s.lower() in NOT_AVAILABLE:
        return None
    if _FLOAT.fullmatch(s):
        return float(s)
    if s.lower().lstrip("+-") in ("nan", "inf", "infinity"):
        return float(s)
    return None


def leading_float(text: str | None) -> float | None:
    """The number a value starts with: ``"700.00 W"`` -> 700.0, ``"16x"`` -> 16.0."""
    if text is None:
        return None
    s = text.strip()
    m = _FLOAT.match(s)
    if m is None or len(m.group(0)) > _MAX_DIGITS:
        return None
    return float(m.group(0))


def leading_int(text: str | None) -> int | None:
    """The integer a value starts with: ``"2560 bank(s)"`` -> 2560."""
    if text is None:
        return None
    m = _INT.match(text.strip())
    if m is None or len(m.group(0)) > _MAX_DIGITS:
        return None
    return int(m.group(0))


def yes_no(text: str | None) -> bool | None:
    """``Yes``/``No`` (and a few synonyms) to a bool; ``None`` otherwise."""
    if text is None:
        return None
    s = text.strip().lower()
    if s in ("yes", "true", "enabled", "on", "active"):
        return True
    if s in ("no", "false", "disabled", "off", "not active", "inactive"):
        return False
    return None


def excerpt(lines: Iterable[str], limit: int = 300) -> str:
    """Join some lines into a short excerpt for a ParseError."""
    out = "\n".join(lines)
    return out[:limit]


def head_excerpt(text: str, limit: int = 300) -> str:
    """The first non-blank lines of text, for a ParseError."""
    return excerpt((ln for ln in split_lines(text) if ln.strip()), limit)


def fail(tool: str, message: str, near: str = "") -> NoReturn:
    """Raise the one error type parsers are allowed to raise."""
    raise ParseError(tool, message, near)


def require_text(tool: str, text: str) -> None:
    """Reject input that is not a string or that holds nothing but whitespace."""
    if not isinstance(text, str):
        fail(tool, f"expected text, got {type(text).__name__}")
    if not text.strip():
        fail(tool, "empty input")


def expand_cpu_list(spec: str, *, limit: int = 65536) -> tuple[int, ...]:
    """Expand a Linux CPU list such as ``"0-55,112-167"`` into CPU numbers.

    Raises ParseError (tool ``cpu-list``) on a malformed list or one naming more
    than ``limit`` CPUs.
    """
    out: list[int] = []
    s = spec.strip()
    if not s:
        return ()
    for part in s.split(","):
        part = part.strip()
        lo_s, sep, hi_s = part.partition("-")
        lo = parse_int(lo_s)
        hi = parse_int(hi_s) if sep else lo
        if lo is None or hi is None or lo < 0 or hi < lo:
            fail("cpu-list", "malformed CPU list", spec)
        if len(out) + (hi - lo + 1) > limit:
            fail("cpu-list", f"CPU list names more than {limit} CPUs", spec)
        out.extend(range(lo, hi + 1))
    return tuple(out)


def compress_cpu_list(cpus: Iterable[int]) -> str:
    """Fold CPU numbers into the Linux list form: ``[0, 1, 2, 5]`` -> ``"0-2,5"``."""
    ordered = sorted(set(cpus))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


def split_key_value(line: str) -> tuple[str, str] | None:
    """Split ``"Key   : value"`` at the first colon that follows whitespace.

    nvidia-smi pads keys with spaces before the colon, and values may hold
    colons themselves (bus ids, times). Returns None when there is no such colon.
    """
    idx = line.find(":")
    while idx > 0 and not line[idx - 1].isspace():
        idx = line.find(":", idx + 1)
    if idx <= 0:
        return None
    key = line[:idx].strip()
    if not key:
        return None
    return key, line[idx + 1 :].strip()


def split_colon(line: str) -> tuple[str, str] | None:
    """Split ``"Key: value"`` at the first colon (for ``lscpu``, ``ibstat``)."""
    key, sep, value = line.partition(":")
    key = key.strip()
    if not sep or not key:
        return None
    return key, value.strip()
