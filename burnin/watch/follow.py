"""Follow the kernel log: ``/dev/kmsg`` (a character device) or a file of log lines.

``/dev/kmsg``: opened non-blocking, positioned at its end at start-up (the
history since boot is the probe's business, GPU-04), woken by ``poll()``; each
read returns one record. A read that fails with EPIPE means the ring buffer
overwrote records before they were read: counted, and reading goes on.

A regular file (the simulator's kernel log, or a syslog file) is followed like
``tail -F``: at start-up what is there is skipped; new complete lines are read
every ``poll_s``; when the path names another file (rotated, replaced) or the
file shrank, it is reopened and read from its start. Records that carry a
sequence number at or below the last one seen are skipped, so a rotated or
rewritten log never replays a record.

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

from burnin.watch.kmsg import KernelRecord, parse_record

Emit = Callable[[KernelRecord, float], None]
Log = Callable[[str], None]


class KernelLog:
    def __init__(self, path: Path, emit: Emit, log: Log, *, poll_s: float = 0.1, retry_s: float = 5.0) -> None:
        self.path = Path(path)
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

    # ------------------------------------------------------------------ records

    def _accept(self, line: str, detected: float) -> None:
        record = parse_record(line)
        if record is None:
            return
        if record.seq is not None:
            if self.last_seq is not None and record.seq <= self.last_seq:
                return
            self.last_seq = record.seq
        self.emit(record, detected)

    def _skip(self, line: str) -> None:
        record = parse_record(line)
        if record is not None and record.seq is not None:
            self.last_seq = max(self.last_seq or 0, record.seq)

    # ------------------------------------------------------------------ loop

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                mode = os.stat(self.path).st_mode
                if stat.S_ISCHR(mode):
                    self._follow_device(stop)
                else:
                    self._follow_file(stop)
            except OSError as exc:
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
                while True:
                    try:
                        data = os.read(fd, 16384)
                    except BlockingIOError:
                        break
                    except BrokenPipeError:
                        self.overwritten += 1
                        continue
                    if not data:
                        break
                    self._accept(data.decode("utf-8", errors="replace"), time.time())
        finally:
            os.close(fd)

    def _follow_file(self, stop: threading.Event) -> None:
        with self.path.open("rb") as fh:
            opened = os.fstat(fh.fileno())
            pending = b""
            if self._skip_existing:
                head, _, pending = fh.read().rpartition(b"\n")
                for line in head.decode("utf-8", errors="replace").splitlines():
                    self._skip(line)
                self._skip_existing = False
            self._opened()
            while not stop.is_set():
                chunk = fh.read()
                if chunk:
                    detected = time.time()
                    pending += chunk
                    complete, _, pending = pending.rpartition(b"\n")
                    if complete:
                        for line in complete.decode("utf-8", errors="replace").split("\n"):
                            self._accept(line, detected)
                    continue
                if self._replaced(opened, fh.tell()):
                    self.reopened += 1
                    return  # reopen: read the new file from its start
                stop.wait(self.poll_s)

    def _replaced(self, opened: os.stat_result, position: int) -> bool:
        with contextlib.suppress(FileNotFoundError):
            now = os.stat(self.path)
            return (now.st_ino, now.st_dev) != (opened.st_ino, opened.st_dev) or now.st_size < position
        return False  # gone for now: keep the old one open until a new file appears
