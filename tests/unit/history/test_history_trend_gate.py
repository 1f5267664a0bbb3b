"""A TREND failing the node by the site's choice (`burnin run --fail-on-trend`): the pure judge, the history read
and the recorder's hook, on hand-built histories."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from history_db_support import add_run, verdict

from burnin.history.measure import measurement
from burnin.history.recorder import RunRecorder
from burnin.history.store import Store
from burnin.history.trendgate import judge, past_measurements

AT = 1_790_000_000.0
DAY = 86400.0
FALLING = [362.0, 354.8, 347.7, 340.7]


def test_a_steady_fall_beyond_the_limit_fails_the_check_naming_node_series_and_limit() -> None:
    past = [(v, "GB/s") for v in FALLING]
    failure = judge("sim04", "NCCL-03", past, (333.9, "GB/s"), runs=5, limit=0.05)
    assert failure is not None and (failure.node, failure.check) == ("sim04", "NCCL-03")
    assert failure.reason == ("TREND sim04 NCCL-03 362 -> 354.8 -> 347.7 -> 340.7 -> 333.9 GB/s over 5 runs "
                              "(-7.8%, site limit -5%)")
    assert failure.measured == "362 -> 354.8 -> 347.7 -> 340.7 -> 333.9 GB/s over 5 runs"
    assert "5%" in failure.expected
    assert judge("sim04", "NCCL-03", past, (333.9, "GB/s"), runs=5, limit=0.08) is None  # within a site's 8%
    older = [(500.0, "GB/s"), *past]  # only the last runs count: the older, higher run changes nothing
    assert judge("sim04", "NCCL-03", older, (333.9, "GB/s"), runs=5, limit=0.05) == failure
    three = judge("sim04", "NCCL-03", past, (333.9, "GB/s"), runs=3, limit=0.03)
    assert three is not None and three.reason.startswith("TREND sim04 NCCL-03 347.7 -> 340.7 -> 333.9 GB/s over 3")


@pytest.mark.parametrize(("past", "current"), [
    ([(v, "GB/s") for v in FALLING[1:]], (333.9, "GB/s")),  # too few earlier runs: not judged
    ([(400.0, "GB/s"), (300.0, "GB/s"), (200.0, "GB/s")], (100.0, "GB/s")),  # too few, however steep the fall
    ([(362.0, "GB/s"), (None, None), (347.7, "GB/s"), (340.7, "GB/s")], (333.9, "GB/s")),  # one measured nothing
    ([(v, "GB/s") for v in FALLING], (333.9, "Gb/s")),  # another unit: not one series
    ([(v, None) for v in FALLING], (333.9, None)),  # no unit at all
    ([(v, "GB/s") for v in FALLING], (362.0, "GB/s")),  # back up: no steady fall
])
def test_what_is_never_a_trend_failure(past: list[tuple[float | None, str | None]],
                                       current: tuple[float | None, str | None]) -> None:
    assert judge("sim04", "NCCL-03", past, current, runs=5, limit=0.05) is None


def test_the_history_read_takes_the_nodes_earlier_judged_runs_oldest_first(tmp_path: Path) -> None:
    with Store(tmp_path / "h.sqlite") as store:
        for night, value in enumerate([400.0, 390.0, 380.0]):
            add_run(store, AT + night * DAY, [verdict("sim01", "IB-02", "pass", value, "Gb/s"),
                                              verdict("sim02", "IB-02", "pass", 400.0, "Gb/s")])
        add_run(store, AT + 3 * DAY, [verdict("sim01", "IB-02", "incomplete")])  # measured nothing
        dry = store.add_run(kind="run", started=AT + 4 * DAY, nodes=1)
        store.add_verdicts(dry, [verdict("sim01", "IB-02", "pass", 1.0, "Gb/s")])
        store.finish_run(dry, finished=AT + 4 * DAY, decisions=[("sim01", False, [], ["RUN"], "")], dry_run=True)
        probe = store.add_run(kind="probe", started=AT + 5 * DAY, nodes=1)
        store.add_verdicts(probe, [verdict("sim01", "IB-02", "pass", 2.0, "Gb/s")])
        store.finish_run(probe, finished=AT + 5 * DAY, decisions=[("sim01", True, [], [], "")])
        this = store.add_run(kind="run", started=AT + 6 * DAY, nodes=2)
        store.add_verdicts(this, [verdict("sim01", "IB-02", "pass", 3.0, "Gb/s")])
        series, counted = past_measurements(store, ["sim01", "sim02", "sim09"], runs=3, exclude_run=this)
        unfinished, _ = past_measurements(store, ["sim02"], runs=3, exclude_run=None)  # no run to leave out
    assert series[("sim01", "IB-02")] == [(390.0, "Gb/s"), (380.0, "Gb/s"), (None, None)]
    assert series[("sim02", "IB-02")] == [(400.0, "Gb/s")] * 3
    assert counted == {"sim01": 3, "sim02": 3, "sim09": 0}
    assert unfinished[("sim02", "IB-02")] == [(400.0, "Gb/s")] * 3


def test_a_gigatransfer_link_speed_is_a_measurement() -> None:
    assert measurement("32 GT/s x16") == (32.0, "GT/s")
    assert measurement("16 GT/s x16 (capable of 32 GT/s x16)") == (16.0, "GT/s")
    assert measurement("Gen5 x16") is None


def _outcome(node: str, check: str, status: str, measured: str) -> SimpleNamespace:
    return SimpleNamespace(node=node, check=check, status=status, measured=measured)


def test_the_recorder_judges_trends_only_when_the_site_asks(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    with Store(path) as store:
        for night, value in enumerate(FALLING):
            add_run(store, AT + night * DAY, [verdict("sim04", "NCCL-03", "pass", value, "GB/s"),
                                              verdict("sim01", "NCCL-03", "pass", 360.0, "GB/s")])
    outcomes = [_outcome("sim04", "NCCL-03", "pass", "333.9 GB/s at 8 GiB"),
                _outcome("sim01", "NCCL-03", "pass", "360.0 GB/s at 8 GiB"),
                _outcome("sim04", "GPU-10", "pass", "18/18 NVLink links active"),
                _outcome("sim05", "NCCL-03", "fail", "200.0 GB/s")]  # failing already: not judged again
    warnings: list[str] = []
    reported = RunRecorder.start(path, kind="run", out_dir=tmp_path, topology="t", nodes=["sim04"],
                                 warn=warnings.append)
    assert reported.pytest_burnin_more_outcomes(outcomes) == []  # the default: trends reported, never failing
    reported.finish(tmp_path)
    failing = RunRecorder.start(path, kind="run", out_dir=tmp_path, topology="t", nodes=["sim04"],
                                warn=warnings.append, trend_limit=0.05)
    found = failing.pytest_burnin_more_outcomes(outcomes)
    failing.finish(tmp_path)
    assert [(f.node, f.check) for f in found] == [("sim04", "NCCL-03")]
    assert found[0].reason.startswith("TREND sim04 NCCL-03 362 -> 354.8")
    assert warnings == []


def test_without_history_or_with_too_few_runs_a_trend_is_not_judged_and_said_once(tmp_path: Path) -> None:
    outcomes = [_outcome("sim04", "NCCL-03", "pass", "333.9 GB/s"), _outcome("sim05", "NCCL-03", "pass", "1 GB/s")]
    warnings: list[str] = []
    off = RunRecorder.start(None, kind="run", out_dir=tmp_path, topology="t", nodes=["sim04"], warn=warnings.append,
                            trend_limit=0.05)
    assert off.plugins == [off]  # handed to pytest although nothing is recorded: it says why no trend was judged
    assert off.pytest_burnin_more_outcomes(outcomes) == []
    assert warnings == ["burnin: TREND not judged on sim[04-05]: no history to read (BURNIN_HISTORY=off)"]
    assert RunRecorder.start(None, kind="run", out_dir=tmp_path, topology="t", nodes=[]).plugins == []
    warnings.clear()
    path = tmp_path / "h.sqlite"
    with Store(path) as store:
        for night, value in enumerate(FALLING[2:]):
            add_run(store, AT + night * DAY, [verdict("sim04", "NCCL-03", "pass", value, "GB/s")])
    short = RunRecorder.start(path, kind="run", out_dir=tmp_path, topology="t", nodes=["sim04"],
                              warn=warnings.append, trend_limit=0.05)
    assert short.pytest_burnin_more_outcomes(outcomes) == []
    short.finish(tmp_path)
    assert warnings == [f"burnin: TREND not judged on sim[04-05]: fewer than 4 earlier runs in {path}"]
