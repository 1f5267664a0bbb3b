"""burnin soak on simulated racks, on the simulated clock (issue 14's Done-when lines).

- a day-long soak of 8 nodes with an Xid at minute 600, a throughput drift and a thermal creep rejects
  exactly those three nodes, each for its own check and cause, and shows progress while it runs;
- a healthy rack is admitted whole (no false rejection);
- a soak killed halfway (SIGKILL) and resumed ends with the same verdicts, and the samples taken
  before the kill are kept; the other soak faults are caught by their checks on the way.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

CLI = [sys.executable, "-m", "burnin.cli.main"]


def burnin(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, check=False)


def gate(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "gate.json").read_text())
    return data


def verdicts(out: Path) -> dict[tuple[str, str], dict[str, Any]]:
    return {(v["node"], v["check"]): v for v in json.loads((out / "verdicts.json").read_text())}


def test_day_long_soak_rejects_exactly_the_faulted_nodes_and_shows_progress(tmp_path: Path) -> None:
    """One simulated day (one test, so that parallel workers never run it twice)."""
    out = tmp_path / "soak"
    proc = burnin("soak", "--sim", "8", "--duration", "24h", "--out", str(out), "--fault", "sim03:xid-at:600:79",
                  "--fault", "sim06:throughput-drift", "--fault", "sim07:thermal-creep")
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    doc = gate(out)
    assert doc["rejected"] == "sim[03,06-07]" and doc["admitted"] == "sim[01-02,04-05,08]"
    assert doc["kind"] == "soak" and doc["duration_s"] == 86400 and not doc["partial"]
    nodes = doc["nodes"]
    assert nodes["sim03"]["failed"] == ["GPU-04"] and nodes["sim03"]["incomplete"] == ["BRN-06"]
    assert nodes["sim03"]["reasons"][0] == ("GPU-04 gpu3 Xid 79 (GPU has fallen off the bus) at +10:00:00 "
                                            "(expected no fatal Xid)")
    assert (nodes["sim06"]["failed"], nodes["sim06"]["incomplete"]) == (["BRN-02"], [])
    assert nodes["sim06"]["reasons"][0].startswith("BRN-02 gpu3 throughput fell ")
    assert "from the first to the last hour" in nodes["sim06"]["reasons"][0]
    assert (nodes["sim07"]["failed"], nodes["sim07"]["incomplete"]) == (["GPU-06"], [])
    assert nodes["sim07"]["reasons"][0].startswith("GPU-06 gpu3 temperature crept +")
    summary = verdicts(out)[("sim06", "BRN-02")]["measured"]
    for key in ("first ", "last ", "min ", "slope ", "first hour mean", "last hour mean"):
        assert key in summary  # the series' summary travels with the verdict
    series = json.loads((out / "series.json").read_text())
    assert series["sim06"]["gpu3/gflops"]["slope_per_h"] < 0 < series["sim07"]["gpu3/temperature"]["slope_per_h"]

    # progress while it ran: one line per sample round (stderr is no terminal), each failure as it happened
    lines = proc.stderr.splitlines()
    progress = [line for line in lines if line.startswith("soak +")]
    assert len(progress) >= 50  # one line per sample round when stderr is not a terminal
    assert progress[-1].startswith("soak +24:00:00/24:00:00 (100%)") and "7 done, 1 failed (sim03 GPU-04)" in \
        progress[-1]
    failed = [i for i, line in enumerate(lines) if line.startswith("soak FAILED sim03: GPU-04 gpu3 Xid 79")]
    assert len(failed) == 1 and lines[failed[0] + 1].startswith("soak +10:00:00/24:00:00")
    assert "REJECTED sim03" in proc.stdout and f"results:  {out / 'gate.json'}" in proc.stdout


def test_healthy_rack_is_admitted_whole(tmp_path: Path) -> None:
    out = tmp_path / "soak"
    proc = burnin("soak", "--sim", "8", "--duration", "4h", "--interval", "1800", "--out", str(out))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert gate(out)["admitted"] == "sim[01-08]" and gate(out)["rejected"] == ""
    statuses = {(v["check"], v["status"]) for v in verdicts(out).values()}
    assert {s for _, s in statuses} == {"pass"}  # nothing incomplete, nothing standing aside
    assert {c for c, _ in statuses} == {"GPU-01", "GPU-02", "GPU-03", "GPU-04", "GPU-05", "GPU-06", "GPU-09",
                                        "GPU-11", "GPU-14", "IB-04", "BRN-01", "BRN-02", "BRN-03", "BRN-04",
                                        "BRN-05", "BRN-06", "BRN-07"}


FAULTS = ["sim01:ecc-growth", "sim02:nvlink-errors-growth", "sim03:mce", "sim04:xid-at:100:79",
          "sim06:throughput-drift"]


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_killed_soak_resumes_with_the_same_verdicts(tmp_path: Path) -> None:
    args = ["soak", "--sim", "6", "--duration", "4h", "--interval", "1800"]
    for fault in FAULTS:
        args += ["--fault", fault]
    whole = tmp_path / "whole"
    reference = burnin(*args, "--out", str(whole))
    assert reference.returncode == 1, reference.stderr[-3000:]
    nodes = gate(whole)["nodes"]
    caught = {n: (d["failed"], d["incomplete"] == [] or "BRN-06" in d["incomplete"]) for n, d in nodes.items()
              if not d["admitted"]}
    assert caught == {"sim01": (["GPU-02"], True), "sim02": (["GPU-11"], True), "sim03": (["BRN-04"], True),
                      "sim04": (["GPU-04"], True), "sim06": (["BRN-02"], True)}

    cut = tmp_path / "cut"
    child = subprocess.Popen([*CLI, *args, "--out", str(cut)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # Killed once the third sample round is on disk (more than two rounds of six nodes): the checkpoint
    # saved after the second round is past the start, and most rounds are still ahead, so a test starved
    # of CPU for a while does not find the soak already over (killed after four of its nine rounds, it
    # had a few seconds left: its faulted nodes stop sampling early).
    deadline = time.monotonic() + 300
    while len(_lines(cut / "samples.jsonl")) <= 6 * 2 and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert child.poll() is None, "the soak ended before it could be killed halfway"
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=60)
    state = json.loads((cut / "soak-state.json").read_text())
    assert not state["finished"] and 0 < state["now"] < 4 * 3600
    counted = state["logged"]["samples.jsonl"]
    before = _lines(cut / "samples.jsonl")[:counted]

    resumed = burnin("soak", "--resume", str(cut))
    assert resumed.returncode == 1, resumed.stderr[-3000:]
    assert gate(cut)["nodes"] == gate(whole)["nodes"]
    assert verdicts(cut) == verdicts(whole)
    after = _lines(cut / "samples.jsonl")
    assert after[:counted] == before  # the samples before the kill are kept, as they were
    assert after == _lines(whole / "samples.jsonl")

    # the soak's own verdicts are in the history, once, beside its acceptance run (issue 22 item 2)
    assert _soak_failures(cut) == {"sim01": ["GPU-02"], "sim02": ["GPU-11"], "sim03": ["BRN-04"],
                                   "sim04": ["GPU-04"], "sim06": ["BRN-02"]}
    again = burnin("soak", "--resume", str(cut))  # a finished soak judged again: recorded once only
    assert again.returncode == 1, again.stderr[-3000:]
    assert _soak_runs(cut) == 1


def _soak_runs(out: Path) -> int:
    from burnin.history.store import Store

    with Store(Path(os.environ["BURNIN_HISTORY"]), create=False) as store:
        return int(store.db.execute("SELECT count(*) FROM runs WHERE kind = 'soak' AND out_dir = ?",
                                    (str(out.resolve()),)).fetchone()[0])


def _soak_failures(out: Path) -> dict[str, list[str]]:
    from burnin.history.query import find_run, node_states
    from burnin.history.store import Store

    with Store(Path(os.environ["BURNIN_HISTORY"]), create=False) as store:
        run = find_run(store, str(out))
        assert run.kind == "soak"
        return {node: state.failed for node, state in node_states(store, run).items() if not state.admitted}


@pytest.mark.parametrize(("args", "message"), [
    (["soak", "--sim", "2"], "--duration is required"),
    (["soak", "--sim", "2", "--duration", "forever"], "is not a duration"),
    (["soak", "--resume", "/nonexistent/soak"], "no soak-state.json there"),
    (["soak", "--resume", "x", "--sim", "2"], "--resume takes the soak's own settings"),
    (["soak", "--duration", "1h"], "no nodes"),
    (["soak", "--sim", "2", "--duration", "1h", "--fault", "sim01:xid-at:ten:79"], "write xid-at:MIN:N"),
    (["run", "--sim", "2", "--fault", "sim01:thermal-creep"], "burnin soak"),
    # issue 19 case 12: a soak that could never end, or a fault it could never see
    (["soak", "--sim", "2", "--duration", "99999999999999999999h"], "a soak lasts at most 30 days"),
    (["soak", "--sim", "2", "--duration", "1h", "--interval", "0.001"], "samples at most 600 times"),
    (["soak", "--sim", "2", "--duration", "24h", "--fault", "sim01:xid-at:1441:79"],
     "minute 1441 is past the soak's end (24:00:00)"),
])
def test_mistakes_are_one_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    proc = burnin(*args, "--out", str(tmp_path / "out")) if "--resume" not in args else burnin(*args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_a_bad_settings_file_names_its_line(tmp_path: Path) -> None:
    config = tmp_path / "soak.yaml"
    config.write_text("tolerances:\n  throughput_drift: 0.05\n  temperature_creep: 5\n")
    proc = burnin("soak", "--sim", "2", "--duration", "1h", "--config", str(config), "--out", str(tmp_path / "o"))
    assert proc.returncode == 2 and f"{config}:3: tolerances.temperature_creep" in proc.stderr, proc.stderr
