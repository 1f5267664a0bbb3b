"""`burnin history` and `burnin report` as an operator runs them, on files a hand, a crash or another tool
damaged: bad records are warned about and skipped, files that are not burnin's are one line and exit 2,
and neither command ever ends in a traceback (exit 3)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def burnin(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "burnin.cli.main", *args], capture_output=True, text=True,
                          timeout=300, check=False)


def _gate(created: str, nodes: dict[str, dict[str, Any]]) -> str:
    return json.dumps({"topology": "hgx-h100-8gpu", "created": created, "partial": False, "interrupted": False,
                       "nodes": nodes})


def _decision(admitted: bool, failed: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"admitted": admitted, "failed": list(failed), "incomplete": [], "reasons": [f"{c} broke" for c in failed]}


def _entry(node: str, at: float) -> str:
    return json.dumps({"node": node, "check": "GPU-04", "action": "evict", "out_of_pool": True, "dry_run": False,
                       "detected_at": at, "reason": "burnin: GPU-04 Xid 79"}) + "\n"


def test_history_warns_about_each_bad_record_and_reads_the_rest(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    days = {1: {"gpu[": _decision(True), "a!b": _decision(True), "n1": _decision(True)},
            2: {"gpu[": _decision(False, ("GPU-10",)), "a!b": _decision(True, ("IB-02",)), "n1": _decision(True)},
            3: {"gpu[": _decision(True), "a!b": _decision(True), "n1": _decision(True)}}
    for day, nodes in days.items():
        (reports / f"day{day}").mkdir(parents=True)
        (reports / f"day{day}" / "gate.json").write_text(_gate(f"2026-11-0{day}T00:00:00Z", nodes))
    (reports / "ahead").mkdir()
    (reports / "ahead" / "gate.json").write_text(_gate("2099-01-01T00:00:00Z", {"n1": _decision(True)}))
    journal = tmp_path / "events.jsonl"
    journal.write_text(_entry("n1", 1e18) + _entry("n1", -1e12) + '{"node": "n1", "che')
    proc = burnin("history", str(reports), "--journal", str(journal))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    warnings = proc.stderr.splitlines()
    assert [w.split(": ")[1] for w in warnings] == [
        f"skipped {reports / 'ahead' / 'gate.json'}", f"skipped {journal}:1", f"skipped {journal}:2",
        f"skipped {journal}:3", f"inconsistent {reports / 'day2' / 'gate.json'}"]
    lines = proc.stdout.splitlines()
    assert lines[0].endswith("from 2026-11-01T00:00:00Z to 2026-11-03T00:00:00Z (2.0 d)")
    assert "fleet: 2 failures attributed (GPU-10 1, IB-02 1)" in proc.stdout
    assert [line.split("│")[1].strip() for line in lines if line.startswith("│")] == ["a!b", "gpu["]


def test_history_refuses_a_journal_that_is_not_one_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "r1").mkdir()
    (tmp_path / "r1" / "gate.json").write_text(_gate("2026-11-01T00:00:00Z", {"n1": _decision(True)}))
    (tmp_path / "notes.csv").write_text("node,check\nn1,GPU-04\n")
    proc = burnin("history", str(tmp_path / "r1"), "--journal", str(tmp_path / "notes.csv"))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (f"burnin history: {tmp_path / 'notes.csv'}: not a burnin watch journal "
                           "(no line is a JSON object)\n")


def test_report_leaves_out_a_verdict_whose_check_is_no_id_and_refuses_a_file_of_none(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "gate.json").write_text(_gate("2026-11-01T00:00:00Z", {"n1": _decision(True)}))
    verdicts = [{"node": "n1", "check": "GPU-10", "status": "pass"}, {"node": "n1", "check": 5, "status": "fail"},
                {"node": "n1", "check": None, "status": "fail"}]
    (run / "verdicts.json").write_text(json.dumps(verdicts))
    proc = burnin("report", str(run))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [line.split(" (")[0] for line in proc.stderr.splitlines()] == [
        f"burnin report: {run / 'verdicts.json'}: record 2 is not a verdict",
        f"burnin report: {run / 'verdicts.json'}: record 3 is not a verdict"]
    (run / "verdicts.json").write_text(json.dumps(verdicts[1:]))
    proc = burnin("report", str(run))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr == (f"burnin report: {run / 'verdicts.json'}: no record is a verdict "
                           "(record 1: 'check' is 5, not a check id)\n")
