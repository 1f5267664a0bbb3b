"""The history database end to end: `burnin run` on simulated racks records as it judges.

Two nightly runs of a rack, the second with faults on sim04 and sim06: `burnin diff` names exactly those two
nodes with their checks, and `burnin history sim04` shows both runs. A run killed with SIGKILL while judging
leaves the verdicts of the nodes it judged, its run marked incomplete. A history that cannot be used costs the
run nothing but one warning line: gate.json and the reports are written as ever.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

BLOCKING_SUITE = '''
import os
import time
from pathlib import Path

import pytest


@pytest.mark.check("SITE-01")
def test_hangs_on_sim03(node):
    if node == "sim03":
        Path(os.environ["HANG_STARTED"]).touch()
        while True:  # until the run is killed
            time.sleep(0.05)
'''


def burnin(*args: str, history: Path, **popen: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BURNIN_HISTORY": str(history)}
    return subprocess.run([sys.executable, "-m", "burnin.cli.main", *args], capture_output=True, text=True,
                          timeout=600, check=False, env=env)


@pytest.fixture(scope="module")
def two_nights(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    base = tmp_path_factory.mktemp("nights")
    history, first, second = base / "state" / "history.sqlite", base / "night1", base / "night2"
    healthy = burnin("run", "--sim", "8", "--out", str(first), history=history)
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    faulty = burnin("run", "--sim", "8", "--fault", "sim04:nvlink-down", "--fault", "sim06:ib-rate-200",
                    "--out", str(second), history=history)
    assert faulty.returncode == 1, faulty.stdout + faulty.stderr
    assert faulty.stderr == ""
    return history, first, second


def test_diff_names_exactly_the_two_faulted_nodes_with_their_checks(two_nights: tuple[Path, Path, Path]) -> None:
    history, _, _ = two_nights
    proc = burnin("diff", history=history)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert re.fullmatch(r"burnin diff: run 1 \(.*\) -> run 2 \(.*\), 8 nodes in both", lines[0])
    named = set(re.findall(r"\bsim\d\d\b", "\n".join(lines[1:])))
    assert named == {"sim04", "sim06"}, proc.stdout
    assert "newly failing sim04: GPU-10" in lines and "newly failing sim06: IB-02" in lines
    assert "    GPU-10 gpu3 17/18 NVLink links active (down: 7) (expected 18 links active per GPU)" in lines
    assert "moved sim06 IB-02 400 -> 200 Gb/s (-50.0%)" in lines
    as_json = json.loads(burnin("diff", "--json", history=history).stdout)
    assert sorted(as_json["newly_failing"]) == ["sim04", "sim06"] and as_json["newly_admitted"] == []


def test_the_node_history_shows_both_runs(two_nights: tuple[Path, Path, Path]) -> None:
    history, first, second = two_nights
    proc = burnin("history", "sim04", history=history)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("burnin history sim04: 2 runs (1 not admitted), 0 gate actions")
    assert re.fullmatch(rf"\S+Z  run 1 +admitted  {first}", lines[1])
    assert re.fullmatch(rf"\S+Z  run 2 +rejected: failed GPU-10  {second}", lines[2])
    assert lines[3] == "    GPU-10 gpu3 17/18 NVLink links active (down: 7) (expected 18 links active per GPU)"
    check = burnin("history", "--check", "IB-02", history=history)
    assert "sim06: 1 failed, 0 incomplete" in check.stdout and "sim04" not in check.stdout


def test_a_run_killed_while_judging_leaves_its_verdicts_so_far_marked_incomplete(tmp_path: Path) -> None:
    suite = tmp_path / "site"
    suite.mkdir()
    (suite / "test_hang.py").write_text(BLOCKING_SUITE, encoding="utf-8")
    history, started = tmp_path / "history.sqlite", tmp_path / "hang-started"
    env = {**os.environ, "BURNIN_HISTORY": str(history), "HANG_STARTED": str(started)}
    run = subprocess.Popen([sys.executable, "-m", "burnin.cli.main", "run", "--sim", "4", "--suite", "node",
                            "--suite", str(suite), "--out", str(tmp_path / "out")],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    try:
        while not started.exists():  # sim03's hanging test has begun: sim01 and sim02 are judged
            assert run.poll() is None, f"the run ended (exit {run.returncode}) before its hanging test"
            try:
                run.wait(timeout=0.1)
            except subprocess.TimeoutExpired:
                pass
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait(timeout=60)
    db = sqlite3.connect(history)
    assert db.execute("SELECT finished FROM runs").fetchall() == [(None,)]
    judged = dict(db.execute("SELECT n.name, count(*) FROM verdicts v JOIN node_names n ON n.id = v.node "
                             "GROUP BY n.name").fetchall())
    db.close()
    # sim01 and sim02 whole; sim04 never begun; of sim03, what the recorder's timed flush (every FLUSH_S, for a
    # node whose checks outlast it on a loaded machine) saved before its hanging test, never its SITE-01 row
    assert {"sim01", "sim02"} <= set(judged) <= {"sim01", "sim02", "sim03"}
    assert judged["sim01"] == judged["sim02"] > 40 and judged.get("sim03", 0) < judged["sim01"]
    assert not (tmp_path / "out" / "gate.json").exists()
    proc = burnin("history", "sim02", history=history)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"run 1 +incomplete: incomplete RUN-END \[run incomplete \(never ended: killed\?\)\]",
                     proc.stdout), proc.stdout


def test_a_history_that_cannot_be_used_costs_the_run_one_warning_line(tmp_path: Path) -> None:
    garbage = tmp_path / "history.sqlite"
    garbage.write_bytes(b"this is no database\n" * 200)
    proc = burnin("run", "--sim", "2", "--out", str(tmp_path / "out"), history=garbage)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(f"burnin: history: not recorded: history {garbage}: cannot be used (")
    assert json.loads((tmp_path / "out" / "gate.json").read_text(encoding="utf-8"))["admitted"] == "sim[01-02]"
    assert (tmp_path / "out" / "junit.xml").exists() and (tmp_path / "out" / "report.html").exists()
    assert garbage.read_bytes() == b"this is no database\n" * 200
