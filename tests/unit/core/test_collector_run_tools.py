"""The collector's tools run side by side without a thread each (burnin.collector.commands.run_tools).

Each tool here is a small shell script on a PATH of the test's own: what it printed, how it ended, that
they overlapped, that no more than ``at_once`` ran, that one past the time is killed and one whose turn
came after it is not started, and that a tool with more to say than a pipe holds is read whole.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from burnin.collector.commands import run_tool, run_tools

pytestmark = pytest.mark.proc

WAIT_S = 60.0


def _tool(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")
    return folder


def test_records_in_the_jobs_order_with_output_and_status(bin_dir: Path) -> None:
    _tool(bin_dir, "good", 'echo "out $*"; echo err >&2')
    _tool(bin_dir, "bad", "echo half; exit 3")
    records = run_tools({"b": ["bad"], "g": ["good", "-x"], "none": ["no-such-tool"]}, WAIT_S)
    assert list(records) == ["b", "g", "none"]
    assert records["g"] == {"argv": ["good", "-x"], "exit_status": 0, "stdout": "out -x\n", "stderr": "err\n",
                            "error": None}
    assert records["b"]["exit_status"] == 3 and records["b"]["stdout"] == "half\n"
    assert records["none"]["error"] == "no-such-tool: command not found"
    assert records["g"] == run_tool(["good", "-x"], WAIT_S)  # one tool alone: the same record


def test_tools_run_side_by_side_but_never_more_than_at_once(bin_dir: Path, tmp_path: Path) -> None:
    """Each tool marks itself started and waits for the release: two are seen waiting together, never a third."""
    runs, release = tmp_path / "runs", tmp_path / "release"
    runs.mkdir()
    _tool(bin_dir, "wait", f'touch "{runs}/$1"; while [ ! -e "{release}" ]; do sleep 0.05; done; echo "$1"')
    records: dict[str, dict[str, object]] = {}
    worker = threading.Thread(target=lambda: records.update(
        run_tools({f"t{i}": ["wait", str(i)] for i in range(4)}, WAIT_S, at_once=2)))
    worker.start()
    try:
        deadline = time.monotonic() + WAIT_S
        while len(list(runs.iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert sorted(path.name for path in runs.iterdir()) == ["0", "1"]  # side by side, and no third
    finally:
        release.touch()
        worker.join()
    assert [(r["exit_status"], r["stdout"]) for r in records.values()] == [(0, f"{i}\n") for i in range(4)]


def test_one_past_the_time_is_killed_and_one_whose_turn_came_after_is_not_run(bin_dir: Path) -> None:
    _tool(bin_dir, "hang", "echo partial; exec sleep 600")
    _tool(bin_dir, "later", "echo later")
    records = run_tools({"hang": ["hang"], "later": ["later"]}, 1.0, at_once=1)
    assert records["hang"]["error"] == "hang timed out after 1 s" and records["hang"]["exit_status"] is None
    assert records["hang"]["stdout"] in ("", "partial\n")  # what it printed before it was killed, if it got to
    assert records["later"]["exit_status"] is None
    assert records["later"]["error"] == "later not run: the 1 s its tools had were spent"


def test_a_tool_with_more_than_a_pipe_holds_is_read_whole(bin_dir: Path) -> None:
    """Started before its turn, it blocks on its full pipe until read; then it ends."""
    _tool(bin_dir, "chatty", "head -c 300000 /dev/zero | tr '\\0' x")
    _tool(bin_dir, "first", "sleep 0.2; echo first")
    records = run_tools({"first": ["first"], "chatty": ["chatty"]}, WAIT_S)
    assert records["first"]["stdout"] == "first\n"
    assert records["chatty"]["exit_status"] == 0 and len(records["chatty"]["stdout"]) == 300_000


def _marked(mark: str) -> list[int]:
    """Every process whose environment holds ``mark``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if mark.encode() in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_no_tool_is_left_running(bin_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mark = f"BURNIN_TEST_TOOL={tmp_path}"
    monkeypatch.setenv("BURNIN_TEST_TOOL", str(tmp_path))  # the tools inherit it
    _tool(bin_dir, "hang", "exec sleep 600")
    records = run_tools({"a": ["hang"], "b": ["hang"]}, 0.5)
    assert records["a"]["error"] == "hang timed out after 0.5 s", records
    assert _marked(mark) == []


def test_an_interruption_takes_every_running_tool_with_it(bin_dir: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A signal's exception while the first tool is read: the others, started beside it, are killed too."""
    from burnin.collector import commands

    mark = f"BURNIN_TEST_TOOL={tmp_path}"
    monkeypatch.setenv("BURNIN_TEST_TOOL", str(tmp_path))
    _tool(bin_dir, "hang", "exec sleep 600")

    def interrupted(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(commands, "_finish", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_tools({"a": ["hang"], "gone": ["no-such-tool"], "b": ["hang"], "c": ["hang"]}, WAIT_S)
    assert _marked(mark) == []
