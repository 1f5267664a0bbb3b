"""`burnin diff` and TREND findings on hand-built histories; `burnin reliability` seeded with Llama 3's rate."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from history_db_support import add_run, verdict

from burnin.cli.main import main
from burnin.history.compare import default_pair, diff, falling, trends
from burnin.history.query import runs
from burnin.history.store import Store

DAY = 86400.0
AT = 1_790_000_000.0


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _night(store: Store, night: int, busbw: dict[str, float | None], **statuses: str) -> int:
    rows = []
    for node, value in busbw.items():
        status = statuses.get(node, "pass" if value is not None else "incomplete")
        rows.append(verdict(node, "NCCL-03", status, value, "GB/s", measured="" if value is None else f"{value} GB/s"))
        rows.append(verdict(node, "GPU-10", "pass"))
    return add_run(store, AT + night * DAY, rows)


def test_diff_names_only_what_changed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "h.sqlite"
    with Store(path) as store:
        _night(store, 0, {"n1": 362.0, "n2": 360.0, "n3": 361.0, "n4": 359.0})
        add_run(store, AT + 1 * DAY, [
            verdict("n1", "NCCL-03", "pass", 338.0, "GB/s"), verdict("n1", "GPU-10", "pass"),
            verdict("n2", "NCCL-03", "pass", 355.0, "GB/s"), verdict("n2", "GPU-10", "fail",
                                                                      reason="GPU-10 gpu3 17/18 NVLink links active"),
            verdict("n3", "NCCL-03", "incomplete"), verdict("n3", "GPU-10", "pass"),
            verdict("n4", "NCCL-03", "pass", 359.5, "GB/s"), verdict("n4", "GPU-10", "pass"),
        ])
        before, after = default_pair(store)
        changes = diff(store, before, after)
    assert list(changes.newly_failing) == ["n2"] and changes.newly_failing["n2"][0].check == "GPU-10"
    assert changes.newly_incomplete == {"n3": ["NCCL-03"]}
    assert changes.newly_admitted == []
    assert [m.text() for m in changes.moved] == ["n1 NCCL-03 362 -> 338 GB/s (-6.6%)"]
    code, out, _ = _cli(capsys, "diff", "--history", str(path))
    assert code == 0
    assert "moved n1 NCCL-03 362 -> 338 GB/s (-6.6%)" in out
    assert "newly failing n2: GPU-10" in out and "GPU-10 gpu3 17/18 NVLink links active" in out
    assert "n4" not in out  # 359 -> 359.5: within the tolerance, and nothing else changed
    code, out, _ = _cli(capsys, "diff", "2", "1", "--history", str(path))  # the other way round
    assert "newly admitted: n[2-3]" in out and "moved n1 NCCL-03 338 -> 362 GB/s (+7.1%)" in out


def test_the_default_pair_is_the_last_run_and_the_latest_over_the_same_nodes(tmp_path: Path) -> None:
    with Store(tmp_path / "h.sqlite") as store:
        first = _night(store, 0, {"n1": 1.0, "n2": 1.0})
        _night(store, 1, {"n9": 1.0})  # another rack between them
        last = _night(store, 2, {"n1": 1.0, "n2": 1.0})
        assert [r.id for r in default_pair(store)] == [first, last]
        partial = _night(store, 3, {"n1": 1.0, "n2": 1.0})
        store.db.execute("UPDATE runs SET partial = 1 WHERE id = ?", (partial,))
        assert [r.id for r in default_pair(store)] == [first, last]  # a -k run judged a subset: no night of its own


def test_two_nights_of_which_the_second_never_ended_say_its_nodes_are_incomplete(tmp_path: Path) -> None:
    with Store(tmp_path / "h.sqlite") as store:
        _night(store, 0, {"n1": 362.0, "n2": 360.0})
        add_run(store, AT + DAY, [verdict("n1", "NCCL-03", "pass", 362.0, "GB/s")], finished=False)
        recorded = runs(store)
        changes = diff(store, recorded[0], recorded[1])
    assert changes.newly_incomplete == {"n1": ["RUN-END"]}  # n2: never judged by the killed run, not compared
    assert changes.only_before == ["n2"]
    assert recorded[1].state == "incomplete (never ended: killed?)"


def _falling_nights(store: Store, nights: int, per_night: float, node: str = "sim04") -> None:
    for night in range(nights):
        _night(store, night, {node: 362.0 * (1 - per_night) ** night, "sim01": 362.0 + (night % 2)})


def test_busbw_falling_2_percent_a_night_over_5_nights_is_a_trend_while_it_still_passes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "h.sqlite"
    with Store(path) as store:
        _falling_nights(store, 5, 0.02)
        found = trends(store)
    assert [(t.node, t.check, t.status) for t in found] == [("sim04", "NCCL-03", "pass")]
    assert found[0].text() == ("TREND sim04 NCCL-03 362 -> 333.9 GB/s over the last 5 runs (-7.8%, -1.9% per run), "
                               "still passing")
    code, out, _ = _cli(capsys, "history", "--trends", "--history", str(path))
    assert code == 0 and "TREND sim04 NCCL-03 362 -> 333.9 GB/s" in out and "sim01" not in out
    code, out, _ = _cli(capsys, "history", "sim04", "--history", str(path))
    assert code == 0 and "TREND sim04 NCCL-03" in out and len(re.findall(r"run \d+ +admitted", out)) == 5


def test_a_missing_measurement_is_never_a_trend(tmp_path: Path) -> None:
    with Store(tmp_path / "h.sqlite") as store:
        for night, value in enumerate([362.0, 354.8, None, 340.7, 333.9]):
            _night(store, night, {"sim04": value})
        assert trends(store) == []
        _night(store, 5, {"sim04": math.nan})  # NaN is no measurement either
        assert trends(store) == []


@pytest.mark.parametrize("values", [
    [362.0, 360.0, 361.0, 359.0, 360.5],  # noise
    [362.0, 369.0, 376.0, 383.0, 390.0],  # rising
    [362.0, 300.0, 362.0, 300.0, 290.0],  # falling in all, but not steadily
    [362.0, 360.0, 358.0, 356.0, 354.0],  # steady but 2.2% in all: within the tolerance
    [362.0, 354.0],  # too short
    [0.0, 0.0, 0.0, 0.0, 0.0],
])
def test_what_is_no_trend(values: list[float | None]) -> None:
    assert falling(values) is None


def test_a_steady_fall_is_one() -> None:
    assert falling([362.0, 354.8, 347.7, 340.7, 333.9]) == pytest.approx(-7.03, abs=0.005)
    assert falling([100.0, 99.0, 97.0, 96.5, 94.0]) is not None  # uneven steps, all down


def test_reliability_seeded_with_llama_3s_rate_gives_its_job_mttf(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """419 unexpected interruptions in 54 days on 16,384 GPUs (2,048 nodes of 8): ~3.1 h at 16,384 GPUs."""
    path = tmp_path / "h.sqlite"
    nodes = [f"gpu{i:04d}" for i in range(2048)]
    end = AT + 54 * DAY
    with Store(path) as store:
        store.db.execute("BEGIN")
        first = store.add_run(kind="run", started=end - 54 * DAY - 60, out_dir="/start", nodes=len(nodes))
        last = store.add_run(kind="run", started=end - 60, out_dir="/end", nodes=len(nodes))
        store.db.execute("COMMIT")
        store.finish_run(first, finished=end - 54 * DAY, decisions=[(n, True, [], [], "") for n in nodes])
        store.finish_run(last, finished=end, decisions=[(n, True, [], [], "") for n in nodes])
        for i in range(419):  # each interruption: a drain that a repair (a later admission) ends
            at = end - 54 * DAY + (i + 0.5) * 54 * DAY / 419
            store.add_action(at=at, node=nodes[(i * 7) % 2048], action="drain",
                             check_ids=["GPU-04" if i % 2 else "GPU-01"], source="seed")
            store.add_action(at=at + 1, node=nodes[(i * 7) % 2048], action="resume", source="seed")
    code, out, err = _cli(capsys, "reliability", "--no-slurm-events", "--history", str(path), "--since", "3650d")
    assert code == 0, err
    mttf = {int(n): float(h) for n, h in re.findall(r"job MTTF at (\d+) GPUs: ([\d.]+) h", out)}
    assert mttf[16384] == pytest.approx(3.09, abs=0.05)
    assert mttf[1024] == pytest.approx(16 * mttf[16384], rel=0.01)
    assert "failures: 419 attributed; 3.79 per 1000 node-days" in out
    assert "GPU 1.89" in out and "HBM/ECC 1.90" in out


def test_too_few_runs_of_a_node_are_no_trend(tmp_path: Path) -> None:
    with Store(tmp_path / "h.sqlite") as store:
        _falling_nights(store, 4, 0.03)
        assert trends(store) == []
        assert [t.node for t in trends(store, last=4)] == ["sim04"]
        assert [t.node for t in trends(store, node="sim04", last=4)] == ["sim04"]
        assert trends(store, node="sim01", last=4) == [] and trends(store, node="nobody") == []


@pytest.mark.parametrize("values", [
    [362.0, 354.8, None, 340.7, 333.9],  # a night that measured nothing in the middle
    [10.0, 5.0, 0.0],  # a throughput of 0 fails its check; no fall to follow
])
def test_a_series_with_a_hole_is_no_trend(values: list[float | None]) -> None:
    assert falling(values) is None


def test_short_and_small_steady_falls_are_trends() -> None:
    assert falling([100.0, 90.0, 80.0]) == pytest.approx(-10.0)
    assert falling([1.0, 0.9, 0.8, 0.7, 0.6]) == pytest.approx(-0.1)


def test_a_diff_of_two_equal_runs_says_no_change_and_small_values_compare(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "h.sqlite"
    with Store(path) as store:
        _night(store, 0, {"n1": 362.0, "n2": 0.5, "n3": 0.0}, n3="fail")
        _night(store, 1, {"n1": 362.0, "n2": 0.5, "n3": 0.0}, n3="fail")
        _night(store, 2, {"n1": 362.0, "n2": 1.0, "n3": 300.0})
    code, out, _ = _cli(capsys, "diff", "1", "2", "--history", str(path))
    assert code == 0 and out.splitlines()[1:] == ["no change"]
    code, out, _ = _cli(capsys, "diff", "2", "3", "--history", str(path))
    assert out.splitlines()[1:] == ["newly admitted: n3", "moved n2 NCCL-03 0.5 -> 1 GB/s (+100.0%)"]


def _fleet_night(store: Store, day: float, broken: dict[str, str]) -> int:
    """Nodes n1..n4 judged on ``day``; ``broken``: node -> the reason its GPU-04 failed."""
    rows = [verdict(node, "GPU-04", "fail" if node in broken else "pass", reason=broken.get(node, ""))
            for node in ("n1", "n2", "n3", "n4")]
    return add_run(store, AT + day * DAY, rows)


def test_reliability_names_repeat_offenders_by_gpu_and_counts_repairs(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "h.sqlite"
    with Store(path) as store:
        _fleet_night(store, 0, {})
        _fleet_night(store, 1, {"n1": "GPU-04 gpu3 Xid 79", "n2": "GPU-04 gpu1 Xid 79"})
        _fleet_night(store, 2, {"n1": "GPU-04 gpu3 Xid 79"})  # the same outage: not repaired yet
        _fleet_night(store, 3, {})
        _fleet_night(store, 5, {"n1": "GPU-04 gpu3 Xid 79", "n2": "GPU-04 gpu5 Xid 79"})
        _fleet_night(store, 7, {})
        store.add_action(at=AT + 8 * DAY, node="n4", action="evict", check_ids=["GPU-04"], reason="Xid 79")
        store.add_action(at=AT + 8.5 * DAY, node="n4", action="resume")
        _fleet_night(store, 9, {})
    code, out, err = _cli(capsys, "reliability", "--no-slurm-events", "--since", "3650d", "--gpus", "8",
                          "--history", str(path))
    assert code == 0, err
    lines = out.splitlines()
    # 4 nodes x 9 days observed; out: n1 2 + 2 days, n2 1 + 2 days, n4 half a day (evicted, then resumed)
    assert lines[0].startswith("burnin reliability: 4 nodes, 7 runs, 28.5 node-days in the pool")
    assert lines[1] == "failures: 5 attributed; 175.44 per 1000 node-days"
    assert lines[2] == "per 1000 node-days by category: GPU 175.44"
    assert lines[3].startswith("job MTTF at 8 GPUs: 136.8 h (1/(n*r)); ETTR 99.5% with a checkpoint every 1.0 h")
    assert lines[4] == "MTTR 1.5 d; availability 79.2%"
    assert "n1 GPU-04 gpu3 (2 times, " in lines[5] and "n2" not in lines[5]
    assert lines[6] == "lemons (>= 3 failures within 30.0 d): none"


def test_a_fleet_that_never_failed_has_no_job_mttf(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "h.sqlite"
    with Store(path) as store:
        _fleet_night(store, 0, {})
        _fleet_night(store, 1, {})
    code, out, _ = _cli(capsys, "reliability", "--no-slurm-events", "--since", "3650d", "--history", str(path))
    assert code == 0
    assert "failures: 0 attributed; 0.00 per 1000 node-days" in out
    assert "job MTTF at 1024 GPUs: - (1/(n*r)); ETTR 100.0%" in out


def test_one_run_is_no_node_day_yet(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "h.sqlite"
    with Store(path) as store:
        _fleet_night(store, 0, {"n1": "GPU-04 gpu3 Xid 79"})
    code, out, _ = _cli(capsys, "reliability", "--no-slurm-events", "--since", "3650d", "--history", str(path))
    assert code == 0 and "failures: 1 attributed; - per 1000 node-days" in out


def test_the_first_order_ettr() -> None:
    from burnin.history.reliability import ettr, job_mttf_s

    assert ettr(None, 3600, 600) == 1.0
    assert ettr(36000, 3600, 600) == pytest.approx(1 - 2400 / 36000)
    assert ettr(1000, 3600, 600) == 0.0
    assert job_mttf_s(8, 0.0) is None and job_mttf_s(2, 0.5) == DAY


def test_reliability_with_nothing_in_the_period_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "h.sqlite"
    with Store(path) as store:
        _fleet_night(store, 0, {})
    code, _, err = _cli(capsys, "reliability", "--no-slurm-events", "--since", "1d", "--history", str(path))
    assert code == 2 and err.count("\n") == 1 and "no complete run recorded since" in err
