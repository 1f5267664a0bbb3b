"""The exit-status contract of every command: 2 is a user mistake (one line), 3 an internal error.

Exit 1 means "a node was rejected", so a crash must never exit 1, and a typo
must be caught before any node is touched.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest


def burnin(*args: str, tmp: Path, driver: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, TMPDIR=str(tmp))
    command = [sys.executable, "-c", driver, *args] if driver else [sys.executable, "-m", "burnin.cli.main", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=600, check=False, env=env, cwd=tmp)


def _one_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1", "0", "1e99", "soon"])
def test_timeout_must_be_finite_and_positive(tmp_path: Path, value: str) -> None:
    proc = burnin("run", "--sim", "2", f"--timeout={value}", tmp=tmp_path)
    assert proc.returncode == 2
    assert "--timeout" in _one_line(proc)


def test_probe_timeout_is_checked_too(tmp_path: Path) -> None:
    proc = burnin("probe", "--timeout", "nan", tmp=tmp_path)
    assert proc.returncode == 2 and "--timeout" in _one_line(proc)


def test_a_bad_k_expression_is_a_usage_error_before_gathering(tmp_path: Path) -> None:
    proc = burnin("run", "--sim", "2", "-k", "bad(((", "--out", str(tmp_path / "out"), tmp=tmp_path)
    assert proc.returncode == 2
    assert _one_line(proc).startswith("burnin run: -k 'bad((('")
    assert not (tmp_path / "out").exists()  # refused before any node was gathered


@pytest.mark.parametrize("flags", [["--fabric-config", "FILE"], ["--localize"]])
def test_fabric_flags_without_the_fabric_suite_are_usage_errors(tmp_path: Path, flags: list[str]) -> None:
    config = tmp_path / "fabric.yaml"
    config.write_text("{}\n")
    args = [str(config) if f == "FILE" else f for f in flags]
    proc = burnin("run", "--sim", "2", *args, tmp=tmp_path)
    assert proc.returncode == 2
    assert f"{flags[0]} applies to the fabric suite only" in _one_line(proc)


def test_a_missing_fabric_config_is_a_usage_error(tmp_path: Path) -> None:
    proc = burnin("run", "--sim", "2", "--suite", "fabric", "--fabric-config", str(tmp_path / "nope.yaml"),
                  tmp=tmp_path)
    assert proc.returncode == 2 and "no such file" in _one_line(proc)


def test_out_naming_a_file_is_a_usage_error(tmp_path: Path) -> None:
    target = tmp_path / "a-file"
    target.write_text("keep me\n")
    proc = burnin("run", "--sim", "2", "--out", str(target), tmp=tmp_path)
    assert proc.returncode == 2
    assert "exists and is not a folder" in _one_line(proc)
    assert target.read_text() == "keep me\n"


def test_out_in_an_unwritable_place_is_a_usage_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    proc = burnin("run", "--sim", "2", "--out", str(blocker / "sub"), tmp=tmp_path)
    assert proc.returncode == 2
    assert "cannot write there" in _one_line(proc)


def test_argparse_errors_are_one_line_exit_2(tmp_path: Path) -> None:
    proc = burnin("run", "--sim", "two", tmp=tmp_path)
    assert proc.returncode == 2 and "--sim" in _one_line(proc)
    proc = burnin("no-such-command", tmp=tmp_path)
    assert proc.returncode == 2 and "no-such-command" in _one_line(proc)


# Runs the real console entry point with one command made to raise, as a bug would.
CRASH_DRIVER = """
import sys
import burnin.cli.faults_cmd as faults_cmd

kind = sys.argv.pop(1)

def run(args):
    if kind == "memory":
        raise MemoryError()
    raise RuntimeError("boom\\x1b[31m in\\nthe parser")

faults_cmd.run = run
from burnin.cli.main import main
sys.exit(main())
"""

CRASH_LINE = re.compile(r"^burnin faults: internal error: (?P<what>.+) \(details: (?P<path>/\S+)\)$")


def test_an_unexpected_exception_is_exit_3_one_line_and_a_crash_file(tmp_path: Path) -> None:
    proc = burnin("runtime", "faults", tmp=tmp_path, driver=CRASH_DRIVER)
    assert proc.returncode == 3
    match = CRASH_LINE.match(_one_line(proc))
    assert match, proc.stderr
    assert match["what"] == "RuntimeError: boom\\x1b[31m in the parser"  # escaped, on one line
    crash = Path(match["path"])
    assert crash.parent == tmp_path  # $TMPDIR
    details = crash.read_text()
    assert "Traceback (most recent call last)" in details and "RuntimeError: boom" in details


def test_debug_prints_the_traceback_instead(tmp_path: Path) -> None:
    proc = burnin("runtime", "faults", "--debug", tmp=tmp_path, driver=CRASH_DRIVER)
    assert proc.returncode == 3
    assert "Traceback (most recent call last)" in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("burnin faults: internal error: RuntimeError: boom")
    assert list(tmp_path.glob("burnin-crash-*")) == []
    proc = burnin("runtime", "--debug", "faults", tmp=tmp_path, driver=CRASH_DRIVER)  # before the verb too
    assert proc.returncode == 3 and "Traceback" in proc.stderr


def test_out_of_memory_is_exit_3_one_line(tmp_path: Path) -> None:
    proc = burnin("memory", "faults", tmp=tmp_path, driver=CRASH_DRIVER)
    assert proc.returncode == 3
    line = _one_line(proc)
    assert line.startswith("burnin faults: internal error: MemoryError"), line


def test_an_unreadable_lab_file_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "lab.json").write_bytes(b"\xff\xfe{ not json")
    proc = burnin("sim", "down", "--state", str(tmp_path), tmp=tmp_path)
    assert proc.returncode == 2
    assert "lab.json: cannot read it" in _one_line(proc)


def test_a_reader_that_goes_away_does_not_change_the_verdict(tmp_path: Path) -> None:
    """`burnin run ... | head -1`: the summary stops, the gate and the exit status stay the run's."""
    proc = subprocess.Popen([sys.executable, "-m", "burnin.cli.main", "run", "--sim", "2", "--fault", "sim01:pcie-x8",
                             "--out", str(tmp_path / "out")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "TMPDIR": str(tmp_path)})
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # as head does after its line
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 1, stderr
    assert first.startswith(b"burnin: 2 nodes")
    assert stderr == ""
    assert (tmp_path / "out" / "gate.json").exists()


def test_a_reader_that_goes_away_is_no_crash(tmp_path: Path) -> None:
    """`burnin faults --json | head -1`: the closed pipe stops the command (exit 3: it did not finish), with
    no crash report and no line on stderr (the reader chose to stop)."""
    env = dict(os.environ, TMPDIR=str(tmp_path))
    proc = subprocess.Popen([sys.executable, "-m", "burnin.cli.main", "faults", "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=tmp_path)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # before the first write: every write fails with EPIPE
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=600) == 3, stderr
    assert stderr == ""
    assert not list(tmp_path.glob("burnin-crash-*"))


TEARDOWN_DRIVER = """
import atexit, sys
atexit.register(lambda: print("TEARDOWN", flush=True))
from burnin.cli.main import main
sys.exit(main())
"""


@pytest.mark.parametrize(("args", "status"), [(["faults", "--json"], 0), (["run", "--sim", "0"], 2)])
def test_the_console_script_ends_without_the_interpreters_teardown(tmp_path: Path, args: list[str],
                                                                    status: int) -> None:
    """Run as the console script, a command that wrote everything exits at once with its status (an exit
    handler never runs): the teardown of what a judging run loaded costs ~0.1 s of CPU and nothing else."""
    proc = burnin(*args, tmp=tmp_path, driver=TEARDOWN_DRIVER)
    assert proc.returncode == status, proc.stderr
    assert "TEARDOWN" not in proc.stdout
    if status == 0:
        assert json.loads(proc.stdout)  # the whole document, flushed before the exit
    else:
        assert _one_line(proc).startswith("burnin run: ")


def test_called_with_arguments_main_returns_its_status() -> None:
    """In a process of its own (a test, an embedding program), main(argv) returns; only the console script exits."""
    from burnin.cli.main import main

    assert main(["run", "--sim", "0"]) == 2
