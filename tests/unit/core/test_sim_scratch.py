"""A killed run's rack is removed by the next run (burnin.dispatch.sim.remove_abandoned)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from burnin.dispatch.sim import SCRATCH_PREFIX, remove_abandoned


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid  # reaped: no process has it (until the kernel hands it out again)


@pytest.mark.proc  # starts processes to get dead pids
def test_only_the_folders_of_dead_processes_go(tmp_path: Path) -> None:
    dead = tmp_path / f"{SCRATCH_PREFIX}{_dead_pid()}-abc"
    (dead / "nodes" / "sim01").mkdir(parents=True)
    (dead / "nodes" / "sim01" / "file").write_text("x")
    alive = tmp_path / f"{SCRATCH_PREFIX}{os.getpid()}-def"
    alive.mkdir()
    others = [tmp_path / f"{SCRATCH_PREFIX}tests-ghi", tmp_path / "unrelated-1-x", tmp_path / f"{SCRATCH_PREFIX}mpi"]
    for folder in others:
        folder.mkdir()
    a_file = tmp_path / f"{SCRATCH_PREFIX}{_dead_pid()}-file"
    a_file.write_text("not a folder")
    assert remove_abandoned(tmp_path) == [dead]
    assert not dead.exists()
    assert alive.is_dir() and all(f.is_dir() for f in others) and a_file.is_file()


def test_a_base_that_cannot_be_read_removes_nothing(tmp_path: Path) -> None:
    assert remove_abandoned(tmp_path / "missing") == []
