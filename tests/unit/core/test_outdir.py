"""burnin.outdir: run ids that never collide, and one owner per output folder (issue 19)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from burnin.cli import run_cmd
from burnin.errors import UsageError
from burnin.outdir import COMMAND_CHARS, LOCK_FILE, FolderInUse, Holder, _same_file, new_run_id, own

SECOND = 1767225600.0  # 2026-01-01T00:00:00Z


def test_run_ids_of_one_second_differ_and_sort_by_time() -> None:
    ids = {new_run_id(now=SECOND) for _ in range(1000)}
    assert len(ids) == 1000
    assert all(i.startswith("20260101T000000Z-") and len(i) == len("20260101T000000Z-") + 8 for i in ids)
    assert max(ids) < new_run_id(now=SECOND + 1)  # a later second sorts after every id of this one
    assert new_run_id("soak-", now=SECOND).startswith("soak-20260101T000000Z-")


def test_the_default_folders_of_two_runs_started_at_once_differ() -> None:
    first, second = run_cmd._default_out(), run_cmd._default_out()
    assert first != second and first.parent == second.parent == Path("reports")


def test_a_second_owner_is_refused_naming_the_first(tmp_path: Path) -> None:
    with own(tmp_path, ["burnin", "run", "--sim", "4"]) as held:
        record = json.loads((tmp_path / LOCK_FILE).read_text())
        assert record["pid"] == os.getpid() and record["command"] == "burnin run --sim 4"
        assert record["host"] and record["started"] <= time.time()
        with pytest.raises(FolderInUse) as refused:
            own(tmp_path, ["burnin", "soak"], flag="--resume")
        message = str(refused.value)
        assert message.startswith(f"--resume {tmp_path} is in use by pid {os.getpid()} on ")
        assert " since 20" in message and "(burnin run --sim 4)" in message and "\n" not in message
        assert isinstance(refused.value, UsageError)  # exit 2
        assert json.loads((tmp_path / LOCK_FILE).read_text()) == record  # the refused one wrote nothing
        assert held.held
    assert not held.held and not (tmp_path / LOCK_FILE).exists()  # released and removed
    with own(tmp_path, ["burnin", "soak"]):  # free again
        assert json.loads((tmp_path / LOCK_FILE).read_text())["command"] == "burnin soak"
    held.release()  # twice is harmless


def test_an_argument_folder_is_named_without_a_flag(tmp_path: Path) -> None:
    with own(tmp_path, ["burnin", "run"]), pytest.raises(FolderInUse, match=f"^{tmp_path} is in use by pid "):
        own(tmp_path, ["burnin", "report"], flag="")


HOLD = """
import sys
from pathlib import Path
from burnin.outdir import own
held = own(Path(sys.argv[1]), ["burnin", "soak", "--sim", "2"])
print("held", flush=True)
sys.stdin.readline()
"""


@pytest.mark.proc
def test_the_kernel_releases_the_folder_when_its_owner_dies(tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(FolderInUse, match=rf"pid {holder.pid} on .*\(burnin soak --sim 2\)"):
            own(tmp_path, ["burnin", "soak", "--resume"])
        os.kill(holder.pid, signal.SIGKILL)  # no release, no clean-up: the lock file stays
        holder.wait(timeout=60)
        assert (tmp_path / LOCK_FILE).exists()
        with own(tmp_path, ["burnin", "soak", "--resume"]):
            assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == os.getpid()
    finally:
        holder.kill()
        holder.communicate(timeout=60)


def test_an_owner_that_has_not_said_who_it_is_is_still_an_owner(tmp_path: Path) -> None:
    with own(tmp_path, ["burnin", "run"]):
        (tmp_path / LOCK_FILE).write_text("")  # as between its lock and its record
        with pytest.raises(FolderInUse, match="in use by another burnin process"):
            own(tmp_path, ["burnin", "run"])


def test_a_folder_that_cannot_hold_a_lock_file_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / LOCK_FILE).mkdir()
    with pytest.raises(UsageError, match=f"^--out {tmp_path}: cannot write there"):
        own(tmp_path, ["burnin", "run"])
    with pytest.raises(UsageError, match=f"^--out {tmp_path / 'gone'}: cannot write there"):
        own(tmp_path / "gone", ["burnin", "run"])


@pytest.mark.parametrize("text", ["", "{", "[]", "null", '"x"', '{"pid": "7"}'])
def test_a_lock_file_that_is_not_a_record_names_no_holder_or_a_partial_one(text: str) -> None:
    holder = Holder.from_text(text)
    assert holder is None or (holder.pid is None and holder.host == "?")


def test_a_holder_is_one_printable_line_with_its_command_cut() -> None:
    long = "burnin run " + "x" * 500
    line = Holder(pid=42, host="node\x1b7", started=SECOND, command=long + "\nmore").describe()
    assert line.startswith("pid 42 on node") and "since 2026-01-01T00:00:00Z (burnin run xxx" in line
    assert "\x1b" not in line and "\n" not in line and line.endswith("...)")
    assert len(line) < COMMAND_CHARS + 80
    assert Holder(pid=None, host="?", started=None, command="").describe() == "pid ? on ?"
    exact = "c" * COMMAND_CHARS
    assert Holder(pid=1, host="h", started=None, command=exact).describe() == f"pid 1 on h ({exact})"


def test_a_lock_file_removed_or_replaced_is_not_the_one_held(tmp_path: Path) -> None:
    path = tmp_path / LOCK_FILE
    path.write_text("")
    fd = os.open(path, os.O_RDONLY)
    try:
        assert _same_file(fd, path)
        path.unlink()
        assert not _same_file(fd, path)
        path.write_text("")  # a new file by the same name: another owner's
        assert not _same_file(fd, path)
    finally:
        os.close(fd)
