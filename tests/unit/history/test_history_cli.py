"""`burnin history`: the table, the JSON, the options, and one-line errors (exit 2) on bad input."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest
from history_support import decision, healthy, journal_entry, write_journal, write_run

from burnin.cli.history_cmd import window
from burnin.cli.main import main
from burnin.history.document import duration_text, percent
from burnin.history.records import parse_stamp

DAY = 86400.0


def _day(n: int) -> str:
    return f"2026-11-{n:02d}T00:00:00Z"


def _history(tmp_path: Path) -> Path:
    """n1 healthy; n2 fails GPU-10 on day 2, back day 3; n3 fails three times in ten days (a lemon), out at the end."""
    runs = tmp_path / "reports"
    plan: dict[int, dict[str, dict[str, Any]]] = {
        1: healthy("n1", "n2", "n3"),
        2: {**healthy("n1", "n3"), "n2": decision(False, ("GPU-10",))},
        3: {**healthy("n1", "n2"), "n3": decision(False, ("IB-02",))},
        4: healthy("n1", "n2", "n3"),
        5: {**healthy("n1", "n2"), "n3": decision(False, ("GPU-04",), ("IB-05",))},
        6: healthy("n1", "n2", "n3"),
        11: {**healthy("n1", "n2"), "n3": decision(False, ("GPU-04",))},
    }
    for day, nodes in plan.items():
        write_run(runs / f"day{day:02d}", _day(day), nodes)
    return runs


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["history", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_table_names_failures_lemons_and_who_is_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, str(_history(tmp_path)))
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == ("burnin history: 3 nodes, 7 runs and 0 journals, from 2026-11-01T00:00:00Z to "
                        "2026-11-11T00:00:00Z (10.0 d)")
    n2 = next(line for line in lines if "│ n2 " in line)
    assert [cell.strip() for cell in n2.split("│")[1:-1]] == ["n2", "1", "GPU-10", "1", "1.0 d", "90.0%", "", ""]
    n3 = next(line for line in lines if "│ n3 " in line)
    assert [cell.strip() for cell in n3.split("│")[1:-1]] == [
        "n3", "3", "GPU-04,IB-02", "3", "1.0 d", "80.0%", "LEMON", "2026-11-11T00:00:00Z"]
    assert not any("│ n1 " in line for line in lines)
    assert "never out of the pool: 1 nodes" in lines
    # in the pool: n1 10 d, n2 9 d, n3 8 d of 30 node-days; repairs of 1 d each
    assert ("fleet: 4 failures attributed (GPU-04 2, GPU-10 1, IB-02 1); 148.1 per 1000 node-days in the pool; "
            "MTTR 1.0 d; availability 90.0%") in lines
    assert ("lemons (>= 3 failures within 30.0 d): n3 (3 failures 2026-11-03T00:00:00Z .. 2026-11-11T00:00:00Z)"
            in lines)
    assert "out of the pool now: n3" in lines


def test_all_lists_every_node(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, str(_history(tmp_path)), "--all")
    assert code == 0
    n1 = next(line for line in out.splitlines() if "│ n1 " in line)
    assert [cell.strip() for cell in n1.split("│")[1:-1]] == ["n1", "0", "", "0", "-", "100.0%", "", ""]
    assert "never out of the pool" not in out


def test_a_fleet_without_a_rejection_prints_no_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_run(tmp_path / "r1", _day(1), healthy("n1", "n2"))
    code, out, _ = run_cli(capsys, str(tmp_path / "r1"))
    assert code == 0 and "┃" not in out
    assert "never out of the pool: 2 nodes" in out and "lemons (>= 3 failures within 30.0 d): none" in out
    assert "fleet: 0 failures attributed; - per 1000 node-days in the pool; MTTR -; availability -" in out
    assert "out of the pool now: none" in out


def test_the_lemon_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = str(_history(tmp_path))
    _, out, _ = run_cli(capsys, runs, "--lemon-window", "7d")
    assert "lemons (>= 3 failures within 7.0 d): none" in out
    _, out, _ = run_cli(capsys, runs, "--lemon-failures", "4")
    assert "lemons (>= 4 failures within 30.0 d): none" in out
    _, out, _ = run_cli(capsys, runs, "--lemon-failures", "1", "--lemon-window", "1h")
    assert "lemons (>= 1 failures within 1.0 h): n2 (1 failures" in out


def test_json_to_stdout_is_the_whole_history(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, str(_history(tmp_path)), "--json", "-")
    assert code == 0
    doc = json.loads(out)
    assert doc["schema"] == 1
    assert doc["period"] == {"start": _day(1), "end": _day(11), "days": 10.0}
    assert doc["settings"] == {"lemon_failures": 3, "lemon_window_days": 30.0}
    assert doc["fleet"] == {"nodes": 3, "runs": 7, "failures": 4,
                            "failures_by_check": {"GPU-04": 2, "GPU-10": 1, "IB-02": 1},
                            "failures_per_1000_node_days": 148.148, "node_days_in_pool": 27.0,
                            "mttr_s": DAY, "availability": 0.9, "lemons": ["n3"],
                            "out_of_pool": ["n3"]}
    n3 = doc["nodes"]["n3"]
    assert n3["failures"] == 3 and n3["failed_checks"] == ["GPU-04", "IB-02"]
    assert n3["lemon"] == {"failures": 3, "first": _day(3), "last": _day(11)}
    assert n3["out_since"] == _day(11) and n3["mttr_s"] == DAY and n3["availability"] == 0.8
    assert (n3["first_seen"], n3["last_seen"], n3["observations"]) == (_day(1), _day(11), 7)
    assert n3["outages"][1] == {"start": _day(5), "end": _day(6), "duration_s": DAY, "attributed": True,
                                "failed": ["GPU-04"], "incomplete": ["IB-05"], "reason": "GPU-04 broke",
                                "sources": ["run"], "origins": [str(tmp_path / "reports" / "day05")]}
    assert n3["outages"][2]["end"] is None and n3["outages"][2]["duration_s"] is None
    assert (n3["in_pool_s"], n3["observed_s"]) == (8 * DAY, 10 * DAY)
    assert doc["nodes"]["n1"]["lemon"] is None and doc["nodes"]["n1"]["out_since"] is None
    assert doc["runs"][0] == {"path": str(tmp_path / "reports" / "day01"), "at": _day(1), "nodes": 3, "rejected": 0}
    assert [r["at"] for r in doc["runs"]] == sorted(r["at"] for r in doc["runs"])
    assert doc["skipped"] == [] and doc["journals"] == []


def test_json_to_a_file_beside_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "out" / "history.json"
    code, out, _ = run_cli(capsys, str(_history(tmp_path)), "--json", str(target))
    assert code == 0 and out.rstrip().endswith(f"history: {target}")
    assert json.loads(target.read_text())["fleet"]["lemons"] == ["n3"]


def test_skipped_runs_and_journals_are_said_and_recorded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = _history(tmp_path)
    (runs / "stopped").mkdir()
    (runs / "stopped" / "run.json").write_text("{}")
    at = parse_stamp(_day(7))
    assert at is not None
    journal = write_journal(tmp_path / "watch" / "events.jsonl", [journal_entry("n1", at)])
    code, out, err = run_cli(capsys, str(runs), "--journal", str(tmp_path / "watch"), "--json", "-")
    assert code == 0
    assert err == (f"burnin history: skipped {runs / 'stopped'}: no gate.json: the run wrote no verdicts "
                   "(stopped before judging?)\n")
    doc = json.loads(out)
    assert doc["skipped"] == [{"path": str(runs / "stopped"), "reason": "no gate.json: the run wrote no verdicts "
                                                                        "(stopped before judging?)"}]
    assert doc["journals"] == [{"path": str(journal), "out_of_pool": 1}]
    outage = doc["nodes"]["n1"]["outages"][0]
    assert (outage["start"], outage["end"], outage["failed"], outage["sources"]) == (_day(7), _day(11), ["GPU-04"],
                                                                                    ["watch"])


@pytest.mark.parametrize(("args", "message"), [
    (["{missing}"], "{missing}: no such file or folder"),
    (["{garbage}"], "{garbage}/gate.json: not JSON ("),
    (["{empty}"], "no run to read: every one was skipped"),
    (["--journal", "{missing}", "{runs}"], "--journal {missing}: no such file"),
    (["{runs}", "--json", "/proc/no/such/history.json"], "--json /proc/no/such/history.json: cannot write ("),
    (["{runs}", "--lemon-window", "0"], "a window must be above 0 and at most 3650 days"),
    (["{runs}", "--lemon-window", "soon"], "'soon' is not a time window (30d, 72h, 90m, 3600s)"),
    (["{runs}", "--lemon-failures", "0"], "'0': must be at least 1"),
    ([], "name a NODE, or --check ID, --runs, --trends"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                                          message: str) -> None:
    places = {"missing": tmp_path / "missing", "garbage": tmp_path / "garbage", "empty": tmp_path / "empty",
              "runs": tmp_path / "runs"}
    places["garbage"].mkdir()
    (places["garbage"] / "gate.json").write_text("{")
    places["empty"].mkdir()
    write_run(places["runs"], _day(1), healthy("n1"))
    argv = [a.format(**places) for a in args]
    code = None
    try:
        code = main(["history", *argv])
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    wanted = message.format(**places)
    lines = [line for line in err.splitlines() if not line.startswith("burnin history: skipped ")]
    assert len(lines) == 1 and wanted in lines[0], err
    assert "Traceback" not in err


@pytest.mark.parametrize(("text", "seconds"), [
    ("30d", 30 * DAY), ("30", 30 * DAY), ("1.5", 1.5 * DAY), ("72h", 72 * 3600), ("90m", 5400), ("3600s", 3600),
    (" 7d ", 7 * DAY), ("3650d", 3650 * DAY), ("0.5s", 0.5),
])
def test_a_window_reads_as_days_or_with_its_unit(text: str, seconds: float) -> None:
    assert window(text) == seconds


@pytest.mark.parametrize("text", ["0", "0d", "3651d", "-1d", "1w", "d", "", "nan", "inf"])
def test_a_window_that_is_none_is_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        window(text)


@pytest.mark.parametrize(("seconds", "text"), [
    (None, "-"), (0, "0 s"), (59.4, "59 s"), (60, "1 min"), (3599, "60 min"), (3600, "1.0 h"), (86399, "24.0 h"),
    (86400, "1.0 d"), (3 * 86400 + 43200, "3.5 d"),
])
def test_durations_read_as_people_say_them(seconds: float | None, text: str) -> None:
    assert duration_text(seconds) == text


def test_percentages() -> None:
    assert (percent(None), percent(1.0), percent(0.8333333), percent(0)) == ("-", "100.0%", "83.3%", "0.0%")


# ---------------------------------------------------------------- odd inputs: warned, skipped, never a crash


def test_node_names_are_printed_as_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """ClusterShell reads ``a!b`` as a set difference and ``gpu[`` as a broken range: never folded."""
    out_of_pool = ("GPU-10",)
    write_run(tmp_path / "r1", _day(1), {name: decision(False, out_of_pool)
                                         for name in ("a!b", "gpu[", "n1", "n2", "x,y")})
    code, out, err = run_cli(capsys, str(tmp_path / "r1"))
    assert code == 0 and err == ""
    assert "out of the pool now: n[1-2],a!b,gpu[,x,y" in out.splitlines()
    rows = [line.split("│")[1].strip() for line in out.splitlines() if line.startswith("│")]
    assert rows == ["a!b", "gpu[", "n1", "n2", "x,y"]


def test_a_run_created_in_the_future_is_skipped_and_the_period_is_the_real_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = _history(tmp_path)
    write_run(runs / "z-ahead", "2099-01-01T00:00:00Z", healthy("n1", "n2", "n3"))
    code, out, err = run_cli(capsys, str(runs))
    assert code == 0
    assert err.startswith(f"burnin history: skipped {runs / 'z-ahead' / 'gate.json'}: created 2099-01-01T00:00:00Z "
                          "is in the future (now ") and err.count("\n") == 1
    assert "from 2026-11-01T00:00:00Z to 2026-11-11T00:00:00Z (10.0 d)" in out.splitlines()[0]
    assert "MTTR 1.0 d; availability 90.0%" in out


def test_journal_entries_at_impossible_times_are_skipped_naming_their_lines(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = _history(tmp_path)
    journal = write_journal(tmp_path / "events.jsonl", [journal_entry("n1", 1e18), journal_entry("n1", -1e12)])
    code, out, err = run_cli(capsys, str(runs), "--journal", str(journal), "--json", "-")
    assert code == 0
    assert err.splitlines()[0].startswith(f"burnin history: skipped {journal}:1: detected_at 1e+18 is in the future")
    assert err.splitlines()[1] == (f"burnin history: skipped {journal}:2: detected_at -29719-04-05T22:13:20Z is before "
                                   "2000-01-01T00:00:00Z (a clock that was never set?)")
    doc = json.loads(out)
    assert doc["period"] == {"start": _day(1), "end": _day(11), "days": 10.0}
    assert doc["fleet"]["availability"] == 0.9 and doc["journals"] == [{"path": str(journal), "out_of_pool": 0}]
    assert [s["path"] for s in doc["skipped"]] == [f"{journal}:1", f"{journal}:2"]


def test_an_admitted_node_with_failed_checks_is_counted_inconsistent(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = _history(tmp_path)
    write_run(runs / "day04", _day(4), {**healthy("n1", "n3"),
                                        "n2": {"admitted": True, "failed": ["GPU-04"], "incomplete": []}})
    code, out, err = run_cli(capsys, str(runs), "--json", "-")
    assert code == 0
    assert err == (f"burnin history: inconsistent {runs / 'day04' / 'gate.json'}: node n2 admitted with failed checks "
                   "GPU-04: counted as rejected\n")
    doc = json.loads(out)
    assert doc["nodes"]["n2"]["failures"] == 2 and doc["nodes"]["n2"]["failed_checks"] == ["GPU-04", "GPU-10"]
    assert doc["inconsistent"] == [{"path": str(runs / "day04" / "gate.json"), "node": "n2", "failed": ["GPU-04"],
                                    "incomplete": [], "reason": "admitted with failed checks GPU-04: counted as "
                                                                "rejected"}]


def test_a_torn_last_journal_line_is_skipped_and_the_history_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = _history(tmp_path)
    at = parse_stamp(_day(7))
    journal = write_journal(tmp_path / "events.jsonl", [journal_entry("n1", at)], extra_lines=('{"node": "n1", "de',))
    code, out, err = run_cli(capsys, str(runs), "--journal", str(journal))
    assert code == 0
    assert err == (f"burnin history: skipped {journal}:2: torn last line (the watch stopped while writing it?)\n")
    assert "fleet: 5 failures attributed" in out
