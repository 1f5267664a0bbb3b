"""`burnin report RUN_DIR` on files a hand or another tool wrote: one bad verdict is left out and named,
a file that is not burnin's is one line and exit 2, never a traceback (exit 3)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from burnin.cli.main import main
from burnin.gate.decide import CheckOutcome, decide, gate_document
from burnin.report.html import render

GOOD = [{"node": "n1", "check": "GPU-10", "status": "pass"}, {"node": "n2", "check": "GPU-10", "status": "fail",
                                                              "reason": "GPU-10 gpu3 17/18 NVLink links active"}]


def _run(folder: Path, verdicts: object, nodes: tuple[str, ...] = ("n1", "n2")) -> Path:
    outcomes = [CheckOutcome(n, "GPU-10", "fail" if n == "n2" else "pass") for n in nodes]
    gate = gate_document(decide(list(nodes), outcomes), topology="hgx-h100-8gpu", created="2026-11-01T00:00:00Z")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "gate.json").write_text(json.dumps(gate), encoding="utf-8")
    if verdicts is not None:
        text = verdicts if isinstance(verdicts, str) else json.dumps(verdicts)
        (folder / "verdicts.json").write_text(text, encoding="utf-8")
    return folder


def _report(capsys: pytest.CaptureFixture[str], folder: Path) -> tuple[int, str, str]:
    code = main(["report", str(folder)])
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "internal error" not in err, err
    return code, out, err


@pytest.mark.parametrize(("record", "problem"), [
    ({"node": "n1", "check": 5, "status": "fail"}, "'check' is 5, not a check id"),
    ({"node": "n1", "check": None, "status": "fail"}, "'check' is null, not a check id"),
    ({"node": "n1", "check": "", "status": "fail"}, "'check' is \"\", not a check id"),
    ({"node": "n1", "check": ["GPU-04"], "status": "fail"}, "'check' is [\"GPU-04\"], not a check id"),
    ({"node": 7, "check": "GPU-04", "status": "fail"}, "'node' is 7, not a node name"),
    ({"check": "GPU-04", "status": "fail"}, "no 'node'"),
    ({"node": "n1", "status": "fail"}, "no 'check'"),
    ({"node": "n1", "check": "GPU-04", "status": "broken"},
     "'status' is \"broken\", not one of fail, incomplete, not-applicable, pass"),
    ({"node": "n1", "check": "GPU-04"}, "'status' is null, not one of"),
    ("GPU-04 fail", "\"GPU-04 fail\", not an object"),
])
def test_one_bad_verdict_among_good_ones_is_left_out_and_named(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                               record: Any, problem: str) -> None:
    folder = _run(tmp_path / "run", [GOOD[0], record, GOOD[1]])
    code, out, err = _report(capsys, folder)
    assert code == 0 and out == f"report: {folder / 'report.html'}\n"
    (line,) = err.splitlines()
    assert line.startswith(f"burnin report: {folder / 'verdicts.json'}: record 2 is not a verdict ({problem}"), line
    assert line.endswith(": left out of the report")
    page = (folder / "report.html").read_text(encoding="utf-8")
    assert '<p class="warning">' + f"{folder / 'verdicts.json'}: record 2 is not a verdict" in page
    assert "<code>GPU-10</code>" in page and "<code>5</code>" not in page and "<code>None</code>" not in page


def test_render_writes_its_warnings_where_it_is_told(tmp_path: Path) -> None:
    folder = _run(tmp_path / "run", [*GOOD, {"node": "n1", "check": None, "status": "pass"}])
    err = io.StringIO()
    render(folder, err=err)
    assert err.getvalue().count("\n") == 1 and "record 3 is not a verdict" in err.getvalue()


@pytest.mark.parametrize(("text", "message"), [
    ('[{"node": "n1", "check": 5, "status": "fail"}]',
     "verdicts.json: no record is a verdict (record 1: 'check' is 5, not a check id)"),
    ('[null, null]', "verdicts.json: no record is a verdict (record 1: null, not an object)"),
    ('{"node": "n1"}', "verdicts.json is not a list of verdicts"),
    ("[{", "verdicts.json is not readable JSON: "),
])
def test_a_verdicts_file_that_is_not_burnins_is_one_line_and_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str) -> None:
    folder = _run(tmp_path / "run", text)
    code, _, err = _report(capsys, folder)
    assert code == 2 and len(err.splitlines()) == 1 and f"{folder / message}" in err, err


def test_no_verdicts_file_or_an_empty_one_is_a_report_of_the_gate(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for verdicts in (None, []):
        folder = _run(tmp_path / str(verdicts), verdicts)
        assert _report(capsys, folder)[::2] == (0, "")


def test_a_gate_whose_node_has_no_decision_is_one_line_and_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _run(tmp_path / "run", GOOD)
    gate = json.loads((folder / "gate.json").read_text(encoding="utf-8"))
    gate["nodes"]["n2"] = "rejected"
    (folder / "gate.json").write_text(json.dumps(gate), encoding="utf-8")
    code, _, err = _report(capsys, folder)
    assert code == 2 and err.strip().endswith("gate.json is not a gate document (node n2: no decision object)")


def test_the_counts_shown_are_the_nodes_own(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _run(tmp_path / "run", GOOD)
    gate = json.loads((folder / "gate.json").read_text(encoding="utf-8"))
    del gate["summary"]
    (folder / "gate.json").write_text(json.dumps(gate), encoding="utf-8")
    assert _report(capsys, folder)[0] == 0
    assert "<title>burnin: 1 of 2 nodes rejected</title>" in (folder / "report.html").read_text(encoding="utf-8")


def test_node_names_that_are_no_host_names_are_shown_as_given(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    verdicts = [{"node": "a!b", "check": "GPU-10", "status": "fail"}, {"node": "gpu[", "check": "GPU-10",
                                                                       "status": "pass"}]
    folder = _run(tmp_path / "run", verdicts, nodes=("gpu[", "n2", "a!b"))
    code, _, err = _report(capsys, folder)
    assert code == 0 and err == ""
    page = (folder / "report.html").read_text(encoding="utf-8")
    assert "<td><code>a!b</code></td>" in page  # the check's failed-on cell (ClusterShell would say "a")
    assert 'Admitted: <code class="pass">a!b,gpu[</code>' in page


@pytest.mark.parametrize("gate", ['{"nodes": []}', "[]", "{"])
def test_a_gate_that_is_no_gate_document_is_one_line_and_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], gate: str) -> None:
    folder = _run(tmp_path / "run", GOOD)
    (folder / "gate.json").write_text(gate, encoding="utf-8")
    code, _, err = _report(capsys, folder)
    assert code == 2 and len(err.splitlines()) == 1 and str(folder / "gate.json") in err, err
