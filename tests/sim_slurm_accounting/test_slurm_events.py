"""``burnin reliability`` folds in Slurm's node events from a real slurmdbd (``sacctmgr show event``): drains
with a burnin reason and an operator's reason count as failures with their categories and MTTR, a drain burnin
recorded itself is not counted twice, and a Slurm without accounting is one line."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from burnin.cli.slurm_events import EVENTS_ENV, EventsUnavailable, read_events
from burnin.history.document import duration_text
from burnin.history.store import Store
from burnin.parsers.sacctmgr import EVENT_FORMAT, SlurmEvent, parse_sacctmgr_events
from burnin.transport.slurm import SlurmClient

WAIT_S = 120.0  # a failure limit on slurmdbd recording what slurmctld sends it, never a measurement
BURNIN = [sys.executable, "-m", "burnin.cli.main"]
OURS = "burnin: GPU-04 gpu3 Xid 79 (lab)"
RECORDED = "burnin: IB-02 mlx5_2 down (lab)"
OPERATOR = "fan replaced | by ops"


def _scontrol(client: SlurmClient, *args: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not (result := client.run(["scontrol", "update", *args])).ok:  # refused while a node is not responding
        assert time.monotonic() < deadline, result.describe_failure()
        time.sleep(0.5)


def _events_when(client: SlurmClient, env: dict[str, str], since: float, done: str,
                 ready: Callable[[list[SlurmEvent]], bool]) -> list[SlurmEvent]:
    deadline = time.monotonic() + WAIT_S
    found: list[SlurmEvent] = []
    while time.monotonic() < deadline:
        found = read_events(client, since, environ=env)
        if ready(found):
            return found
        time.sleep(0.5)
    pytest.fail(f"slurmdbd did not record {done} within {WAIT_S:g} s: {found}")


def test_slurm_drains_count_as_failures_with_categories_and_mttr(
        accounting_lab: dict[str, str], tmp_path: Path) -> None:
    env = accounting_lab
    client = SlurmClient({"SLURM_CONF": env["SLURM_CONF"], **EVENTS_ENV})
    since = time.time() - 60
    history = tmp_path / "history.sqlite"
    with Store(history) as store:  # a run admitted every node an hour ago
        run = store.add_run(kind="run", started=time.time() - 3600, out_dir="/lab", nodes=3)
        store.finish_run(run, finished=time.time() - 3540, decisions=[(n, True, [], [], "")
                                                                      for n in ("sim01", "sim02", "sim03")])
    _scontrol(client, "NodeName=sim01", "State=DRAIN", f"Reason={OURS}")
    _scontrol(client, "NodeName=sim02", "State=DRAIN", f"Reason={OPERATOR}")
    _scontrol(client, "NodeName=sim03", "State=DRAIN", f"Reason={RECORDED}")
    with Store(history) as store:  # as burnin's gate records a drain it took
        store.add_action(at=time.time(), node="sim03", action="drain", check_ids=["IB-02"], reason=RECORDED,
                         source="burnin run")
    _events_when(client, env, since, "three drains", lambda found: len(found) == 3)
    _scontrol(client, "NodeName=sim01", "State=RESUME")
    events = _events_when(client, env, since, "sim01's resume",
                          lambda found: any(e.node == "sim01" and e.end is not None for e in found))

    # the real output, as burnin parses it: reasons whole (a separator in one), open events without an end
    raw = client.run(["sacctmgr", "--parsable2", "show", "event", "Event=Node", "Start=now-1hour",
                      f"format={','.join(EVENT_FORMAT)}"], timeout=60)
    assert raw.ok, raw.describe_failure()
    (tmp_path / "sacctmgr-events.txt").write_text(raw.stdout, encoding="utf-8")
    parsed = {e.node: e for e in parse_sacctmgr_events(raw.stdout).node_events()}
    assert {n: (e.reason, e.state, e.open) for n, e in parsed.items()} == {
        "sim01": (OURS, "DRAIN", False), "sim02": (OPERATOR, "DRAIN", True), "sim03": (RECORDED, "DRAIN", True)}

    done = subprocess.run([*BURNIN, "reliability", "--history", str(history), "--since", "1d", "--gpus", "8"],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[1].startswith("failures: 3 attributed;")  # sim03 once: burnin's record and Slurm's event are one
    categories = lines[2].removeprefix("per 1000 node-days by category: ")
    assert [part.split()[0] for part in categories.split(", ")] == ["GPU", "IB", "other"]
    sim01 = next(e for e in events if e.node == "sim01")
    assert sim01.end is not None
    assert f"MTTR {duration_text((sim01.end - sim01.start).total_seconds())};" in done.stdout  # the one repair
    assert lines[-1] == ("Slurm node events (sacctmgr): 3 read, 2 counted as failures, 1 drains burnin had "
                         "recorded, 0 neither down nor drained or begun before the period")


def test_a_slurm_without_accounting_is_one_line(accounting_lab: dict[str, str], tmp_path: Path) -> None:
    """The plain lab's slurm.conf (accounting_storage/none): sacctmgr refuses, reliability says so once."""
    env = accounting_lab
    conf = Path(env["SLURM_CONF"]).read_text(encoding="utf-8").splitlines()
    plain = tmp_path / "slurm.conf"
    plain.write_text("\n".join([line for line in conf if not line.startswith("AccountingStorage")]
                               + ["AccountingStorageType=accounting_storage/none"]) + "\n", encoding="utf-8")
    history = tmp_path / "history.sqlite"
    with Store(history) as store:
        run = store.add_run(kind="run", started=time.time() - 600, out_dir="/lab", nodes=1)
        store.finish_run(run, finished=time.time() - 540, decisions=[("sim01", True, [], [], "")])
    with pytest.raises(EventsUnavailable, match="accounting_storage"):
        read_events(SlurmClient({"SLURM_CONF": str(plain), **EVENTS_ENV}), time.time() - 60,
                    environ={**env, "SLURM_CONF": str(plain)})
    done = subprocess.run([*BURNIN, "reliability", "--history", str(history), "--since", "1d"],
                          env={**env, "SLURM_CONF": str(plain)}, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    said = [line for line in done.stdout.splitlines() if "Slurm" in line]
    assert len(said) == 1 and said[0].startswith("Slurm node events: not available (You are not running a "
                                                 "supported accounting_storage plugin"), said
