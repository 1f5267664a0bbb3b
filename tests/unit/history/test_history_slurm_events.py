"""Slurm's node events folded into `burnin reliability` (pure folding; the one line when they cannot be read).

Reading them from a real slurmdbd is tests/sim_slurm_accounting."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest
from history_db_support import add_run, verdict

from burnin.cli.main import main
from burnin.cli.slurm_events import EventsUnavailable, read_events
from burnin.history.reliability import reliability
from burnin.history.slurm_events import (
    SLURM_HOST,
    SLURM_OTHER,
    RecordedDrain,
    failed_checks,
    fold_events,
    out_of_pool,
)
from burnin.history.store import Store
from burnin.parsers.sacctmgr import SlurmEvent
from burnin.transport.slurm import SlurmClient

AT = 1_790_000_000.0
HOUR = 3600.0


def _event(node: str, start: float, end: float | None, reason: str, state: str = "DRAIN") -> SlurmEvent:
    stamp = lambda t: datetime.fromtimestamp(t, timezone.utc)  # noqa: E731
    return SlurmEvent("Node", node, stamp(start), None if end is None else stamp(end), state, "root(0)", reason, 1)


@pytest.mark.parametrize(("reason", "checks"), [
    ("burnin: GPU-04,IB-02 gpu3 Xid 79", ("GPU-04", "IB-02")),
    ("burnin: RUN the run could not vouch for the node", (SLURM_OTHER,)),
    ("Not responding", (SLURM_HOST,)),
    ("Kill task failed", (SLURM_HOST,)),
    ("fan replaced | by ops", (SLURM_OTHER,)),
    ("burnin:", (SLURM_OTHER,)),
    ("", (SLURM_OTHER,)),
])
def test_an_events_failed_checks_come_from_its_reason(reason: str, checks: tuple[str, ...]) -> None:
    assert failed_checks(reason) == checks


@pytest.mark.parametrize(("state", "out"), [("DRAIN", True), ("IDLE+DRAIN", True), ("DOWN*", True),
                                             ("MIXED+DRAIN", True), ("FAIL", True), ("IDLE", False),
                                             ("MAINT", False), ("REBOOT_ISSUED", False)])
def test_which_states_take_a_node_out(state: str, out: bool) -> None:
    assert out_of_pool(state) is out


def test_a_drain_burnin_recorded_is_not_counted_again_but_its_end_is_taken() -> None:
    ours = _event("n1", AT, AT + 2 * HOUR, "burnin: GPU-04 gpu3 Xid 79")
    theirs = _event("n2", AT, None, "fan replaced")
    recorded = [RecordedDrain("n1", AT + 4, ("GPU-04",), "burnin: GPU-04 gpu3 Xid 79 (cut differently)")]
    folded = fold_events([ours, theirs], recorded, since=AT - HOUR)
    assert (folded.read, folded.folded, folded.known, folded.ignored) == (2, 1, 1, 0)
    assert [(o.node, o.at, o.admitted, o.failed, o.source) for o in folded.observations] == [
        ("n1", AT + 2 * HOUR, True, (), "slurm"), ("n2", AT, False, (SLURM_OTHER,), "slurm")]


@pytest.mark.parametrize("recorded", [
    RecordedDrain("n1", AT + 301, ("GPU-04",), "burnin: GPU-04 x"),  # too long after
    RecordedDrain("n2", AT, ("GPU-04",), "burnin: GPU-04 x"),  # another node
    RecordedDrain("n1", AT, ("IB-02",), "burnin: IB-02 x"),  # another reason
])
def test_a_drain_that_does_not_match_is_counted(recorded: RecordedDrain) -> None:
    folded = fold_events([_event("n1", AT, None, "burnin: GPU-04 x")], [recorded], since=AT - HOUR)
    assert (folded.folded, folded.known) == (1, 0)


def test_events_begun_before_the_period_or_not_out_of_the_pool_count_nothing() -> None:
    folded = fold_events([_event("n1", AT - 2 * HOUR, AT + HOUR, "Not responding", "DOWN*"),
                          _event("n2", AT, AT + HOUR, "x", "IDLE")], [], since=AT - HOUR)
    assert (folded.read, folded.folded, folded.ignored) == (2, 0, 2)
    assert [(o.node, o.admitted) for o in folded.observations] == [("n1", True)]  # back in the period


def test_reliability_counts_slurm_events_with_their_categories_and_mttr(tmp_path: Path) -> None:
    with Store(tmp_path / "h.sqlite") as store:
        add_run(store, AT, [verdict(n, "GPU-04") for n in ("n1", "n2", "n3")])
        store.add_action(at=AT + 10 * HOUR + 3, node="n3", action="drain", check_ids=["IB-02"],
                         reason="burnin: IB-02 mlx5_2 down")
        events = [_event("n1", AT + 10 * HOUR, AT + 12 * HOUR, "burnin: GPU-04 gpu3 Xid 79"),
                  _event("n2", AT + 10 * HOUR, AT + 14 * HOUR, "Not responding", "DOWN*"),
                  _event("n3", AT + 10 * HOUR, AT + 11 * HOUR, "burnin: IB-02 mlx5_2 down")]
        found = reliability(store, since=AT - HOUR, slurm_events=events)
        without = reliability(store, since=AT - HOUR)
    assert found is not None and without is not None
    assert dict(found.by_category) == {"GPU": 1, "host": 1, "IB": 1}
    # n3's outage starts at burnin's record of its drain (3 s after Slurm's) and ends when Slurm saw it back
    assert found.fleet.failures == 3 and found.fleet.mttr_s == pytest.approx(((2 + 4 + 1) * HOUR - 3) / 3)
    assert found.slurm is not None and (found.slurm.folded, found.slurm.known) == (2, 1)
    assert without.fleet.failures == 1 and without.slurm is None  # n3's recorded drain alone


def _history(tmp_path: Path) -> Path:
    path = tmp_path / "h.sqlite"
    with Store(path) as store:
        add_run(store, AT, [verdict("n1", "GPU-04")])
        add_run(store, AT + HOUR, [verdict("n1", "GPU-04")])
    return path


def test_without_sacctmgr_reliability_says_so_in_one_line_and_goes_on(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no sacctmgr here
    assert main(["reliability", "--since", "3650d", "--history", str(_history(tmp_path))]) == 0
    out, err = capsys.readouterr()
    lines = [line for line in out.splitlines() if "Slurm" in line]
    assert lines == ["Slurm node events: not available (sacctmgr is not on PATH); these figures are burnin's "
                     "history alone"]
    assert out.startswith("burnin reliability: 1 nodes, 2 runs") and err == ""
    assert main(["reliability", "--since", "3650d", "--no-slurm-events", "--history", str(_history(tmp_path))]) == 0
    assert "Slurm" not in capsys.readouterr().out


def test_asked_for_slurm_events_that_cannot_be_read_is_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    code = main(["reliability", "--since", "3650d", "--slurm-events", "--history", str(_history(tmp_path))])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "Slurm node events (--slurm-events) not available: sacctmgr is not on PATH" in err


def test_without_a_slurm_configuration_sacctmgr_is_not_asked(tmp_path: Path) -> None:
    """sacctmgr would retry for a minute to find a slurm.conf: burnin looks first."""
    shim = tmp_path / "sacctmgr"
    shim.write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
    shim.chmod(0o755)
    client = SlurmClient()
    with pytest.raises(EventsUnavailable, match=r"SLURM_CONF=/nonexistent/slurm\.conf is not a file"):
        read_events(client, AT, environ={"PATH": str(tmp_path), "SLURM_CONF": "/nonexistent/slurm.conf"})
