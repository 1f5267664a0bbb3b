"""The fleet's memory in PostgreSQL (issue 22 item 2): several controllers write one history.

Against a real server on loopback: two nightly `burnin run --sim 8` recording into it, `burnin diff` and
`burnin history` reading it; two writer processes at once lose nothing; a run killed mid-way keeps what it
judged; a newer schema is refused and left alone; a server that cannot be reached or a user without rights
is one line and exit 2 naming host and cause (never the password), and a run still writes its gate.json.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from burnin.cli.main import main
from burnin.history.query import timeline
from burnin.history.store import SCHEMA_VERSION, Store
from burnin_lab import postgres

AT = 1.79e9


def add_run(store: Store, at: float, rows: list[tuple[str, str, str, float | None, str | None, str, str, str]], *,
            finished: bool = True) -> int:
    """A run at ``at`` with these verdicts, its decisions following from them (``finished`` False: killed)."""
    run = store.add_run(kind="run", started=at, out_dir=f"/reports/{at:.0f}")
    store.add_verdicts(run, rows)
    if finished:
        nodes = sorted({row[0] for row in rows})
        store.finish_run(run, finished=at + 60, decisions=[
            (n, all(r[2] == "pass" for r in rows if r[0] == n), [r[1] for r in rows if r[0] == n and r[2] == "fail"],
             [r[1] for r in rows if r[0] == n and r[2] == "incomplete"], "") for n in nodes])
    return run


def verdict(node: str, check: str, status: str = "pass", value: float | None = None, unit: str | None = None,
            reason: str = "") -> tuple[str, str, str, float | None, str | None, str, str, str]:
    return (node, check, status, value, unit, "", "expected", reason or f"{check} {status}")


def burnin(*args: str, history: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BURNIN_HISTORY": history}
    return subprocess.run([sys.executable, "-m", "burnin.cli.main", *args], capture_output=True, text=True,
                          timeout=600, check=False, env=env)


def test_two_nights_recorded_in_postgresql_are_diffed_and_shown(pg_url: str, tmp_path: Path) -> None:
    healthy = burnin("run", "--sim", "8", "--out", str(tmp_path / "night1"), history=pg_url)
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    faulty = burnin("run", "--sim", "8", "--fault", "sim04:nvlink-down", "--fault", "sim06:ib-rate-200",
                    "--out", str(tmp_path / "night2"), history=pg_url)
    assert faulty.returncode == 1, faulty.stdout + faulty.stderr
    assert faulty.stderr == ""  # recorded without a warning
    diff = burnin("diff", "--json", history=pg_url)
    assert diff.returncode == 0, diff.stderr
    found = json.loads(diff.stdout)
    assert sorted(found["newly_failing"]) == ["sim04", "sim06"], found
    assert [c["check"] for c in found["newly_failing"]["sim04"]] == ["GPU-10"], found
    assert [c["check"] for c in found["newly_failing"]["sim06"]] == ["IB-02"], found
    shown = burnin("history", "sim04", history=pg_url)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].startswith("burnin history sim04: 2 runs (1 not admitted)"), shown.stdout
    assert postgres.PASSWORD not in shown.stdout  # the URL is shown without its password
    assert any("admitted" in line for line in lines[1:]) and any("rejected: failed GPU-10" in line for line in lines)


_WRITER = """
import sys
from burnin.history.store import Store
url, name = sys.argv[1], sys.argv[2]
with Store(url) as store:
    for i in range(25):
        run = store.add_run(kind="run", started=1.79e9 + i, out_dir=f"/{name}/{i}")
        store.add_verdicts(run, [(f"{name}-{n}", f"C-{c}", "pass", 1.0, "GB/s", "", "", "")
                                 for n in range(5) for c in range(10)])
        store.add_verdicts(run, [(f"{name}-0", "C-0", "fail", 2.0, "GB/s", "", "", "again")])  # kept: first wins
        store.finish_run(run, finished=1.79e9 + i + 1, decisions=[(f"{name}-{n}", True, [], [], "")
                                                                 for n in range(5)])
"""


def test_two_writer_processes_at_once_lose_nothing(pg_url: str) -> None:
    writers = [subprocess.Popen([sys.executable, "-c", _WRITER, pg_url, name], stderr=subprocess.PIPE, text=True)
               for name in ("a", "b")]
    errors = [w.communicate(timeout=300)[1] for w in writers]
    assert [w.returncode for w in writers] == [0, 0], errors
    with Store(pg_url) as store:
        assert store.db.execute("SELECT count(*) FROM runs WHERE finished IS NOT NULL").fetchone()[0] == 50
        assert store.db.execute("SELECT count(*) FROM verdicts").fetchone()[0] == 50 * 50
        assert store.db.execute("SELECT count(*) FROM verdicts WHERE status = 1").fetchone()[0] == 0
        assert store.db.execute("SELECT count(*) FROM decisions").fetchone()[0] == 50 * 5
        assert store.db.execute("SELECT count(*) FROM node_names").fetchone()[0] == 10  # each name once


def test_a_killed_run_keeps_what_it_judged_and_values_keep_their_precision(
        pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    with Store(pg_url) as store:
        add_run(store, AT, [verdict("n1", "NCCL-03", "pass", 362.123456789, "GB/s"), verdict("n2", "GPU-10")])
        run = add_run(store, AT + 86400, [verdict("n1", "GPU-10", "fail", reason="GPU-10 gpu3 down"),
                                          verdict("n1", "IB-02", "incomplete", None, "Gb/s", reason="no ibstat")],
                      finished=False)
        assert run > 1
        found = timeline(store, "n1")
        assert [e.state.verdict for e in found.entries] == ["admitted", "rejected"]
        assert (found.entries[1].state.failed, found.entries[1].state.incomplete) == (["GPU-10"],
                                                                                      ["RUN-END", "IB-02"])
        value = store.db.execute("SELECT value FROM verdicts WHERE value IS NOT NULL").fetchone()[0]
        assert value == 362.123456789  # double precision, not PostgreSQL's 4-byte REAL
    assert main(["history", "n1", "--history", pg_url]) == 0
    out = capsys.readouterr().out
    assert "rejected: failed GPU-10; incomplete RUN-END,IB-02 [run incomplete (never ended: killed?)]" in out


def test_a_newer_schema_is_refused_and_left_alone(pg_url: str, pg_server: postgres.Server,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    with Store(pg_url) as store:
        add_run(store, AT, [verdict("n1", "GPU-10")])
    database = pg_url.rsplit("/", 1)[1]
    postgres.admin(pg_server, f"UPDATE burnin_schema SET version = {SCHEMA_VERSION + 1}", database=database)
    assert main(["history", "--runs", "--history", pg_url]) == 2
    err = capsys.readouterr().err
    assert f"written by a newer burnin (schema {SCHEMA_VERSION + 1}" in err and err.count("\n") == 1, err
    assert postgres.admin(pg_server, "SELECT version FROM burnin_schema; SELECT count(*) FROM runs",
                          database=database).split() == [str(SCHEMA_VERSION + 1), "1"]


def test_a_server_that_cannot_be_reached_is_one_line_naming_host_and_cause(
        pg_server: postgres.Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    closed = postgres._free_port()  # nothing listens there
    url = f"postgresql://burnin:{postgres.PASSWORD}@127.0.0.1:{closed}/burnin"
    assert main(["history", "--runs", "--history", url]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"cannot connect to 127.0.0.1:{closed} (" in err, err
    assert postgres.PASSWORD not in err
    proc = burnin("run", "--sim", "2", "--out", str(tmp_path / "out"), history=url)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # the history never costs the run its verdicts
    assert proc.stderr.count("\n") == 1 and "not recorded" in proc.stderr and postgres.PASSWORD not in proc.stderr
    assert json.loads((tmp_path / "out" / "gate.json").read_text(encoding="utf-8"))["admitted"] == "sim[01-02]"


def test_a_user_without_rights_and_a_wrong_password_are_one_line(
        pg_url: str, pg_server: postgres.Server, capsys: pytest.CaptureFixture[str]) -> None:
    database = pg_url.rsplit("/", 1)[1]
    assert main(["history", "--runs", "--history", pg_server.url("stranger", database)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot connect to 127.0.0.1" in err and "permission denied" in err, err
    assert main(["history", "--runs", "--history", pg_server.url("burnin", database, "wrong")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "password authentication failed" in err and "wrong" not in err.split("(")[0]
