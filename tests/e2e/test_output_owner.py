"""One output folder has one owner (issue 19, cases 1 and 5).

Two runs or soaks writing one folder mixed their verdicts: a faulted run printed
``admitted: sim[01-04]``, a second soak crashed or rejected healthy nodes. Now
run ids never collide, and a second run, soak, ``--resume`` or ``burnin report``
on a folder whose owner is alive is refused (exit 2, one line naming the owner)
without touching it.

No test relies on two processes starting in the same second: the first process
runs under a driver that stops it at a named point (after it took its folder,
or after its first checkpoint) and says so on stdout; the second starts only
then, and the first goes on when the test writes a line to its stdin.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

LOCK_FILE = ".burnin.lock"  # the owner's lock, in the folder it owns (docs: --out)
PAUSED = "burnin-test: paused"
PAUSE_DRIVER = f"""
import importlib, os, sys
module, _, path = os.environ["BURNIN_TEST_PAUSE_AT"].partition(":")
owner = importlib.import_module(module)
*parents, name = path.split(".")
for part in parents:
    owner = getattr(owner, part)
real = getattr(owner, name)
paused = []

def pause(*args, **kwargs):
    result = real(*args, **kwargs)
    if not paused:
        paused.append(True)
        print({PAUSED!r}, flush=True)
        sys.stdin.readline()
    return result

setattr(owner, name, pause)
from burnin.cli.main import main
sys.exit(main(sys.argv[1:]))
"""
SAME_SECOND_DRIVER = """
import sys, time
real_gmtime = time.gmtime
time.gmtime = lambda seconds=None: real_gmtime(1767225600)  # every run starts in 2026-01-01T00:00:00Z
from burnin.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def burnin(*args: str, cwd: Path, driver: str | None = None) -> subprocess.CompletedProcess[str]:
    head = ["-c", driver] if driver else ["-m", "burnin.cli.main"]
    return subprocess.run([sys.executable, *head, *args], capture_output=True, text=True, timeout=600,
                          check=False, cwd=cwd, env=dict(os.environ, TMPDIR=str(cwd)))


class Paused:
    """A burnin command stopped at ``at`` (``module:attribute``) once it has returned there for the first time."""

    def __init__(self, at: str, *args: str, cwd: Path) -> None:
        env = dict(os.environ, TMPDIR=str(cwd), BURNIN_TEST_PAUSE_AT=at)
        self.proc = subprocess.Popen([sys.executable, "-c", PAUSE_DRIVER, *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd, env=env)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # the event: it reached the point (or it ended: EOF)
        if line.strip() != PAUSED:
            self.proc.kill()
            _, err = self.proc.communicate(timeout=60)
            raise AssertionError(f"never reached {at}: {line!r} {err[-3000:]}")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def finish(self) -> subprocess.CompletedProcess[str]:
        out, err = self.proc.communicate("go\n", timeout=600)
        return subprocess.CompletedProcess(self.proc.args, self.proc.returncode, out, err)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate(timeout=60)


def gate(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "gate.json").read_text())
    return data


def refusal(proc: subprocess.CompletedProcess[str], holder: Paused) -> str:
    """The one line that refused ``proc``: exit 2, naming the living owner."""
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "is in use by" in lines[0] and f"pid {holder.pid} on " in lines[0], lines[0]
    return lines[0]


FAULTED_RUN = ["run", "--sim", "4", "--fault", "sim02:nvlink-down"]


def test_a_second_run_or_report_on_a_folder_in_use_is_refused_naming_its_owner(tmp_path: Path) -> None:
    """Case 1 with one --out: the faulted run keeps its verdicts, the healthy run is refused."""
    out = tmp_path / "out"
    first = Paused("burnin.cli.run_cmd:_prepare_out", *FAULTED_RUN, "--out", str(out), cwd=tmp_path)
    try:
        second = burnin("run", "--sim", "4", "--out", str(out), cwd=tmp_path)
        line = refusal(second, first)
        assert line.startswith(f"burnin run: --out {out} is in use by ")
        assert "(burnin run --sim 4 --fault sim02:nvlink-down --out " in line  # the owner's command
        report = burnin("report", str(out), cwd=tmp_path)  # would render a folder being written
        assert refusal(report, first).startswith(f"burnin report: {out} is in use by ")
        held = json.loads((out / LOCK_FILE).read_text())
        assert held["pid"] == first.pid and held["command"].startswith("burnin run --sim 4 --fault")
        assert not (out / "gate.json").exists() and not (out / "report.html").exists()  # untouched
        done = first.finish()
    finally:
        first.kill()
    assert done.returncode == 1, done.stderr[-3000:]
    doc = gate(out)
    assert doc["admitted"] == "sim[01,03-04]" and doc["rejected"] == "sim02"
    assert doc["nodes"]["sim02"]["failed"] == ["GPU-10"]
    assert "admitted: sim[01,03-04] (3)" in done.stdout
    assert not (out / LOCK_FILE).exists()  # released with the run
    again = burnin("report", str(out), cwd=tmp_path)  # a folder nobody owns any more is free
    assert again.returncode == 0 and again.stdout.startswith("report: "), again.stderr
    assert not (out / LOCK_FILE).exists()


def test_two_runs_started_in_the_same_second_get_two_folders(tmp_path: Path) -> None:
    """Case 1 without --out: the default folder of two runs started at once differ."""
    for _ in range(2):
        proc = burnin("run", "--sim", "2", cwd=tmp_path, driver=SAME_SECOND_DRIVER)
        assert proc.returncode == 0, proc.stderr[-3000:]
    folders = sorted((tmp_path / "reports").iterdir())
    assert len(folders) == 2, folders
    for folder in folders:
        assert folder.name.startswith("20260101T000000Z-")  # still sorted by time
        assert gate(folder)["admitted"] == "sim[01-02]"
        assert not (folder / LOCK_FILE).exists()


def test_a_run_that_stops_before_writing_leaves_no_folder_and_no_lock(tmp_path: Path) -> None:
    proc = burnin("run", "--sim", "2", "--fault", "sim09:nvlink-down", "--out", str(tmp_path / "new" / "out"),
                  cwd=tmp_path)
    assert proc.returncode == 2 and "no simulated node 'sim09'" in proc.stderr, proc.stderr
    assert not (tmp_path / "new").exists()  # the folders it made, its lock file with them


SOAK = ["soak", "--sim", "2", "--duration", "4h", "--interval", "1800", "--fault", "sim02:xid-at:100:79"]


def _soaked_right(proc: subprocess.CompletedProcess[str], out: Path) -> None:
    """The soak's own verdicts: the healthy node admitted, the faulted one rejected for its Xid."""
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-3000:]
    doc = gate(out)
    assert doc["admitted"] == "sim01" and doc["rejected"] == "sim02", doc
    assert doc["nodes"]["sim02"]["failed"] == ["GPU-04"]
    assert not (out / LOCK_FILE).exists()


def test_resume_of_a_soak_that_still_runs_is_refused(tmp_path: Path) -> None:
    """Case 5: ``--resume D`` while the first soak runs (it stops after its first checkpoint)."""
    out = tmp_path / "soak"
    first = Paused("burnin.soak.state:Store.save", *SOAK, "--out", str(out), cwd=tmp_path)
    try:
        assert (out / "soak-state.json").is_file()
        second = burnin("soak", "--resume", str(out), cwd=tmp_path)
        assert refusal(second, first).startswith(f"burnin soak: --resume {out} is in use by ")
        done = first.finish()
    finally:
        first.kill()
    _soaked_right(done, out)


def test_two_fresh_soaks_on_one_out_leave_one_owner(tmp_path: Path) -> None:
    """Case 5: a second fresh soak on the first's --out is refused before it builds any node."""
    out = tmp_path / "soak"
    first = Paused("burnin.cli.soak_cmd:_prepare_out", *SOAK, "--out", str(out), cwd=tmp_path)
    try:
        second = burnin(*SOAK, "--out", str(out), cwd=tmp_path)
        assert refusal(second, first).startswith(f"burnin soak: --out {out} is in use by ")
        assert sorted(p.name for p in out.iterdir()) == [LOCK_FILE]  # nothing of the second's
        done = first.finish()
    finally:
        first.kill()
    _soaked_right(done, out)
    assert not [p for p in out.rglob("*") if ".new-" in p.name or ".sync-" in p.name]  # no half-built rack
