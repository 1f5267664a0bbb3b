"""`burnin history import`: run folders and watch journals into the history database, once."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from history_support import decision, healthy, journal_entry, write_journal, write_run

from burnin.cli.main import main


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_folders_and_a_journal_are_imported_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reports = tmp_path / "reports"
    write_run(reports / "day1", "2026-11-01T00:00:00Z", healthy("n1", "n2"))
    night2 = write_run(reports / "day2", "2026-11-02T00:00:00Z",
                       {"n1": decision(), "n2": decision(False, ("GPU-10",), reasons=("GPU-10 gpu3 17/18",))})
    (night2 / "verdicts.json").write_text(json.dumps([
        {"node": "n2", "check": "GPU-10", "status": "fail", "measured": "gpu3 17/18 NVLink links active",
         "expected": "18 links active per GPU", "reason": "GPU-10 gpu3 17/18 NVLink links active"},
        {"node": "n1", "check": "NCCL-03", "status": "pass", "measured": "group n[1-2] 362.0 GB/s"}]))
    (reports / "stopped").mkdir()
    (reports / "stopped" / "run.json").write_text("{}")
    journal = write_journal(tmp_path / "events.jsonl", [journal_entry("n1", 1793750400.0)])
    history = tmp_path / "h.sqlite"
    code, out, err = _cli(capsys, "history", "import", str(reports), "--journal", str(journal),
                          "--history", str(history))
    assert code == 0, err
    assert out.startswith("burnin history import: 2 runs (2 verdicts) and 1 gate actions added, 0 runs and 0 actions")
    assert "skipped" in err and "stopped" in err
    code, out, _ = _cli(capsys, "history", "import", str(reports), "--journal", str(journal), "--history", str(history))
    assert out.startswith("burnin history import: 0 runs (0 verdicts) and 0 gate actions added, 2 runs and 1 actions")
    code, out, _ = _cli(capsys, "history", "n2", "--history", str(history))
    assert code == 0
    assert re.search(r"run 2 +rejected: failed GPU-10", out)
    assert "    GPU-10 gpu3 17/18 NVLink links active (expected 18 links active per GPU)" in out
    code, out, _ = _cli(capsys, "history", "n1", "--history", str(history))
    assert "drain GPU-04: burnin: GPU-04 Xid 79 on gpu3" in out


def test_the_folder_reading_stays_as_it_was(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reports = tmp_path / "reports"
    write_run(reports / "day1", "2026-11-01T00:00:00Z", healthy("n1"))
    code, out, _ = _cli(capsys, "history", str(reports))
    assert code == 0 and out.startswith("burnin history: 1 nodes, 1 runs and 0 journals")


def test_import_with_nothing_to_import_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(capsys, "history", "import", "--history", str(tmp_path / "h.sqlite"))
    assert code == 2 and err.count("\n") == 1 and "name run folders" in err


def test_a_node_the_history_never_saw_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_run(tmp_path / "r" / "day1", "2026-11-01T00:00:00Z", healthy("n1"))
    history = tmp_path / "h.sqlite"
    _cli(capsys, "history", "import", str(tmp_path / "r"), "--history", str(history))
    code, _, err = _cli(capsys, "history", "n9", "--history", str(history))
    assert code == 2 and err == f"burnin history: node 'n9' is not in {history}\n"
    code, _, err = _cli(capsys, "diff", "--history", str(history))
    assert code == 2 and "a diff needs two" in err
    code, _, err = _cli(capsys, "diff", "7", "1", "--history", str(history))
    assert code == 2 and "no run '7'" in err


def test_a_folder_a_run_recorded_live_is_not_imported_again(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    from burnin.history.recorder import recording

    history = tmp_path / "h.sqlite"
    folder = write_run(tmp_path / "reports" / "night1", "2026-11-01T00:00:00Z", healthy("n1"))
    with recording(folder, nodes=["n1"], topology="t", path=history):
        pass
    code, out, _ = _cli(capsys, "history", "import", str(tmp_path / "reports"), "--history", str(history))
    assert code == 0 and out.startswith("burnin history import: 0 runs (0 verdicts) and 0 gate actions added, "
                                        "1 runs and 0 actions already there")
