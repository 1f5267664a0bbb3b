"""Kernel log lines to records, and whether the kernel wrote them (pure).

The watch acts only on what the kernel itself logged. Which lines those are
depends on the log's format; each format says it in its own way:

- ``kmsg``: ``/dev/kmsg`` records, ``<prio>,<seq>,<usec>,<flags>[,...];<text>``
  (continuation lines `` KEY=value`` are no records). The priority carries the
  facility (``prio >> 3``): 0 is the kernel. A program that writes to
  ``/dev/kmsg`` gets another facility (the kernel gives a user-space record the
  user facility when it asks for facility 0), so only facility 0 is trusted.
- ``dmesg``: a capture of the kernel's ring buffer (``dmesg -w``, ``dmesg -T``,
  ``dmesg --time-format iso``, ``dmesg -x``, ``dmesg -r``, ``dmesg -t``): the
  lines carry no tag, the buffer is the kernel's. Trusted, except where the line
  names a facility (``-x``: ``user  :warn  :``; ``-r``: ``<12>``) other than the kernel's.
- ``syslog``: ``Mon DD HH:MM:SS host tag[pid]: text`` (rsyslog's files, ``journalctl -k``;
  also with an RFC 3339 time). Only the tag ``kernel`` is trusted; a syslog file
  does not carry the facility, so ``logger -t kernel`` can still forge it in a
  file that collects every facility: follow a kernel-only file (``kern.log``).
- ``auto``: the first line in one of the forms above decides, for good (a
  character device is always ``kmsg``). Until then no line is trusted.

Every record's ``text`` is the message the driver printed (the time stamps and
headers removed); ``trusted`` says whether the kernel wrote it, ``origin`` why
not when it did not.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass


class LogFormat(str, enum.Enum):
    AUTO = "auto"
    KMSG = "kmsg"
    DMESG = "dmesg"
    SYSLOG = "syslog"


KERNEL_FACILITY = 0
_FACILITIES = ("kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news", "uucp", "cron",
               "authpriv", "ftp")

_KMSG = re.compile(r"(\d{1,3}),(\d{1,20}),(\d{1,20}),[^;]{0,64};(.*)", re.DOTALL)
# dmesg prefixes, in the order they come: -r's <prio>, -x's "kern  :warn  : ", then the time.
_DMESG_RAW = re.compile(r"<(\d{1,3})>")
_DMESG_DECODE = re.compile(r"([a-z]{2,8}[0-7]?) *:([a-z]{2,7}) *: ")
_DMESG_BRACKET = re.compile(r"\[[^\]\n]{1,40}\] ?")  # [  12.345678], [Sun Feb 23 16:24:18 2025], [  +0.000010]
_DMESG_ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d{1,9}[+-]\d\d:?\d\d ")
_SYSLOG = re.compile(
    r"(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d(?:\.\d{1,9})?"  # Dec  1 13:00:00 (rsyslog, journalctl short)
    r"|\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?)"  # RFC 3339 (short-iso)
    r" (\S{1,255}) ([^\s\[\]:]{1,64})(\[\d{1,10}\])?: ?(.*)",
    re.DOTALL)


@dataclass(frozen=True, slots=True)
class KernelRecord:
    seq: int | None
    usec: int | None
    level: int | None
    text: str
    trusted: bool = True
    origin: str = "kernel"  # where an untrusted line came from: "kmsg facility 1 (user)", "syslog tag 'alice'"


def _facility_name(facility: int) -> str:
    if facility < len(_FACILITIES):
        return _FACILITIES[facility]
    return f"local{facility - 16}" if 16 <= facility <= 23 else str(facility)


def _facility_number(name: str) -> int | None:
    """``kern`` -> 0, ``local3`` -> 19; None for a word that names no facility."""
    if name in _FACILITIES:
        return _FACILITIES.index(name)
    if re.fullmatch(r"local[0-7]", name):
        return 16 + int(name[5:])
    return None


def _first_line(line: str) -> str | None:
    """The record's own line: None for blank lines and kmsg continuations (`` KEY=value``)."""
    if not line.strip() or line.startswith(" "):
        return None
    return line.split("\n", 1)[0].rstrip("\r")


def read_kmsg(line: str) -> KernelRecord | None:
    """One ``/dev/kmsg`` record; trusted only with the kernel facility. A line in another form is untrusted."""
    first = _first_line(line)
    if first is None:
        return None
    match = _KMSG.fullmatch(first)
    if match is None:
        return KernelRecord(None, None, None, first, trusted=False, origin="not a kmsg record")
    prio, seq, usec, text = match.groups()
    facility = int(prio) >> 3
    origin = "kernel" if facility == KERNEL_FACILITY else f"kmsg facility {facility} ({_facility_name(facility)})"
    return KernelRecord(int(seq), int(usec), int(prio) & 7, text, trusted=facility == KERNEL_FACILITY,
                        origin=origin)


def read_dmesg(line: str) -> KernelRecord | None:
    """One line of a ``dmesg`` capture: trusted unless its prefix names another facility than the kernel's."""
    first = _first_line(line)
    if first is None:
        return None
    text, level, facility = first, None, KERNEL_FACILITY
    raw = _DMESG_RAW.match(text)
    if raw is not None:
        prio = int(raw.group(1))
        level, facility = prio & 7, prio >> 3
        text = text[raw.end():]
    decode = _DMESG_DECODE.match(text)
    named = None if decode is None else _facility_number(decode.group(1))
    if decode is not None and named is not None:
        facility = named
        text = text[decode.end():]
    stamp = _DMESG_BRACKET.match(text) or _DMESG_ISO.match(text)
    if stamp is not None:
        text = text[stamp.end():]
    if facility != KERNEL_FACILITY:
        return KernelRecord(None, None, level, text, trusted=False,
                            origin=f"dmesg facility {facility} ({_facility_name(facility)})")
    return KernelRecord(None, None, level, text)


def read_syslog(line: str) -> KernelRecord | None:
    """One syslog line: trusted only with the tag ``kernel`` (no pid: the kernel has none)."""
    first = _first_line(line)
    if first is None:
        return None
    match = _SYSLOG.fullmatch(first)
    if match is None:
        return KernelRecord(None, None, None, first, trusted=False, origin="not a syslog line")
    _host, tag, pid, text = match.groups()
    if tag != "kernel" or pid is not None:
        return KernelRecord(None, None, None, text, trusted=False, origin=f"syslog tag {tag + (pid or '')!r}")
    stamp = _DMESG_BRACKET.match(text)  # kernel: [  123.456789] NVRM: ... (imklog with the kernel's time)
    return KernelRecord(None, None, None, text[stamp.end():] if stamp else text)


_READERS = {LogFormat.KMSG: read_kmsg, LogFormat.DMESG: read_dmesg, LogFormat.SYSLOG: read_syslog}


def detect(line: str) -> LogFormat | None:
    """The format a line is written in, or None when it could be several (a bare ``dmesg -t`` line) or none."""
    first = _first_line(line)
    if first is None:
        return None
    if _KMSG.fullmatch(first):
        return LogFormat.KMSG
    if _SYSLOG.fullmatch(first):
        return LogFormat.SYSLOG
    if _DMESG_RAW.match(first) or _DMESG_BRACKET.match(first) or _DMESG_ISO.match(first):
        return LogFormat.DMESG
    decode = _DMESG_DECODE.match(first)
    if decode is not None and _facility_number(decode.group(1)) is not None:
        return LogFormat.DMESG
    return None


class LineReader:
    """Reads one log's lines in its format; ``auto`` settles on the first line whose format is clear."""

    def __init__(self, fmt: LogFormat = LogFormat.AUTO) -> None:
        self.format = fmt

    def read(self, line: str) -> KernelRecord | None:
        if self.format is LogFormat.AUTO:
            found = detect(line)
            if found is None:
                first = _first_line(line)
                return None if first is None else KernelRecord(None, None, None, first, trusted=False,
                                                               origin="log format not known yet")
            self.format = found
        return _READERS[self.format](line)
