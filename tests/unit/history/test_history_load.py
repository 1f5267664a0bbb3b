"""Reading past runs and watch journals: what is read, what is skipped with its reason, what is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from history_support import decision, healthy, journal_entry, write_journal, write_run

from burnin.errors import UsageError
from burnin.history.load import collect
from burnin.history.records import EARLIEST, FUTURE_SLACK_S, Inconsistent, Observation, parse_stamp, stamp

CREATED = "2026-11-02T03:04:05Z"
AT = parse_stamp(CREATED) or 0.0
NOW = AT + 30 * 86400.0


def test_times_read_and_written_as_gate_json_writes_them() -> None:
    assert AT == 1793588645.0 and stamp(1793588645.0) == CREATED
    assert parse_stamp("2026-11-02 03:04:05") is None and parse_stamp(None) is None and parse_stamp(5) is None


def test_a_run_folder_gives_one_observation_per_node(tmp_path: Path) -> None:
    run = write_run(tmp_path / "r1", CREATED, {"n1": decision(), "n2": decision(False, ("GPU-10",), ("IB-05",),
                                                                                 ("GPU-10 gpu3 17/18", "IB-05 x"))})
    inputs = collect([run])
    assert inputs.observations == [
        Observation("n1", AT, True, (), (), "", str(run), "run"),
        Observation("n2", AT, False, ("GPU-10",), ("IB-05",), "GPU-10 gpu3 17/18", str(run), "run"),
    ]
    assert inputs.runs == [{"path": str(run), "at": AT, "nodes": 2, "rejected": 1}]
    assert inputs.skipped == [] and inputs.journals == []


def test_a_gate_json_file_is_its_run(tmp_path: Path) -> None:
    run = write_run(tmp_path / "r1", CREATED, healthy("n1"))
    assert [o.origin for o in collect([run / "gate.json"]).observations] == [str(run)]


def test_a_folder_of_runs_reads_each_and_skips_a_run_without_gate(tmp_path: Path) -> None:
    write_run(tmp_path / "reports" / "b", "2026-11-03T00:00:00Z", healthy("n1"))
    write_run(tmp_path / "reports" / "a", CREATED, healthy("n1"))
    (tmp_path / "reports" / "stopped").mkdir()
    (tmp_path / "reports" / "stopped" / "run.json").write_text("{}")
    (tmp_path / "reports" / "notes").mkdir()  # not a run: left alone
    (tmp_path / "reports" / "README").write_text("x")
    inputs = collect([tmp_path / "reports"])
    assert [Path(r["path"]).name for r in inputs.runs] == ["a", "b"]
    assert [(Path(s.path).name, s.reason) for s in inputs.skipped] == [
        ("stopped", "no gate.json: the run wrote no verdicts (stopped before judging?)")]


@pytest.mark.parametrize("marker", ["run.json", "facts", "junit.xml", "verdicts.json"])
def test_a_run_folder_without_gate_is_skipped_with_its_reason(tmp_path: Path, marker: str) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / marker).mkdir() if marker == "facts" else (folder / marker).write_text("{}")
    good = write_run(tmp_path / "good", CREATED, healthy("n1"))
    inputs = collect([folder, good])
    assert [(s.path, s.reason) for s in inputs.skipped] == [
        (str(folder), "no gate.json: the run wrote no verdicts (stopped before judging?)")]
    assert len(inputs.observations) == 1


def test_an_empty_folder_is_skipped_as_no_run(tmp_path: Path) -> None:
    inputs = collect([tmp_path])
    assert [s.reason for s in inputs.skipped] == ["no gate.json, and no run folder with one inside"]


def test_a_run_named_twice_is_read_once(tmp_path: Path) -> None:
    run = write_run(tmp_path / "runs" / "r1", CREATED, healthy("n1"))
    assert len(collect([run, run / "gate.json", tmp_path / "runs"]).observations) == 1


@pytest.mark.parametrize(("flags", "why"), [
    ({"partial": True}, "partial (a subset of the checks) run"),
    ({"interrupted": True}, "interrupted run"),
    ({"partial": True, "interrupted": True}, "interrupted run"),
])
def test_a_partial_or_interrupted_run_judged_no_node(tmp_path: Path, flags: dict[str, bool], why: str) -> None:
    run = write_run(tmp_path / "r", CREATED, {"n1": decision(False, (), ("RUN",))}, **flags)
    inputs = collect([run])
    assert inputs.observations == [] and inputs.runs == []
    assert [s.reason for s in inputs.skipped] == [f"{why}: its gate admits nobody, so it judged no node"]


def test_without_created_the_time_is_run_json_start_plus_duration(tmp_path: Path) -> None:
    run = write_run(tmp_path / "r", None, healthy("n1"))
    (run / "run.json").write_text(json.dumps({"started": CREATED, "duration_s": 61.5}))
    assert collect([run]).observations[0].at == AT + 61.5
    (run / "run.json").write_text(json.dumps({"started": CREATED, "duration_s": -5}))
    assert collect([run]).observations[0].at == AT
    (run / "run.json").write_text(json.dumps({"started": CREATED, "duration_s": "x"}))
    assert collect([run]).observations[0].at == AT


@pytest.mark.parametrize("run_json", [None, {"started": "yesterday"}, {}])
def test_a_run_without_any_time_is_skipped(tmp_path: Path, run_json: object) -> None:
    run = write_run(tmp_path / "r", "not a time", healthy("n1"))
    if run_json is not None:
        (run / "run.json").write_text(json.dumps(run_json))
    inputs = collect([run])
    assert inputs.observations == []
    assert [s.reason for s in inputs.skipped] == ["no time: gate.json has no 'created' and no run.json 'started'"]


def test_created_wins_over_run_json(tmp_path: Path) -> None:
    run = write_run(tmp_path / "r", CREATED, healthy("n1"))
    (run / "run.json").write_text("garbage")  # not read: the gate has its time
    assert collect([run]).observations[0].at == AT


# ---------------------------------------------------------------- impossible times, inconsistent decisions


def test_a_run_created_in_the_future_is_skipped_naming_its_gate(tmp_path: Path) -> None:
    good = write_run(tmp_path / "reports" / "a", CREATED, {"n1": decision(False, ("GPU-10",))})
    ahead = write_run(tmp_path / "reports" / "b", "2099-01-01T00:00:00Z", healthy("n1"))
    inputs = collect([tmp_path / "reports"], now=NOW)
    assert [o.origin for o in inputs.observations] == [str(good)]
    assert [r["path"] for r in inputs.runs] == [str(good)]
    assert [(s.path, s.reason) for s in inputs.skipped] == [
        (str(ahead / "gate.json"), "created 2099-01-01T00:00:00Z is in the future (now 2026-12-02T03:04:05Z; "
                                   "a clock set wrong?): run not read")]


def test_a_run_json_time_in_the_future_is_skipped_naming_run_json(tmp_path: Path) -> None:
    run = write_run(tmp_path / "r", None, healthy("n1"))
    (run / "run.json").write_text(json.dumps({"started": CREATED, "duration_s": 1e300}))
    inputs = collect([run], now=NOW)
    assert inputs.observations == []
    (skipped,) = inputs.skipped
    assert skipped.path == str(run / "run.json")
    assert skipped.reason.startswith("started + duration_s 1e+300 is in the future (now 2026-12-02T03:04:05Z")


@pytest.mark.parametrize("created", ["1999-12-31T23:59:59Z", "1970-01-01T00:00:00Z"])
def test_a_run_created_before_2000_is_skipped(tmp_path: Path, created: str) -> None:
    run = write_run(tmp_path / "r", created, healthy("n1"))
    (skipped,) = collect([run], now=NOW).skipped
    assert skipped.reason == (f"created {created} is before 2000-01-01T00:00:00Z (a clock that was never set?): "
                              "run not read")


def test_the_bounds_of_a_possible_time_are_possible(tmp_path: Path) -> None:
    run = write_run(tmp_path / "r", "2000-01-01T00:00:00Z", healthy("n1"))
    assert collect([run], now=NOW).observations[0].at == EARLIEST
    journal = write_journal(tmp_path / "events.jsonl", [journal_entry("n1", NOW + FUTURE_SLACK_S),
                                                        journal_entry("n2", NOW + FUTURE_SLACK_S + 1)])
    inputs = collect([], (journal,), now=NOW)
    assert [o.node for o in inputs.observations] == ["n1"]
    assert [s.path for s in inputs.skipped] == [f"{journal}:2"]


@pytest.mark.parametrize(("at", "why"), [
    (1e18, "detected_at 1e+18 is in the future (now 2026-12-02T03:04:05Z; a clock set wrong?)"),
    (-1e12, "detected_at -29719-04-05T22:13:20Z is before 2000-01-01T00:00:00Z (a clock that was never set?)"),
    (-1e300, "detected_at -1e+300 is before 2000-01-01T00:00:00Z (a clock that was never set?)"),
    (0, "detected_at 1970-01-01T00:00:00Z is before 2000-01-01T00:00:00Z (a clock that was never set?)"),
])
def test_a_journal_entry_at_an_impossible_time_is_skipped_naming_its_line(tmp_path: Path, at: float,
                                                                          why: str) -> None:
    journal = write_journal(tmp_path / "events.jsonl", [journal_entry("n1", AT), journal_entry("n2", at)])
    inputs = collect([], (journal,), now=NOW)
    assert [o.node for o in inputs.observations] == ["n1"]
    assert [(s.path, s.reason) for s in inputs.skipped] == [(f"{journal}:2", why)]


def test_the_clock_is_the_default_now(tmp_path: Path) -> None:
    import time

    journal = write_journal(tmp_path / "events.jsonl", [journal_entry("n1", time.time() + 2 * FUTURE_SLACK_S),
                                                        journal_entry("n2", time.time() - FUTURE_SLACK_S)])
    assert [o.node for o in collect([], (journal,)).observations] == ["n2"]


def test_a_node_admitted_with_failed_or_unmeasured_checks_is_counted_rejected_and_named(tmp_path: Path) -> None:
    run = write_run(tmp_path / "r", CREATED, {
        "n1": {"admitted": True, "failed": ["GPU-10"], "incomplete": [], "reasons": ["GPU-10 gpu3 17/18"]},
        "n2": {"admitted": True, "failed": [], "incomplete": ["IB-05"]},
        "n3": {"admitted": True, "failed": [], "incomplete": []},
    })
    inputs = collect([run], now=NOW)
    assert [(o.node, o.admitted, o.failed, o.incomplete) for o in inputs.observations] == [
        ("n1", False, ("GPU-10",), ()), ("n2", False, (), ("IB-05",)), ("n3", True, (), ())]
    assert inputs.inconsistent == [Inconsistent(str(run / "gate.json"), "n1", ("GPU-10",), ()),
                                   Inconsistent(str(run / "gate.json"), "n2", (), ("IB-05",))]
    assert inputs.runs[0]["rejected"] == 2
    assert inputs.inconsistent[0].reason == "admitted with failed checks GPU-10: counted as rejected"
    assert Inconsistent("g", "n", ("A", "B"), ("C",)).reason == (
        "admitted with failed checks A,B and incomplete checks C: counted as rejected")


# ---------------------------------------------------------------- refused


def _refused(paths: list[Path], journals: tuple[Path, ...] = ()) -> str:
    with pytest.raises(UsageError) as caught:
        collect(paths, journals)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_a_missing_path_is_refused(tmp_path: Path) -> None:
    assert _refused([tmp_path / "nope"]) == f"{tmp_path / 'nope'}: no such file or folder"


@pytest.mark.parametrize(("text", "needle"), [
    ("nope{", "gate.json: not JSON (Expecting value: line 1 column 1 (char 0))"),
    ("[1, 2]", "gate.json: not a burnin gate.json (no 'nodes' mapping)"),
    ('{"nodes": []}', "gate.json: not a burnin gate.json (no 'nodes' mapping)"),
    ('{"nodes": {"n1": "ok"}}', "gate.json: not a burnin gate.json (node n1: 'admitted' is not true/false)"),
    ('{"nodes": {"n1": {"admitted": "yes"}}}', "(node n1: 'admitted' is not true/false)"),
    ('{"created": "2026-11-02T03:04:05Z", "nodes": {"n1": {"admitted": false, "failed": "GPU-10"}}}',
     "gate.json: not a burnin gate.json (node n1: failed is not a list of check ids)"),
    ('{"created": "2026-11-02T03:04:05Z", "nodes": {"n1": {"admitted": false, "incomplete": [1]}}}',
     "(node n1: incomplete is not a list of check ids)"),
])
def test_a_gate_that_is_not_burnins_is_refused_naming_the_file(tmp_path: Path, text: str, needle: str) -> None:
    run = tmp_path / "r"
    run.mkdir()
    (run / "gate.json").write_text(text)
    message = _refused([run])
    assert message.startswith(str(run / "gate.json")) and needle in message, message


def test_a_gate_that_is_not_text_is_refused(tmp_path: Path) -> None:
    (tmp_path / "gate.json").write_bytes(b"\xff\xfe\x00garbage")
    assert _refused([tmp_path]) == f"{tmp_path / 'gate.json'}: not JSON (not UTF-8 text)"


def test_an_unreadable_file_is_refused(tmp_path: Path) -> None:
    from burnin.history.load import read_json

    (tmp_path / "gate.json").mkdir()  # reading a folder fails as an unreadable file does (root reads any file)
    with pytest.raises(UsageError, match=r"gate.json: cannot read \(Is a directory\)$"):
        read_json(tmp_path / "gate.json")
    # a folder named gate.json is no run's gate: the folder is skipped
    assert [s.reason for s in collect([tmp_path / "gate.json"]).skipped] == [
        "no gate.json, and no run folder with one inside"]


def test_a_run_json_read_for_the_time_must_be_burnins(tmp_path: Path) -> None:
    run = write_run(tmp_path / "r", None, healthy("n1"))
    (run / "run.json").write_text("[]")
    assert _refused([run]) == f"{run / 'run.json'}: not a burnin run.json (not a mapping)"
    (run / "run.json").write_text("{")
    assert _refused([run]).startswith(f"{run / 'run.json'}: not JSON (")


def test_a_control_character_in_a_path_is_shown_escaped(tmp_path: Path) -> None:
    assert "\x1b" not in _refused([tmp_path / "a\x1b[31mb"])


# ---------------------------------------------------------------- the watch's journal


def test_a_journals_drains_and_evictions_are_rejections(tmp_path: Path) -> None:
    journal = write_journal(tmp_path / "state" / "events.jsonl", [
        journal_entry("n1", AT + 10),
        journal_entry("n2", AT + 20, "IB-01", "drain", reason=None, cause="mlx5_2 port down"),
        journal_entry("n1", AT + 30, action="none", note="already evicted"),
        journal_entry("n1", AT + 40, action="record", **{"class": "record"}),
        journal_entry("n1", AT + 50, out_of_pool=False),
        journal_entry("n1", AT + 60, dry_run=True),
        {"node": "n1", "kind": "job-released", "job": "17", "detected_at": AT + 10, "released_at": AT + 12},
    ], extra_lines=("\n", "   \n"))
    inputs = collect([], [tmp_path / "state"])
    assert inputs.observations == [
        Observation("n1", AT + 10, False, ("GPU-04",), (), "burnin: GPU-04 Xid 79 on gpu3", str(journal), "watch"),
        Observation("n2", AT + 20, False, ("IB-01",), (), "mlx5_2 port down", str(journal), "watch"),
    ]
    assert inputs.journals == [{"path": str(journal), "out_of_pool": 2}]
    assert collect([], [journal]).observations == inputs.observations


def test_a_journal_entry_without_its_cause_has_an_empty_reason(tmp_path: Path) -> None:
    journal = write_journal(tmp_path / "events.jsonl", [journal_entry("n1", AT, reason=None, cause=None)])
    assert collect([], [journal]).observations[0].reason == ""


def test_a_missing_journal_is_refused(tmp_path: Path) -> None:
    assert _refused([], (tmp_path / "nope.jsonl",)) == f"--journal {tmp_path / 'nope.jsonl'}: no such file"
    assert _refused([], (tmp_path,)) == f"--journal {tmp_path}: no such file (events.jsonl in it)"


@pytest.mark.parametrize(("line", "why"), [
    ("not json", "not a JSON object (a burnin watch journal has one per line)"),
    ("[1]", "not a JSON object (a burnin watch journal has one per line)"),
    (json.dumps(journal_entry("", AT)), "not a burnin watch journal entry (node, check and detected_at are required)"),
    (json.dumps(journal_entry("n1", AT, check=None)), "not a burnin watch journal entry"),
    (json.dumps(journal_entry(5, AT)), "not a burnin watch journal entry"),  # type: ignore[arg-type]
    (json.dumps(journal_entry("n1", "soon")), "not a burnin watch journal entry"),
    (json.dumps(journal_entry("n1", True)), "not a burnin watch journal entry"),
    (json.dumps(journal_entry("n1", float("nan"))), "not a burnin watch journal entry"),  # NaN: not a time
])
def test_a_journal_line_that_is_not_an_entry_is_skipped_naming_its_line(tmp_path: Path, line: str, why: str) -> None:
    journal = write_journal(tmp_path / "events.jsonl", [journal_entry("n1", AT)],
                            extra_lines=(line + "\n", json.dumps(journal_entry("n2", AT + 1)) + "\n"))
    inputs = collect([], (journal,), now=NOW)
    assert [o.node for o in inputs.observations] == ["n1", "n2"]  # the lines around it are read
    (skipped,) = inputs.skipped
    assert skipped.path == f"{journal}:2" and skipped.reason.startswith(why), skipped
    assert inputs.journals == [{"path": str(journal), "out_of_pool": 2}]


def test_a_torn_last_line_is_skipped_and_named_torn(tmp_path: Path) -> None:
    journal = write_journal(tmp_path / "events.jsonl", [journal_entry("n1", AT)], extra_lines=('{"node": "n2", "ac',))
    inputs = collect([], (journal,), now=NOW)
    assert [o.node for o in inputs.observations] == ["n1"]
    assert [(s.path, s.reason) for s in inputs.skipped] == [
        (f"{journal}:2", "torn last line (the watch stopped while writing it?)")]
    # the same text with its newline is a damaged line, not a torn one; a whole last line without one is read
    journal.write_text(journal.read_text() + "\n")
    assert collect([], (journal,), now=NOW).skipped[0].reason.startswith("not a JSON object")
    journal.write_text(json.dumps(journal_entry("n1", AT)) + "\n" + json.dumps(journal_entry("n2", AT)))
    inputs = collect([], (journal,), now=NOW)
    assert [o.node for o in inputs.observations] == ["n1", "n2"] and inputs.skipped == []


def test_a_journal_of_one_torn_line_is_read_as_empty(tmp_path: Path) -> None:
    journal = tmp_path / "events.jsonl"
    journal.write_text('{"node": "n1", "act')
    inputs = collect([], (journal,), now=NOW)
    assert inputs.journals == [{"path": str(journal), "out_of_pool": 0}] and len(inputs.skipped) == 1


def test_a_file_without_one_journal_line_is_no_journal(tmp_path: Path) -> None:
    journal = tmp_path / "events.jsonl"
    journal.write_text("node,check\nn1,GPU-04\n")
    assert _refused([], (journal,)) == f"{journal}: not a burnin watch journal (no line is a JSON object)"
    journal.write_text("\n  \n")  # nothing at all: an empty journal
    assert collect([], (journal,), now=NOW).journals == [{"path": str(journal), "out_of_pool": 0}]


def test_a_journal_that_is_not_text_is_refused(tmp_path: Path) -> None:
    (tmp_path / "events.jsonl").write_bytes(b"\xff\xfe")
    assert _refused([], (tmp_path,)) == f"{tmp_path / 'events.jsonl'}: cannot read (not UTF-8 text)"
