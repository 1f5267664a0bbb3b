"""The history database: schema versions, files it cannot use, hostile values, concurrent writers."""

from __future__ import annotations

import math
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from history_db_support import add_run, verdict

from burnin.cli.main import main
from burnin.history.measure import measurement
from burnin.history.query import problems, runs, timeline
from burnin.history.store import MIGRATIONS, SCHEMA_VERSION, HistoryError, Store

AT = 1_790_000_000.0


def test_a_new_file_is_migrated_once_to_the_current_schema_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "state" / "history.sqlite"
    with Store(path) as store:
        assert store.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        add_run(store, AT, [verdict("n1", "GPU-10")])
    with Store(path) as again:  # opening it again migrates nothing and keeps what is there
        assert [r.id for r in runs(again)] == [1]


def test_a_newer_schema_is_refused_and_left_as_it_is(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "history.sqlite"
    with Store(path) as store:
        store.db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    newer = rf"written by a newer burnin \(schema {SCHEMA_VERSION + 1}; this burnin reads up to {SCHEMA_VERSION}\)"
    with pytest.raises(HistoryError, match=newer):
        Store(path)
    assert main(["history", "n1", "--history", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "newer burnin" in err and "Traceback" not in err
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION + 1  # never migrated backwards
    raw.close()


@pytest.mark.parametrize("content", [b"not a database at all, just text\n" * 100, b"\x00" * 4096])
def test_a_file_that_is_not_sqlite_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            content: bytes) -> None:
    path = tmp_path / "history.sqlite"
    path.write_bytes(content)
    for argv in (["history", "n1"], ["diff"], ["reliability"], ["history", "--runs"]):
        assert main([*argv, "--history", str(path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"history {path}:" in err, err
    assert path.read_bytes() == content


def test_a_missing_history_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", "--history", str(tmp_path / "none.sqlite")]) == 2
    assert "no such file (no run recorded yet?)" in capsys.readouterr().err
    assert not (tmp_path / "none.sqlite").exists()


def test_hostile_values_are_stored_and_shown_never_crash(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    not_utf8 = b"gpu\xff01".decode("utf-8", "surrogateescape")
    huge = "x" * 5_000_000
    path = tmp_path / "history.sqlite"
    with Store(path) as store:
        add_run(store, AT, [
            verdict(not_utf8, "GPU-10", "fail", measured="17/18\x1b[31m", reason="GPU-10 \udcff down"),
            verdict("n2", "NCCL-03", "pass", math.nan, "GB/s"),
            verdict("n2", "NVL-01", "fail", math.inf, "GB/s", reason=huge),
            verdict("n3\n", "IB-02", "bogus-status", 1e308 * 10, "Gb/s"),
        ])
        values = dict(store.db.execute("SELECT check_id, value FROM verdicts"))
        assert set(values.values()) == {None}  # NaN and infinities are no measurement
        shown = problems(store, 1)
        assert {p.node for p in shown} == {"gpu\\udcff01", "n2", "n3\\x0a"}
        assert max(len(p.reason) for p in shown) <= 2000
        assert {p.check: p.status for p in shown}["IB-02"] == "incomplete"  # an unknown status never passes
        assert timeline(store, not_utf8).entries[0].state.failed == ["GPU-10"]
    assert main(["history", "n2", "--history", str(path)]) == 0
    assert "NVL-01" in capsys.readouterr().out


def test_a_measurement_is_a_throughput_in_the_measured_text() -> None:
    assert measurement("479.5 GB/s at 8 GiB (NVLS enabled)") == (479.5, "GB/s")
    assert measurement("group sim[01-08] 360.2 GB/s") == (360.2, "GB/s")
    assert measurement("GPUDirect min 386.1 Gb/s, host min 390.4 Gb/s over 8 HCAs") == (386.1, "Gb/s")
    assert measurement("400 Gb/sec (4X NDR)") == (400.0, "Gb/s")
    assert measurement("MFU 41% of 989 TFLOP/s BF16 dense") == (989.0, "TFLOP/s")
    for text in ("33 C (limit 85 C)", "18/18 NVLink links active", "", "nan GB/s", "-5 GB/s", "1e999 GB/s",
                 "12 GB/sx", None, 479.5, "x" * 3000 + " 5 GB/s"):
        assert measurement(text) is None, text


_WRITER = """
import sys
from pathlib import Path
from burnin.history.store import Store
path, name = Path(sys.argv[1]), sys.argv[2]
with Store(path) as store:
    for i in range(40):
        run = store.add_run(kind="run", started=1.79e9 + i, out_dir=f"/{name}/{i}")
        store.add_verdicts(run, [(f"{name}-{n}", f"C-{c}", "pass", 1.0, "GB/s", "", "", "")
                                 for n in range(5) for c in range(10)])
        store.finish_run(run, finished=1.79e9 + i + 1, decisions=[(f"{name}-{n}", True, [], [], "")
                                                                 for n in range(5)])
"""


@pytest.mark.proc  # two writer processes
def test_two_writers_at_once_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite"
    writers = [subprocess.Popen([sys.executable, "-c", _WRITER, str(path), name], stderr=subprocess.PIPE, text=True)
               for name in ("a", "b")]
    errors = [w.communicate(timeout=300)[1] for w in writers]
    assert [w.returncode for w in writers] == [0, 0], errors
    with Store(path) as store:
        assert store.db.execute("SELECT count(*) FROM runs WHERE finished IS NOT NULL").fetchone()[0] == 80
        assert store.db.execute("SELECT count(*) FROM verdicts").fetchone()[0] == 80 * 50
        assert store.db.execute("SELECT count(*) FROM decisions").fetchone()[0] == 80 * 5


def test_a_killed_run_keeps_what_it_judged_in_the_node_timeline(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "history.sqlite"
    with Store(path) as store:
        add_run(store, AT, [verdict("n1", "GPU-10"), verdict("n2", "GPU-10")])
        add_run(store, AT + 86400, [verdict("n1", "GPU-10", "fail", reason="GPU-10 gpu3 down"),
                                    verdict("n1", "IB-02", "incomplete", None, "Gb/s", reason="IB-02 no ibstat"),
                                    verdict("n1", "NCCL-03", "pass", 362.0, "GB/s")], finished=False)
        found = timeline(store, "n1")
        assert [e.state.verdict for e in found.entries] == ["admitted", "rejected"]
        killed = found.entries[1]
        assert (killed.state.failed, killed.state.incomplete) == (["GPU-10"], ["RUN-END", "IB-02"])
        assert [(p.check, p.status, p.value, p.unit) for p in killed.problems] == [
            ("GPU-10", "fail", None, None), ("IB-02", "incomplete", None, None)]
        assert len(timeline(store, "n2").entries) == 1  # the killed run never reached n2
        units = store.db.execute("SELECT count(*) FROM verdicts WHERE unit IS NOT NULL").fetchone()[0]
        assert units == 1
    assert main(["history", "n1", "--history", str(path)]) == 0
    out = capsys.readouterr().out
    assert "rejected: failed GPU-10; incomplete RUN-END,IB-02 [run incomplete (never ended: killed?)]" in out
    assert "    GPU-10 gpu3 down (expected expected)" in out
    assert "    IB-02 no ibstat (expected expected) [incomplete]" in out
    assert main(["history", "--check", "IB-02", "--history", str(path)]) == 0
    assert "failed 0 times and incomplete 1 times on 1 nodes, in 2 recorded runs" in capsys.readouterr().out
    assert main(["history", "--check", "GPU-99", "--history", str(path)]) == 2
    assert "check 'GPU-99' was never recorded in" in capsys.readouterr().err
    assert main(["history", "--runs", "--history", str(path)]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed[0] == f"burnin history --runs: 2 runs (history: {path})"
    assert "complete" in listed[1] and "incomplete (never ended: killed?)" in listed[2]
    assert main(["history", "--runs", "--trends", "--history", str(path)]) == 2


def test_a_history_of_schema_1_is_migrated_forward_keeping_its_runs(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite"
    old = sqlite3.connect(path)
    old.executescript(MIGRATIONS[0])
    old.execute("INSERT INTO runs (kind, started) VALUES ('run', 1.0)")
    old.execute("PRAGMA user_version = 1")
    old.commit()
    old.close()
    with Store(path) as store:
        assert store.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 2
        assert store.db.execute("SELECT kind FROM runs").fetchall() == [("run",)]
        assert store.add_incident(at=2.0, node="n1", kind="xid", check_id="GPU-04", action="record", origin="k")
        assert not store.add_incident(at=2.0, node="n1", kind="xid", origin="k")  # once per origin
