"""Pytest sessions that the tests start keep their temporary folders inside this worker's own tree (conftest.py
``nested_pytest_temproot``), never in the machine's shared ``pytest-of-USER`` folder, whose cleanup deletes
other runs' trees."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.proc
def test_a_nested_session_makes_its_temporary_folders_in_this_workers_tree(tmp_path: Path,
                                                                          nested_pytest_temproot: Path) -> None:
    (tmp_path / "test_where.py").write_text(
        "def test_where(tmp_path):\n    print('TMP=' + str(tmp_path))\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "-p", "no:xdist",
                           str(tmp_path / "test_where.py")], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    where = Path(next(line[4:] for line in proc.stdout.splitlines() if line.startswith("TMP=")))
    assert where.resolve().is_relative_to(nested_pytest_temproot.resolve()), (where, nested_pytest_temproot)
    assert os.environ["PYTEST_DEBUG_TEMPROOT"] == str(nested_pytest_temproot)


def test_this_sessions_own_folders_stay_where_they_were(tmp_path: Path, nested_pytest_temproot: Path,
                                                        tmp_path_factory: pytest.TempPathFactory) -> None:
    basetemp = tmp_path_factory.getbasetemp()
    assert nested_pytest_temproot.parent == basetemp
    assert tmp_path.parent == basetemp and not tmp_path.is_relative_to(nested_pytest_temproot)


def test_the_temporary_trees_are_on_tmpfs_when_the_machine_has_room(tmp_path: Path, user_tmpdir: str | None) -> None:
    """conftest.py puts pytest's tree and TMPDIR on /dev/shm when it has 4 GiB free (a disk costs tens of times
    the kernel time for the racks' small files)."""
    import tempfile

    from tmpfs_root import TMPFS_ROOM_NEEDED, TMPFS_ROOT, tmpfs_temproot

    root = tmpfs_temproot()
    if root is None:
        pytest.skip(f"{TMPFS_ROOT} is missing, not writable or has under {TMPFS_ROOM_NEEDED >> 30} GiB free")
    assert root == TMPFS_ROOT
    assert tmp_path.resolve().is_relative_to(Path(root).resolve())
    if user_tmpdir is None:  # a TMPDIR the user set is theirs
        assert Path(tempfile.gettempdir()).resolve().is_relative_to(Path(root).resolve())


def test_a_root_without_room_or_not_there_is_not_used(tmp_path: Path) -> None:
    from tmpfs_root import tmpfs_temproot

    assert tmpfs_temproot(str(tmp_path), needed=1) == str(tmp_path)
    assert tmpfs_temproot(str(tmp_path), needed=1 << 62) is None
    assert tmpfs_temproot(str(tmp_path / "missing"), needed=1) is None
