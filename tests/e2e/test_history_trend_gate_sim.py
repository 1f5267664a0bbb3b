"""`burnin run --fail-on-trend`: a simulated rack whose history shows sim01's IB rate falling night after night.

By default the trend is only reported and the node is admitted; with the site's limit the run fails sim01 for
IB-02 with a reason naming the node, the check, the series and the limit, and the Slurm gate would drain it with
that reason; without a history the option judges nothing and says so in one line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from burnin.gate.decide import NodeDecision
from burnin.gate.slurm import SlurmNode, plan
from burnin.history.store import Store

AT = 1_790_000_000.0
DAY = 86400.0
REASON = "TREND sim01 IB-02 440 -> 430 -> 420 -> 410 -> 400 Gb/s over 5 runs (-9.1%, site limit -5%)"


def burnin(*args: str, history: Path | str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BURNIN_HISTORY": str(history)}
    return subprocess.run([sys.executable, "-m", "burnin.cli.main", *args], capture_output=True, text=True,
                          timeout=600, check=False, env=env)


def _seed(path: Path) -> None:
    """Four earlier nights: sim01's IB-02 at 440, 430, 420, 410 Gb/s (the simulator's is 400), sim02 steady."""
    with Store(path) as store:
        for night, rate in enumerate([440.0, 430.0, 420.0, 410.0]):
            run = store.add_run(kind="run", started=AT + night * DAY, nodes=2)
            store.add_verdicts(run, [(node, "IB-02", "pass", value, "Gb/s", f"{value:g} Gb/sec (4X NDR)", "", "")
                                     for node, value in (("sim01", rate), ("sim02", 400.0))])
            store.finish_run(run, finished=AT + night * DAY + 60,
                             decisions=[("sim01", True, [], [], ""), ("sim02", True, [], [], "")])


def _gate(out: Path) -> dict[str, dict[str, object]]:
    nodes: dict[str, dict[str, object]] = json.loads((out / "gate.json").read_text(encoding="utf-8"))["nodes"]
    return nodes


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("trend")
    _seed(base / "history.sqlite")
    return base


def test_by_default_a_trend_is_reported_and_the_node_admitted(tmp_path: Path) -> None:
    history = tmp_path / "history.sqlite"
    _seed(history)
    proc = burnin("run", "--sim", "2", "--out", str(tmp_path / "out"), history=history)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr == ""
    trends = burnin("history", "--trends", history=history)
    assert "TREND sim01 IB-02 440 -> 400 Gb/s over the last 5 runs (-9.1%, -2.3% per run), still passing" in \
        trends.stdout


def test_the_sites_limit_fails_the_node_and_the_slurm_gate_drains_it_naming_the_trend(seeded: Path) -> None:
    history, out = seeded / "history.sqlite", seeded / "out"
    proc = burnin("run", "--sim", "2", "--out", str(out), "--fail-on-trend", "5%", history=history)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stderr == ""
    assert f"    {REASON}" in proc.stdout.splitlines()
    nodes = _gate(out)
    assert nodes["sim01"]["admitted"] is False and nodes["sim01"]["failed"] == ["IB-02"]
    assert nodes["sim01"]["reasons"] == [REASON] and nodes["sim02"]["admitted"] is True
    decision = NodeDecision("sim01", False, ("IB-02",), (), (REASON,))
    [drain] = plan({"sim01": decision}, {"sim01": SlurmNode("sim01", "IDLE", "")})
    assert drain.action == "drain" and f"Reason=burnin: IB-02 {REASON}" in drain.argv
    timeline = burnin("history", "sim01", history=history)
    assert "rejected: failed IB-02" in timeline.stdout and f"    {REASON}" in timeline.stdout.splitlines()
    junit = (out / "junit.xml").read_text(encoding="utf-8")
    assert "trend[sim01]" in junit


def test_without_a_history_the_limit_judges_nothing_and_says_so_once(tmp_path: Path) -> None:
    proc = burnin("run", "--sim", "2", "--out", str(tmp_path / "out"), "--fail-on-trend", "5%", history="off")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr == "burnin: TREND not judged on sim[01-02]: no history to read (BURNIN_HISTORY=off)\n"
    assert all(node["admitted"] for node in _gate(tmp_path / "out").values())


def test_a_trend_of_fewer_than_three_runs_is_refused_at_the_command_line(tmp_path: Path) -> None:
    proc = burnin("run", "--sim", "2", "--out", str(tmp_path / "out"), "--fail-on-trend", "5%", "--trend-runs", "2",
                  history="off")
    assert proc.returncode == 2 and "a trend spans at least 3 runs" in proc.stderr
    assert not (tmp_path / "out").exists()
