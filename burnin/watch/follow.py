"""Follow the kernel log: ``/dev/kmsg`` (a character device) or a file of log lines.

``/dev/kmsg``: opened non-blocking, positioned at its end at start-up (the
history since boot is the probe's business, GPU-04), woken by ``poll()``; each
read returns one record. A read that fails with EPIPE means the ring buffer
overwrote records before they were read: counted, and reading goes on.

A regular file (the simulator's kernel log, a ``dmesg -w`` capture, a syslog
file) is followed like ``tail -F``: at start-up what is there is skipped (only
its last 64 KiB are read, to learn the format and the last sequence number);
new complete lines are read, 64 KiB at a time, every ``poll_s``; when the path
names another file (rotated, replaced) or the file shrank, it is reopened and
read from its start. Records that carry a sequence number at or below the last
one seen are skipped, so a rotated or rewritten log never replays a record.
A line longer than ``max_line`` bytes (16 KiB: no kernel line comes near) is
dropped as it streams by, never held whole: counted in ``overlong``.

Each line is read in the log's format (``burnin.watch.records``: kmsg for a
character device, the configured or detected one for a file), which says
whether the kernel wrote it; the records go to ``emit``, trusted or not.

Both survive the log going away: a failed open is reported once, retried
every ``retry_s``.
"""

from __future__ import annotations

import contextlib
import os
import select
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from burnin.watch.records import KernelRecord, LineReader, LogFormat

Emit = Callable[[KernelRecord, float], None]
Log = Callable[[str], None]

MAX_LINE = 16384  # bytes; a kmsg record's text is at most 1 KiB, rsyslog's default message 8 KiB
CHUNK = 65536  # bytes read from a file at a time
TAIL = 65536  # bytes of an existing file read at start-up (format, last sequence number)


class BoundedLines:
    """Bytes in, complete lines out; a line longer than ``limit`` is dropped as it streams by (counted).

    At most ``limit`` bytes of an unfinished line are ever held.
    """

    def __init__(self, limit: int = MAX_LINE) -> None:
        self.limit = limit
        self.dropped = 0
        self.peak = 0  # the most bytes of an unfinished line held at once
        self._pending = bytearray()
        self._discarding = False  # inside an overlong line: skip to its newline

    def feed(self, data: bytes) -> list[bytes]:
        lines: list[bytes] = []
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            piece = data[start:end]
            if self._discarding:
                self._discarding = False  # the end of a line already counted
            elif len(self._pending) + len(piece) > self.limit:
                self.dropped += 1
            else:
                lines.append(bytes(self._pending) + piece)
            self._pending.clear()
            start = end + 1
        rest = data[start:]
        if not self._discarding and rest:
            if len(self._pending) + len(rest) > self.limit:
                self._pending.clear()
                self._discarding = True
                self.dropped += 1
            else:
                self._pending += rest
                self.peak = max(self.peak, len(self._pending))
        return lines

    def reset(self, *, discarding: bool = False) -> None:
        """Forget the unfinished line; with ``discarding``, drop what comes up to the next newline too."""
        self._pending.clear()
        self._discarding = discarding


class KernelLog:
    def __init__(self, path: Path, emit: Emit, log: Log, *, fmt: LogFormat = LogFormat.AUTO,
                 poll_s: float = 0.1, retry_s: float = 5.0, max_line: int = MAX_LINE) -> None:
        self.path = Path(path)
        self.reader = LineReader(fmt)  # a file's format, kept across reopening
        self.lines = BoundedLines(max_line)
        self.emit = emit
        self.log = log
        self.poll_s = poll_s
        self.retry_s = retry_s
        self.last_seq: int | None = None
        self.overwritten = 0  # EPIPE on /dev/kmsg: records lost before they were read
        self.reopened = 0
        self._skip_existing = True
        self._failing: str | None = None
        self.following = threading.Event()  # set once the log is open
        self.behind = threading.Event()  # set while there is more to read than has been read

    # ------------------------------------------------------------------ records

    @property
    def overlong(self) -> int:
        """Lines longer than ``max_line`` dropped so far."""
        return self.lines.dropped

    def _accept(self, line: str, detected: float, reader: LineReader | None = None) -> None:
        record = (reader or self.reader).read(line)
        if record is None:
            return
        if record.seq is not None:
            if self.last_seq is not None and record.seq <= self.last_seq:
                return
            self.last_seq = record.seq
        self.emit(record, detected)

    def _skip(self, line: str) -> None:
        record = self.reader.read(line)  # also settles an auto-detected format
        if record is not None and record.seq is not None:
            self.last_seq = max(self.last_seq or 0, record.seq)

    # ------------------------------------------------------------------ loop

    def run(self, stop: threading.Event) -> None:
        try:
            self._run(stop)
        finally:
            self.behind.clear()  # nobody reads any more: nothing may wait for the reading

    def _run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                mode = os.stat(self.path).st_mode
                if stat.S_ISCHR(mode):
                    self._follow_device(stop)
                else:
                    self._follow_file(stop)
            except OSError as exc:
                self.behind.clear()  # nothing is being read: the records wait no longer
                # A log that does not exist yet is looked for often (it is cheap); one we may not read, less.
                wait = min(self.retry_s, 0.5) if isinstance(exc, FileNotFoundError) else self.retry_s
                message = f"kernel log {self.path}: {exc.strerror or exc}"
                if message != self._failing:
                    self.log(f"{message}; retrying every {wait:g} s")
                    self._failing = message
                self._skip_existing = False  # whatever appears later is new
                stop.wait(wait)

    def _opened(self) -> None:
        if self._failing is not None:
            self.log(f"kernel log {self.path}: following again")
            self._failing = None
        self.following.set()

    def _follow_device(self, stop: threading.Event) -> None:
        kmsg = LineReader(LogFormat.KMSG)  # a character device is /dev/kmsg: its records carry the facility
        fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            if self._skip_existing:
                os.lseek(fd, 0, os.SEEK_END)
                self._skip_existing = False
            self._opened()
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            while not stop.is_set():
                if not poller.poll(1000):
                    continue
                self.behind.set()
                while True:
                    try:
                        data = os.read(fd, 16384)
                    except BlockingIOError:
                        self.behind.clear()
                        break
                    except BrokenPipeError:
                        self.overwritten += 1
                        continue
                    if not data:
                        break
                    self._accept(data.decode("utf-8", errors="replace"), time.time(), kmsg)
        finally:
            os.close(fd)

    def _follow_file(self, stop: threading.Event) -> None:
        self.behind.clear()
        with self.path.open("rb") as fh:
            opened = os.fstat(fh.fileno())
            self.lines.reset()
            if self._skip_existing:
                self._skip_history(fh, opened.st_size)
            self._opened()
            while not stop.is_set():
                chunk = fh.read(CHUNK)
                if chunk:
                    self.behind.set()
                    detected = time.time()
                    for line in self.lines.feed(chunk):
                        self._accept(line.decode("utf-8", errors="replace"), detected)
                    continue
                self.behind.clear()
                if self._replaced(opened, fh.tell()):
                    self.reopened += 1
                    return  # reopen: read the new file from its start
                stop.wait(self.poll_s)

    def _skip_history(self, fh: BinaryIO, size: int) -> None:
        """Pass over what the file holds at start-up, reading only its tail (format, last sequence number)."""
        start = max(0, size - TAIL)
        fh.seek(start)
        self.lines.reset(discarding=start > 0)  # the tail's first line is cut: not a line
        for line in self.lines.feed(fh.read(size - start)):  # at most TAIL bytes
            self._skip(line.decode("utf-8", errors="replace"))
        self._skip_existing = False

    def _replaced(self, opened: os.stat_result, position: int) -> bool:
        with contextlib.suppress(FileNotFoundError):
            now = os.stat(self.path)
            return (now.st_ino, now.st_dev) != (opened.st_ino, opened.st_dev) or now.st_size < position
        return False  # gone for now: keep the old one open until a new file appears
