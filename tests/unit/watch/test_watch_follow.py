"""Following a kernel log file: start at its end, new lines only, rotation without replays."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from burnin.watch.follow import KernelLog
from burnin.watch.kmsg import KernelRecord


class Follower:
    def __init__(self, path: Path) -> None:
        self.records: list[KernelRecord] = []
        self.messages: list[str] = []
        self.log = KernelLog(path, lambda record, _: self.records.append(record), self.messages.append,
                             poll_s=0.01, retry_s=0.05)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.log.run, args=(self.stop,), daemon=True)

    def texts(self) -> list[str]:
        return [r.text for r in self.records]

    def wait_for(self, what: Callable[[], bool], timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if what():
                return
            time.sleep(0.01)
        pytest.fail(f"not reached within {timeout} s: records {self.texts()}, log {self.messages}")


@pytest.fixture
def follow(tmp_path: Path) -> Iterator[Callable[[Path], Follower]]:
    started: list[Follower] = []

    def start(path: Path) -> Follower:
        follower = Follower(path)
        follower.thread.start()
        started.append(follower)
        return follower

    yield start
    for follower in started:
        follower.stop.set()
        follower.thread.join(timeout=5)


def _append(path: Path, text: str) -> None:
    with path.open("a", encoding="utf-8") as fh:
        fh.write(text)


def test_history_is_skipped_new_records_are_read(tmp_path: Path, follow: Callable[[Path], Follower]) -> None:
    log = tmp_path / "kmsg"
    log.write_text("6,0,1,-;old boot line\n4,1,2,-;NVRM: Xid (PCI:0000:1b:00): 79, old\n")
    follower = follow(log)
    follower.wait_for(follower.log.following.is_set)
    _append(log, "4,2,3,-;new line\n")
    follower.wait_for(lambda: follower.texts() == ["new line"])
    assert follower.log.last_seq == 2


def test_a_line_is_read_only_once_complete(tmp_path: Path, follow: Callable[[Path], Follower]) -> None:
    log = tmp_path / "kmsg"
    log.write_text("")
    follower = follow(log)
    follower.wait_for(follower.log.following.is_set)
    _append(log, "4,0,1,-;half")
    time.sleep(0.1)
    assert follower.records == []
    _append(log, " and the rest\n")
    follower.wait_for(lambda: follower.texts() == ["half and the rest"])


def test_replaced_log_is_reopened_without_replaying(tmp_path: Path, follow: Callable[[Path], Follower]) -> None:
    log = tmp_path / "kmsg"
    log.write_text("6,0,1,-;boot\n")
    follower = follow(log)
    follower.wait_for(follower.log.following.is_set)
    _append(log, "4,1,2,-;first\n")
    follower.wait_for(lambda: follower.texts() == ["first"])
    rotated = tmp_path / "kmsg.new"
    rotated.write_text("6,0,1,-;boot\n4,1,2,-;first\n4,2,3,-;second\n")
    os.replace(rotated, log)  # a new inode holding the old records and one more
    follower.wait_for(lambda: follower.texts() == ["first", "second"])
    _append(log, "4,3,4,-;third\n")
    follower.wait_for(lambda: follower.texts() == ["first", "second", "third"])
    assert follower.log.reopened == 1


def test_truncated_log_is_read_from_its_start(tmp_path: Path, follow: Callable[[Path], Follower]) -> None:
    log = tmp_path / "kern.log"
    log.write_text("Dec  1 00:00:00 n kernel: boot\n")
    follower = follow(log)
    follower.wait_for(follower.log.following.is_set)
    _append(log, "Dec  1 00:00:01 n kernel: ib0: lost carrier\n")
    follower.wait_for(lambda: len(follower.records) == 1)
    log.write_text("")  # copytruncate rotation
    follower.wait_for(lambda: follower.log.reopened == 1)
    _append(log, "Dec  1 00:00:02 n kernel: ib0: Gained carrier\n")
    follower.wait_for(lambda: len(follower.records) == 2)
    assert follower.records[1].text.endswith("ib0: Gained carrier") and follower.records[1].seq is None


def test_a_log_that_appears_later_is_read_from_its_start(tmp_path: Path,
                                                         follow: Callable[[Path], Follower]) -> None:
    log = tmp_path / "kmsg"
    follower = follow(log)
    follower.wait_for(lambda: bool(follower.messages))
    assert "No such file" in follower.messages[0]
    log.write_text("4,0,1,-;NVRM: Xid (PCI:0000:1b:00): 79, first ever\n")
    follower.wait_for(lambda: follower.texts() == ["NVRM: Xid (PCI:0000:1b:00): 79, first ever"])
    assert follower.messages[-1].endswith("following again")
