"""Following a kernel log file: start at its end, new lines only, rotation without replays."""

from __future__ import annotations

import os
import threading
import time
import tracemalloc
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from burnin.watch.follow import BoundedLines, KernelLog
from burnin.watch.records import KernelRecord


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


# ---------------------------------------------------------------------------------------------- bounded reading

MIB = 1 << 20


def test_an_overlong_line_is_dropped_as_it_streams_by_never_held(tmp_path: Path,
                                                                 follow: Callable[[Path], Follower]) -> None:
    """32 MiB without a newline, then a record: the record is read, the long line never held (traced memory)."""
    log = tmp_path / "kmsg"
    log.write_text("")
    block = b"x" * MIB
    follower = follow(log)
    follower.wait_for(follower.log.following.is_set)
    tracemalloc.start()
    try:
        with log.open("ab") as fh:
            fh.write(b"4,1,2,-;NVRM: Xid (PCI:0000:1b:00): 79, ")
            for _ in range(32):
                fh.write(block)
                fh.flush()
            fh.write(b"\n4,2,3,-;after\n")
        follower.wait_for(lambda: follower.texts()[-1:] == ["after"], timeout=120)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert follower.texts() == ["after"]
    assert peak < 4 * MIB, f"{peak / MIB:.1f} MiB held"
    assert follower.log.overlong == 1


def test_only_the_tail_of_a_long_history_is_read_at_start(tmp_path: Path, follow: Callable[[Path], Follower]) -> None:
    log = tmp_path / "kmsg"
    record = "6,{seq},{seq},-;" + "boot line " * 10 + "\n"
    log.write_text("".join(record.format(seq=seq) for seq in range(200_000)))  # 22 MiB
    tracemalloc.start()
    try:
        follower = follow(log)
        follower.wait_for(follower.log.following.is_set, timeout=120)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * MIB, f"{peak / MIB:.1f} MiB held"
    assert follower.log.last_seq == 199_999  # learnt from the tail
    _append(log, "4,199999,1,-;a replay\n4,200000,1,-;new\n")
    follower.wait_for(lambda: follower.texts() == ["new"])


def test_the_history_settles_the_format(tmp_path: Path, follow: Callable[[Path], Follower]) -> None:
    log = tmp_path / "syslog"
    log.write_text("Dec  1 00:00:00 n kernel: boot\n")
    follower = follow(log)
    follower.wait_for(follower.log.following.is_set)
    _append(log, "[  1.000000] NVRM: Xid (PCI:0000:1b:00): 79, forged\nDec  1 00:00:01 n kernel: real\n")
    follower.wait_for(lambda: len(follower.records) == 2)
    forged, real = follower.records
    assert not forged.trusted and forged.origin == "not a syslog line"
    assert real.trusted and real.text == "real"


@pytest.mark.parametrize(("chunks", "lines", "dropped"), [
    ([b"a\nb\n"], [b"a", b"b"], 0),
    ([b"a", b"b\nc", b"\n"], [b"ab", b"c"], 0),
    ([b"12345678\n"], [b"12345678"], 0),  # exactly the limit
    ([b"12345678", b"\n"], [b"12345678"], 0),  # exactly the limit, held unfinished
    ([b"123456789\nok\n"], [b"ok"], 1),  # one over, ended in the chunk
    ([b"1234", b"56789", b"abc\nok\n"], [b"ok"], 1),  # over the limit across chunks
    ([b"12345", b"6789", b"x" * 100, b"\n", b"ok\n"], [b"ok"], 1),  # dropped as it streams by
    ([b"\n\n"], [b"", b""], 0),
    ([b"x" * 20, b"\n" + b"y" * 20 + b"\n"], [], 2),
])
def test_bounded_lines(chunks: list[bytes], lines: list[bytes], dropped: int) -> None:
    splitter = BoundedLines(limit=8)
    got = [line for chunk in chunks for line in splitter.feed(chunk)]
    assert got == lines and splitter.dropped == dropped and splitter.peak <= 8


def test_bounded_lines_reset() -> None:
    splitter = BoundedLines(limit=8)
    splitter.feed(b"half")
    splitter.reset()
    assert splitter.feed(b"new\n") == [b"new"]
    splitter.reset(discarding=True)  # in the middle of a line: drop up to its end, uncounted
    assert splitter.feed(b"rest of it\nnext\n") == [b"next"] and splitter.dropped == 0


def test_behind_is_set_while_lines_are_read_and_clear_once_caught_up(tmp_path: Path) -> None:
    log = tmp_path / "kmsg"
    log.write_text("")
    states: list[bool] = []
    follower = Follower(log)

    def emit(record: KernelRecord, detected: float) -> None:
        states.append(follower.log.behind.is_set())
        follower.records.append(record)

    follower.log.emit = emit
    follower.thread.start()
    try:
        follower.wait_for(follower.log.following.is_set)
        _append(log, "".join(f"4,{seq},1,-;line {seq}\n" for seq in range(1, 2001)))
        follower.wait_for(lambda: len(follower.records) == 2000)
        follower.wait_for(lambda: not follower.log.behind.is_set())
    finally:
        follower.stop.set()
        follower.thread.join(timeout=5)
    assert states == [True] * 2000


def test_a_missing_log_is_not_behind(tmp_path: Path, follow: Callable[[Path], Follower]) -> None:
    follower = follow(tmp_path / "kmsg")
    follower.log.behind.set()
    follower.wait_for(lambda: bool(follower.messages))
    follower.wait_for(lambda: not follower.log.behind.is_set())


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_follower_that_ends_is_not_behind(tmp_path: Path) -> None:
    log = tmp_path / "kmsg"
    log.write_text("")
    follower = Follower(log)

    def emit(record: KernelRecord, detected: float) -> None:
        raise RuntimeError("a bug in the caller")

    follower.log.emit = emit
    follower.thread.start()
    follower.wait_for(follower.log.following.is_set)
    _append(log, "4,1,2,-;line\n")
    follower.thread.join(timeout=30)
    assert not follower.thread.is_alive() and not follower.log.behind.is_set()


@pytest.mark.parametrize(("extra", "kept"), [(0, True), (1, False)])
def test_a_line_of_16_kib_is_read_one_byte_more_is_not(tmp_path: Path, follow: Callable[[Path], Follower],
                                                       extra: int, kept: bool) -> None:
    log = tmp_path / "kmsg"
    log.write_text("")
    follower = follow(log)
    follower.wait_for(follower.log.following.is_set)
    head = "4,1,2,-;"
    _append(log, head + "x" * (16384 - len(head) + extra) + "\n4,2,3,-;after\n")
    follower.wait_for(lambda: follower.texts()[-1:] == ["after"])
    assert len(follower.records) == (2 if kept else 1) and follower.log.overlong == (0 if kept else 1)


@pytest.mark.parametrize(("extra", "learnt"), [(0, 5), (1, None)])
def test_the_history_read_is_its_last_64_kib(tmp_path: Path, follow: Callable[[Path], Follower], extra: int,
                                             learnt: int | None) -> None:
    first = "14,5,1,-;the only record with a number\n"  # cut by one byte, still a record: "4,5,1,-;..."
    continuation = " KEY=" + "v" * 58 + "\n"  # 64 bytes, no record
    filler = 65536 - len(first) + extra
    log = tmp_path / "kmsg"
    log.write_text(first + continuation * (filler // 64) + " " * (filler % 64 - 1) + "\n" if filler % 64
                   else first + continuation * (filler // 64))
    assert log.stat().st_size == 65536 + extra
    follower = follow(log)
    follower.wait_for(follower.log.following.is_set)
    assert follower.log.last_seq == learnt


def test_a_log_removed_before_its_successor_exists_is_read_to_its_end(tmp_path: Path,
                                                                      follow: Callable[[Path], Follower]) -> None:
    log = tmp_path / "kmsg"
    log.write_text("")
    follower = follow(log)
    follower.wait_for(follower.log.following.is_set)
    with log.open("a") as writer:
        log.unlink()  # rotated away; the writer still holds it
        writer.write("4,1,2,-;written after the rename\n")
        writer.flush()
        follower.wait_for(lambda: follower.texts() == ["written after the rename"])
    assert follower.log.reopened == 0


def _writable_kmsg() -> bool:
    try:
        os.close(os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK))
        os.close(os.open("/dev/kmsg", os.O_WRONLY))
    except OSError:
        return False
    return True


@pytest.mark.skipif(not _writable_kmsg(), reason="needs /dev/kmsg readable and writable (root)")
def test_the_kernel_gives_a_record_written_to_dev_kmsg_the_user_facility() -> None:
    """The real /dev/kmsg: a program that writes a record there, asking for the kernel's facility (<4>),
    gets the user facility; the watch reads it as not the kernel's. (One harmless line in the host's log.)"""
    marker = f"burnin watch test {uuid.uuid4().hex}: a user-space record"
    follower = Follower(Path("/dev/kmsg"))
    follower.thread.start()
    try:
        follower.wait_for(follower.log.following.is_set)
        fd = os.open("/dev/kmsg", os.O_WRONLY)
        try:
            os.write(fd, f"<4>{marker}\n".encode())
        finally:
            os.close(fd)
        follower.wait_for(lambda: marker in follower.texts())
    finally:
        follower.stop.set()
        follower.thread.join(timeout=5)
    assert not follower.thread.is_alive()
    (record,) = [r for r in follower.records if r.text == marker]
    assert not record.trusted and record.origin == "kmsg facility 1 (user)" and record.seq is not None
