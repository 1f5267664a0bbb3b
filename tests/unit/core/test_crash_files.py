"""Crash files: one per internal error, the newest 20 of this user kept in the temporary folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from burnin.cli.crash import CRASH_PREFIX, KEEP_CRASH_FILES, prune_crash_files, write_crash_file


def _old_crash_files(folder: Path, count: int) -> list[Path]:
    paths = []
    for i in range(count):
        path = folder / f"{CRASH_PREFIX}old{i:02d}.txt"
        path.write_text("old\n")
        os.utime(path, (1_000_000 + i, 1_000_000 + i))
        paths.append(path)
    return paths


def test_a_new_crash_file_keeps_only_the_newest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    old = _old_crash_files(tmp_path, 30)
    other = tmp_path / "unrelated.txt"
    other.write_text("x")
    path = write_crash_file("burnin run", RuntimeError("boom"))
    assert path is not None and Path(path).parent == tmp_path
    assert "RuntimeError: boom" in Path(path).read_text()
    left = sorted(p.name for p in tmp_path.glob(f"{CRASH_PREFIX}*.txt"))
    assert len(left) == KEEP_CRASH_FILES and Path(path).name in left
    assert [p.name for p in old[-(KEEP_CRASH_FILES - 1):]] == sorted(n for n in left if "old" in n)
    assert other.exists()


def test_pruning_touches_nothing_but_crash_files(tmp_path: Path) -> None:
    _old_crash_files(tmp_path, 3)
    (tmp_path / f"{CRASH_PREFIX}dir.txt").mkdir()
    (tmp_path / f"{CRASH_PREFIX}x.log").write_text("not a crash file")
    assert prune_crash_files(str(tmp_path), keep=1) == [str(tmp_path / f"{CRASH_PREFIX}old01.txt"),
                                                         str(tmp_path / f"{CRASH_PREFIX}old00.txt")]
    assert (tmp_path / f"{CRASH_PREFIX}dir.txt").is_dir() and (tmp_path / f"{CRASH_PREFIX}x.log").exists()
