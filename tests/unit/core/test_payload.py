"""The collector payload runs on a bare python3, from stdin or as a zipapp file."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from burnin.transport.payload import collector_zipapp, stdin_argv, stdin_command


def _bare_python() -> str:
    for candidate in ("/usr/bin/python3", shutil.which("python3")):
        if candidate and Path(candidate).exists():
            return candidate
    pytest.skip("no python3")


@pytest.mark.proc
def test_runs_from_stdin_and_writes_nothing(tmp_path: Path) -> None:
    argv = stdin_argv(_bare_python(), ("--sources", "numa,kernel", "--root", str(tmp_path)))
    proc = subprocess.run(argv, input=collector_zipapp(), capture_output=True, cwd=tmp_path, timeout=60,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    facts = json.loads(proc.stdout)
    assert set(facts["sources"]) == {"numa", "kernel"}
    assert list(tmp_path.iterdir()) == []


@pytest.mark.proc
def test_runs_as_a_zipapp_file(tmp_path: Path) -> None:
    path = tmp_path / "collector.pyz"
    path.write_bytes(collector_zipapp())
    proc = subprocess.run([_bare_python(), str(path), "--sources", "numa"], capture_output=True, timeout=60,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["sources"]["numa"]["ok"]


def test_payload_is_deterministic_and_shell_safe() -> None:
    assert collector_zipapp() == collector_zipapp()
    command = stdin_command(args=("--sources", "all"))
    assert command.startswith("python3 -c '") and command.endswith(" --sources all")
