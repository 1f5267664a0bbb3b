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
