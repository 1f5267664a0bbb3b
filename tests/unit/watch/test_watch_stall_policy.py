"""A stall found by the detector, handled by the daemon: alert records it, drain goes through Slurm and the breaker."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import pytest
from watch_support import FakeSlurm

from burnin.breaker import state
from burnin.breaker.budget import Allowance, Settings
from burnin.watch.actions import SlurmActor
from burnin.watch.daemon import WatchConfig, Watcher
from burnin.watch.events import Action, Kind, Policy, WatchEvent
from burnin.watch.settings import StallSettings
from burnin.watch.stall import GpuSample, Sample, Stall, StallDetector
from burnin.watch.stallwatch import stall_details

SETTINGS = StallSettings(interval_s=10, after_s=60, policy="drain")


def stall_event(now: float) -> WatchEvent:
    """The event the sampling loop emits for a stall the detector found over 70 s of samples."""
    detector = StallDetector(SETTINGS)
    busy = tuple(GpuSample(i, 100.0, 70.0, 700.0, 1980, 1) for i in range(8))
    found = [detector.feed(Sample(now - 70 + 10 * i, busy, (("mlx5_0/1/port_xmit_data", 7),))) for i in range(8)]
    stall = next(r for r in found if isinstance(r, Stall))
    return WatchEvent("sampler", Kind.STALL, "", None, stall.describe(), stall.at,
                      details=stall_details(stall, "sim01", SETTINGS))


def watcher(tmp_path: Path, slurm: FakeSlurm, policy: Action) -> tuple[Watcher, io.StringIO]:
    out = io.StringIO()
    config = WatchConfig(node="sim01", state_dir=tmp_path / "state", kernel_log=None, use_nvml=False,
                         policy=Policy(stall=policy))
    actor = SlurmActor("sim01", client=slurm, out=out, poll_s=0.001)
    return Watcher(config, actor=actor, out=out, err=io.StringIO(), background=lambda work: work()), out


@pytest.fixture
def breaker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BURNIN_STATE_DIR", str(tmp_path / "breaker"))
    return tmp_path / "breaker"


def test_alert_records_the_stall_and_leaves_the_node_and_its_job_alone(tmp_path: Path, breaker: Path) -> None:
    slurm = FakeSlurm(jobs=["77"])
    w, out = watcher(tmp_path, slurm, Action.RECORD)
    entry = w.handle(stall_event(time.time()))
    assert entry is not None and (entry["action"], entry["check"]) == ("record", "NCCL-05")
    assert entry["stall"]["since"] <= entry["stall"]["found_at"] - SETTINGS.after_s
    assert slurm.calls == [] and "ALERT NCCL-05 collective stalled: 8 GPUs" in out.getvalue()
    journal = [json.loads(line) for line in (tmp_path / "state" / "events.jsonl").read_text().splitlines()]
    assert [e["kind"] for e in journal] == ["stall"]


def test_drain_asks_the_breaker_first_and_drains_once_it_has_room(tmp_path: Path, breaker: Path) -> None:
    state.save(settings=Settings(nodes=0, percent=0.0))  # the fleet's budget is spent
    slurm = FakeSlurm(jobs=["77"])
    w, out = watcher(tmp_path, slurm, Action.DRAIN)
    held = w.handle(stall_event(time.time()))
    assert held is not None and held["action"] == "drain" and held["out_of_pool"] is False
    assert held["steps"][0]["command"] == "# held by the breaker"
    assert "State=DRAIN" not in " ".join(" ".join(c) for c in slurm.calls)
    assert [h["by"] for h in state.read_held(0.0)] == ["watch"]
    state.save(allowance=Allowance(1, time.time() - 1, time.time() + 600))  # an operator allows one more
    w.clock = lambda: time.time() + 3  # the daemon's retry, due 2 s later
    w._retry_due(w.clock())
    assert slurm.state == "MIXED+DRAIN" and slurm.reason.startswith("burnin: NCCL-05 collective stalled")
    assert "scontrol requeue" not in [" ".join(c[:2]) for c in slurm.calls]  # drained: the job is not requeued
    assert "sim01 DRAIN NCCL-05 collective stalled: 8 GPUs" in out.getvalue()
