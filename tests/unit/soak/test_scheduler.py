"""The soak loop on fake nodes and a simulated clock: fail at once, others go on, restarts, checkpoint and resume."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from burnin.facts import Facts
from burnin.soak.clock import SimClock
from burnin.soak.monitor import Event, Limits
from burnin.soak.nodes import HoldEnded
from burnin.soak.plan import SoakSettings
from burnin.soak.scheduler import Soak, SoakContext, View
from burnin.soak.state import DONE, FAILED, RUNNING, NodeProgress, SoakState, Store
from burnin.transport.base import CommandResult

HOUR = 3600.0
XID_LINE = "[{stamp:.6f}] NVRM: Xid (PCI:0000:1b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
SETTINGS = SoakSettings.model_validate({"dcgm": {"enabled": False}, "nccl": {"enabled": False},
                                        "cpu": {"enabled": False}, "disk": {"enabled": False}})
CTX = SoakContext(settings=SETTINGS, limits=Limits(), gpu_names=("gpu0",), bus_names={"0000:1b:00": "gpu0"},
                  compute_hcas=(), sockets={0: 2})


class FakeNodes:
    """Two GPU-less-than-real nodes: facts and gpu_burn outputs made up from the clock."""

    def __init__(self, clock: Callable[[], float], *, xid_at: dict[str, float] | None = None,
                 reboot_at: dict[str, float] | None = None, lost_at: float | None = None,
                 slurm_says: str | None = "job 7 CANCELLED") -> None:
        """``lost_at``: from then on nothing reaches the nodes (their allocation was cancelled), and :meth:`ended`
        answers ``slurm_says`` (None: Slurm could not say)."""
        self.nodes = ["n1", "n2"]
        self.clock = clock
        self.xid_at = xid_at or {}
        self.reboot_at = reboot_at or {}
        self.lost_at = float("inf") if lost_at is None else lost_at
        self.slurm_says = slurm_says
        self.asked: list[float] = []
        self.commands: list[tuple[float, tuple[str, ...], tuple[str, ...]]] = []

    def ended(self) -> str | None:
        self.asked.append(self.clock())
        return self.slurm_says if self.clock() >= self.lost_at else None

    def run(self, nodes: Sequence[str], argv: Sequence[str], *, timeout: float,
            stdin: bytes | None = None) -> dict[str, CommandResult]:
        self.commands.append((self.clock(), tuple(nodes), tuple(argv)))
        if self.clock() >= self.lost_at:
            return {n: CommandResult(n, tuple(argv), None, "", "", 0.1, error="srun: error: job 7 expired")
                    for n in nodes}
        out = "GPU 0: H100 (UUID: GPU-1)\n" + "".join(
            f"{10 * k}.0%  proc'd: {k} (400000 Gflop/s)   errors: 0   temps: 60 C\n" for k in range(1, 11))
        out += "Tested 1 GPUs:\n\tGPU 0: OK\n"
        return {n: CommandResult(n, tuple(argv), 0, out, "", 0.1) for n in nodes}

    def sample(self, *, timeout: float, nodes: Sequence[str] | None = None) -> dict[str, Facts]:
        t = self.clock()
        if t >= self.lost_at:
            return {n: Facts.unreachable_node(n, "srun: error: job 7 expired") for n in self.nodes}
        return {n: Facts(n, self._facts(n, t)) for n in self.nodes}

    def _facts(self, node: str, t: float) -> dict[str, Any]:
        rebooted = t >= self.reboot_at.get(node, float("inf"))
        uptime = (t - self.reboot_at[node] if rebooted else 50000.0 + t)
        log = ""
        if t >= self.xid_at.get(node, float("inf")):
            log = XID_LINE.format(stamp=50000.0 + self.xid_at[node]) + "\n"
        gpu = {"index": 0, "bus_id": "0000:1b:00.0", "temperature_c": 60, "temperature_thresholds": {"gpu_max": 85},
               "clock_event_reasons": 0, "ecc_errors": {"volatile_corrected": 0, "volatile_uncorrected": 0,
                                                        "sram_aggregate_uncorrected": 0},
               "remapped_rows": {"pending": False, "failure": False}, "nvlink": []}
        return {"sources": {}, "nvml": {"gpus": [gpu]},
                "gpu_telemetry": {"gpus": [{"index": 0, "power_mw": 650000, "pcie_replay": 0}]},
                "host_health": {"uptime_s": uptime, "boot_id": "second" if rebooted else "first",
                                "edac_present": True, "edac": {"mc0": {"ce_count": 0, "ue_count": 0}}},
                "commands": {"kernel-events": {"stdout": log, "exit_status": 0, "error": None}}}

    def close(self) -> None:
        pass


class Recorder:
    def __init__(self) -> None:
        self.views: list[View] = []

    def update(self, view: View) -> None:
        self.views.append(view)

    def close(self) -> None:
        pass


def soak(tmp_path: Path, *, duration: float = 4 * HOUR, interval: float = 600.0, stop_at: float | None = None,
         state: SoakState | None = None, ctx: SoakContext = CTX,
         **faults: Any) -> tuple[Soak, FakeNodes, list[tuple[str, list[Event]]]]:
    store = Store(tmp_path)
    state = state or SoakState(command={}, duration_s=duration, interval_s=interval,
                               nodes={n: NodeProgress(n) for n in ("n1", "n2")})

    def advance(t: float) -> None:
        if stop_at is not None and t >= stop_at:
            raise KeyboardInterrupt("killed")

    clock = SimClock(state.now, advance)
    nodes = FakeNodes(clock.now, **faults)
    fatal: list[tuple[str, list[Event]]] = []
    samples, results = store.samples(state), store.results(state)
    run = Soak(nodes, state, store, clock, ctx, sink=Recorder(), on_fatal=lambda n, e: fatal.append((n, e)),
               samples=samples, results=results)
    return run, nodes, fatal


def test_healthy_nodes_soak_their_duration(tmp_path: Path) -> None:
    run, nodes, fatal = soak(tmp_path)
    run.run()
    assert {p.status for p in run.state.nodes.values()} == {DONE} and not fatal
    assert run.state.finished and run.state.now == 4 * HOUR
    assert [s.t for s in run.samples["n1"]] == [600.0 * k for k in range(25)]
    assert {r.stage for r in run.results["n1"]} == {"gpu"}
    # a simulated stage's commands run when its time is up, and report the stage's whole span
    assert [t for t, _, _ in nodes.commands] == [HOUR, 2 * HOUR, 3 * HOUR, 4 * HOUR]
    assert [(r.start, r.end) for r in run.results["n1"]] == [(k * HOUR, (k + 1) * HOUR) for k in range(4)]
    assert Store(tmp_path).load().finished


def test_a_fatal_event_fails_the_node_at_once_and_the_others_go_on(tmp_path: Path) -> None:
    run, nodes, fatal = soak(tmp_path, xid_at={"n2": 3000.0})
    run.run()
    n1, n2 = run.state.nodes["n1"], run.state.nodes["n2"]
    assert (n1.status, n2.status) == (DONE, FAILED)
    assert [(n, [(e.check, e.t) for e in events]) for n, events in fatal] == [("n2", [("GPU-04", 3000.0)])]
    assert n2.end_t == 3000.0 and n2.fatal[0].reason.startswith("GPU-04 gpu0 Xid 79")
    assert max(s.t for s in run.samples["n2"]) == 3000.0  # sampled no more after the failure
    later = [names for t, names, _ in nodes.commands if t > 3000.0]
    assert later and all(names == ("n1",) for names in later)  # stressed no more either
    failed_views = [v for v in run.sink.views if v.events]  # type: ignore[attr-defined]
    assert [(v.now, [e.node for e in v.events]) for v in failed_views] == [(3000.0, ["n2"])]


def test_a_reboot_restarts_the_node_clock(tmp_path: Path) -> None:
    run, _, fatal = soak(tmp_path, reboot_at={"n1": 2 * HOUR})
    run.run()
    n1 = run.state.nodes["n1"]
    assert not fatal and n1.status == DONE and n1.attempt == 1 and n1.start_t == 2 * HOUR
    assert n1.restarts == ["+02:00:00: clock restarted, the node rebooted (boot id changed)"]
    assert n1.end_t == 6 * HOUR and run.state.nodes["n2"].end_t == 4 * HOUR
    assert {s.attempt for s in run.samples["n1"] if s.t >= 2 * HOUR} == {1}


def test_a_killed_soak_resumes_to_the_same_end(tmp_path: Path) -> None:
    whole, _, _ = soak(tmp_path / "whole", xid_at={"n2": 5000.0})
    whole.run()
    first, _, _ = soak(tmp_path / "cut", xid_at={"n2": 5000.0}, stop_at=2.5 * HOUR)
    with pytest.raises(KeyboardInterrupt):
        first.run()
    kept = (tmp_path / "cut" / "samples.jsonl").read_text().splitlines()
    state = Store(tmp_path / "cut").load()
    assert not state.finished and state.now < 2.5 * HOUR and state.running is not None
    counted = state.logged["samples.jsonl"]
    assert 0 < counted <= len(kept)
    resumed, _, _ = soak(tmp_path / "cut", xid_at={"n2": 5000.0}, state=state)
    resumed.run()
    final = (tmp_path / "cut" / "samples.jsonl").read_text().splitlines()
    assert final[:counted] == kept[:counted]  # the samples before the kill are kept
    assert final == (tmp_path / "whole" / "samples.jsonl").read_text().splitlines()
    assert (tmp_path / "cut" / "results.jsonl").read_text() == (tmp_path / "whole" / "results.jsonl").read_text()
    assert [p.to_json() for p in resumed.state.nodes.values()] == [p.to_json() for p in whole.state.nodes.values()]


def test_a_soak_whose_allocation_ended_stops_there_and_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    run, nodes, fatal = soak(tmp_path, lost_at=1800.0)
    with pytest.raises(HoldEnded, match=r"^the soak's allocation ended at \+00:30:00 of 04:00:00: job 7 CANCELLED$"):
        run.run()
    assert nodes.asked == [1800.0]  # Slurm is asked once every node failed, not on every round
    state = Store(tmp_path).load()
    assert not state.finished and not fatal
    assert [s.t for s in run.samples["n1"]] == [0.0, 600.0, 1200.0]  # the round that reached nobody is not kept
    assert {p.status for p in state.nodes.values()} == {RUNNING}
    resumed, _, _ = soak(tmp_path, state=state)  # a new allocation
    resumed.run()
    assert {p.status for p in resumed.state.nodes.values()} == {DONE} and resumed.state.finished
    assert all(s.ok for s in resumed.samples["n1"])


def test_a_disk_step_the_allocation_s_end_cut_short_is_not_kept_and_runs_again(tmp_path: Path) -> None:
    """The allocation ends before the disk step (the first of the rotation): every node's smart-log fails, Slurm
    says why, and the soak stops before keeping the step's errors: resumed, it runs the step again."""
    disk = SoakSettings.model_validate({"dcgm": {"enabled": False}, "nccl": {"enabled": False},
                                        "cpu": {"enabled": False}, "disk": {"devices": ["/dev/nvme0"]}})
    ctx = SoakContext(settings=disk, limits=Limits(), gpu_names=("gpu0",), bus_names={"0000:1b:00": "gpu0"},
                      compute_hcas=(), sockets={0: 2})
    run, nodes, _ = soak(tmp_path, duration=HOUR, lost_at=0.0, ctx=ctx)
    Store(tmp_path).save(run.state)  # as `burnin soak` saves it before its first step
    with pytest.raises(HoldEnded, match=r"ended at \+00:00:00 of 01:00:00: job 7 CANCELLED$"):
        run.run()
    assert nodes.asked == [0.0] and nodes.commands[0][2][:2] == ("nvme", "smart-log")
    results = tmp_path / "results.jsonl"
    assert run.results == {"n1": [], "n2": []} and not (results.exists() and results.read_text().strip())
    resumed, again, _ = soak(tmp_path, duration=HOUR, state=Store(tmp_path).load(), ctx=ctx)
    resumed.run()
    assert again.commands[0][2][:2] == ("nvme", "smart-log")  # the step, run again
    assert resumed.results["n1"][0].stage == "disk"
    assert not [e for r in resumed.results["n1"] for e in r.errors if "expired" in e]


class _SdcCutShort(FakeNodes):
    """The allocation ends as the first GPU stage ends: that stage's commands answered, its SDC round reaches
    nobody (and from then on Slurm says the job was cancelled)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        super().__init__(clock)
        self.gone = False

    def ended(self) -> str | None:
        self.asked.append(self.clock())
        return "job 7 CANCELLED" if self.gone else None

    def sample(self, *, timeout: float, nodes: Sequence[str] | None = None, sources: str | None = None
               ) -> dict[str, Facts]:
        if sources is not None and "sdc" in sources:
            self.gone = True
        if self.gone:
            return {n: Facts.unreachable_node(n, "srun: error: job 7 expired") for n in nodes or self.nodes}
        return super().sample(timeout=timeout, nodes=nodes)


class _SdcMissesOne(FakeNodes):
    """Every SDC round misses n2 (its own trouble: the allocation holds)."""

    def sample(self, *, timeout: float, nodes: Sequence[str] | None = None, sources: str | None = None
               ) -> dict[str, Facts]:
        facts = super().sample(timeout=timeout, nodes=nodes)
        if sources is not None and "sdc" in sources:
            facts["n2"] = Facts.unreachable_node("n2", "the collector timed out")
        return facts


def _sdc_and_disk_context() -> SoakContext:
    from burnin.topology import find_topology

    settings = SoakSettings.model_validate({"dcgm": {"enabled": False}, "nccl": {"enabled": False},
                                            "cpu": {"enabled": False}, "disk": {"devices": ["/dev/nvme0"]}})
    return SoakContext(settings=settings, limits=Limits(), gpu_names=("gpu0",), bus_names={"0000:1b:00": "gpu0"},
                       compute_hcas=(), sockets={0: 2}, topology=find_topology("hgx-h100-8gpu"))


def test_steps_that_reached_some_node_ask_slurm_nothing(tmp_path: Path) -> None:
    """Disk steps that every node answered (their smart-log unreadable: the node's own trouble, kept as an error)
    and SDC rounds that one node missed: the allocation holds, and Slurm is never asked."""
    state = SoakState(command={}, duration_s=3 * HOUR, interval_s=600.0,
                      nodes={n: NodeProgress(n) for n in ("n1", "n2")})
    clock = SimClock(state.now, lambda t: None)
    nodes = _SdcMissesOne(clock.now)
    store = Store(tmp_path)
    run = Soak(nodes, state, store, clock, _sdc_and_disk_context(), sink=Recorder(),
               samples=store.samples(state), results=store.results(state))
    run.run()
    assert run.state.finished and nodes.asked == []
    stages = [r.stage for r in run.results["n2"]]
    assert "disk" in stages and "sdc" in stages and "gpu" in stages, stages


def test_an_sdc_round_the_allocation_s_end_cut_short_is_not_kept(tmp_path: Path) -> None:
    from burnin.topology import find_topology

    sdc = CTX.settings.model_copy(update={"gpu": CTX.settings.gpu.model_copy(update={"sdc": True})})
    ctx = SoakContext(settings=sdc, limits=Limits(), gpu_names=("gpu0",), bus_names={"0000:1b:00": "gpu0"},
                      compute_hcas=(), sockets={0: 2}, topology=find_topology("hgx-h100-8gpu"))
    state = SoakState(command={}, duration_s=2 * HOUR, interval_s=600.0,
                      nodes={n: NodeProgress(n) for n in ("n1", "n2")})
    clock = SimClock(state.now, lambda t: None)
    nodes = _SdcCutShort(clock.now)
    run = Soak(nodes, state, Store(tmp_path), clock, ctx, sink=Recorder(),
               samples=Store(tmp_path).samples(state), results=Store(tmp_path).results(state))
    with pytest.raises(HoldEnded, match=r"ended at \+01:00:00 of 02:00:00: job 7 CANCELLED$"):
        run.run()
    assert nodes.asked == [HOUR]  # asked once, by the round that reached nobody
    assert [r.stage for r in run.results["n1"]] == ["gpu"]  # the stage measured before the end; no GPU-14 record


def test_a_soak_goes_on_while_slurm_cannot_say_its_allocation_ended(tmp_path: Path) -> None:
    """Every node unreadable while the controller does not answer: the soak goes on (each round asks again), and
    what it could not measure is incomplete at the end, never a pass."""
    run, nodes, _ = soak(tmp_path, duration=HOUR, lost_at=1800.0, slurm_says=None)
    run.run()
    assert nodes.asked == [1800.0, 2400.0, 3000.0, 3600.0, 3600.0]  # each unread round, and the gpu stage's end
    assert run.state.finished and not any(s.ok for s in run.samples["n1"] if s.t >= 1800.0)


def test_lines_the_state_does_not_count_are_dropped_on_resume(tmp_path: Path) -> None:
    store = Store(tmp_path)
    state = SoakState(command={}, duration_s=HOUR, interval_s=60.0, nodes={"n1": NodeProgress("n1")})
    store.append(state, "samples.jsonl", [{"node": "n1", "t": 0.0}])
    state.nodes["n1"].samples = 1  # as the scheduler counts it
    store.save(state)
    with (tmp_path / "samples.jsonl").open("a") as handle:
        handle.write('{"node": "n1", "t": 60.0}\n{"node": "n1", "t"')  # appended, never counted; then torn
    loaded = store.load()
    assert [r["t"] for r in store.read(loaded, "samples.jsonl")] == [0.0]
    assert (tmp_path / "samples.jsonl").read_text() == '{"node":"n1","t":0.0}\n'
    loaded.logged["samples.jsonl"] = 3
    with pytest.raises(Exception, match="holds 1 complete records, the state counts 3"):
        store.read(loaded, "samples.jsonl")


def test_running_status_is_never_left_behind(tmp_path: Path) -> None:
    run, _, _ = soak(tmp_path, duration=HOUR, interval=900.0)
    run.run()
    assert RUNNING not in {p.status for p in run.state.nodes.values()}


def test_on_real_time_a_stage_runs_in_a_thread_while_the_loop_samples(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import threading
    import time

    from burnin.soak import scheduler
    from burnin.soak.clock import RealClock

    monkeypatch.setattr(scheduler, "MIN_CHUNK_S", 0.2)
    clock = RealClock(step_s=0.02)
    nodes = FakeNodes(clock.now)
    inner_run = nodes.run
    threads: set[str] = set()

    def slow_run(nodes_: Sequence[str], argv: Sequence[str], **kw: Any) -> dict[str, CommandResult]:
        threads.add(threading.current_thread().name)
        time.sleep(0.6)  # a stage that takes its time, while samples go on
        return inner_run(nodes_, argv, **kw)

    nodes.run = slow_run  # type: ignore[method-assign]
    state = SoakState(command={}, duration_s=1.5, interval_s=0.25, nodes={n: NodeProgress(n) for n in ("n1", "n2")})
    run = Soak(nodes, state, Store(tmp_path), clock, CTX, samples={}, results={})
    run.run()
    assert {p.status for p in state.nodes.values()} == {DONE}
    assert all(name.startswith("burnin-soak") for name in threads)
    times = [s.t for s in run.samples["n1"]]
    assert len(times) >= 5 and times[-1] >= 1.5
    gpu = [r for r in run.results["n1"] if r.stage == "gpu"]
    assert gpu and all(r.end - r.start >= 0.6 for r in gpu)
    assert {s.stage for s in run.samples["n1"][1:-1]} == {"gpu"}  # sampled while the stage ran


def test_on_real_time_a_stage_that_outlives_the_last_sample_is_waited_for(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A real stage sized to the time left ends after the nodes' end samples: its record still counts."""
    import threading

    from burnin.soak import scheduler
    from burnin.soak.clock import RealClock

    monkeypatch.setattr(scheduler, "MIN_CHUNK_S", 0.2)
    clock = RealClock(step_s=0.02)
    nodes = FakeNodes(clock.now)
    ended = threading.Event()
    inner_run, inner_sample = nodes.run, nodes.sample
    duration = 0.5

    asked: list[list[str]] = []

    def sample(**kw: Any) -> dict[str, Facts]:
        asked.append(list(kw["nodes"]))
        facts = inner_sample(**kw)
        if clock.now() >= duration:
            ended.set()  # the end samples are taken: every node is done
        return facts

    def run_past_the_end(nodes_: Sequence[str], argv: Sequence[str], **kw: Any) -> dict[str, CommandResult]:
        assert ended.wait(timeout=60), "the loop never took the end samples"
        return inner_run(nodes_, argv, **kw)

    nodes.run = run_past_the_end  # type: ignore[method-assign]
    nodes.sample = sample  # type: ignore[method-assign]
    state = SoakState(command={}, duration_s=duration, interval_s=0.1, nodes={n: NodeProgress(n) for n in ("n1", "n2")})
    run = Soak(nodes, state, Store(tmp_path), clock, CTX, samples={}, results={})
    run.run()
    assert {p.status for p in state.nodes.values()} == {DONE} and state.finished
    gpu = [r for r in run.results["n1"] if r.stage == "gpu"]
    assert len(gpu) == 1 and gpu[0].end >= duration  # the stage ran on after the end samples, and was recorded
    assert state.nodes["n1"].results == 1 and state.running is None
    assert max(s.t for s in run.samples["n1"]) < gpu[0].end
    assert asked and all(asked)  # no sample round (of nobody) while the loop waited for the stage


def test_a_soak_shorter_than_the_gpu_stage_still_reads_the_drives_first(tmp_path: Path) -> None:
    settings = SETTINGS.model_copy(update={"disk": SETTINGS.disk.model_copy(update={"enabled": True})})
    store = Store(tmp_path)
    state = SoakState(command={}, duration_s=HOUR / 2, interval_s=600.0,
                      nodes={n: NodeProgress(n) for n in ("n1", "n2")})
    clock = SimClock(0.0)
    nodes = FakeNodes(clock.now)
    ctx = SoakContext(settings=settings, limits=Limits(), gpu_names=("gpu0",), bus_names={"0000:1b:00": "gpu0"},
                      compute_hcas=(), sockets={0: 2})
    run = Soak(nodes, state, store, clock, ctx, samples={}, results={})
    run.run()
    assert nodes.commands[0][2][:2] == ("nvme", "list") and len(nodes.commands) == 2  # then the gpu stage
    assert [r.stage for r in run.results["n1"]] == ["disk", "gpu"]  # the gpu stage (60 min) filled the rest


def test_gate_slurm_drains_a_failed_node_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from burnin.cli import soak_cmd
    from burnin.gate import slurm

    drained: list[tuple[str, str, bool]] = []
    monkeypatch.setattr(slurm, "drain",
                        lambda node, reason, dry_run=False, **_: drained.append((node, reason, dry_run)))
    on_fatal = soak_cmd._drainer(soak_cmd._gate("slurm"), True)
    on_fatal("sim03", [Event("GPU-04", "sim03", "gpu3", 36000.0, True, "Xid 79 (GPU has fallen off the bus)",
                             "no fatal Xid")])
    assert drained == [("sim03", "GPU-04 gpu3 Xid 79 (GPU has fallen off the bus) at +10:00:00", True)]
    assert soak_cmd._drainer(soak_cmd._gate("none"), False) is None


def test_live_table_and_log_lines(tmp_path: Path) -> None:
    import io

    from rich.console import Console

    from burnin.soak.progress import LineProgress, LiveProgress
    from burnin.soak.scheduler import NodeView

    event = Event("GPU-04", "n2", "gpu3", 3000.0, True, "Xid 79 [x]\x1b[31m", "no fatal Xid")
    view = View(3600.0, 4 * HOUR, "gpu", (NodeView("n1", RUNNING, 3600.0, ""),
                                          NodeView("n2", FAILED, 3000.0, event.reason)), (event,))
    text = io.StringIO()
    LineProgress(text).update(view)
    assert text.getvalue().splitlines() == [
        "soak FAILED n2: GPU-04 gpu3 Xid 79 [x]\\x1b[31m at +00:50:00 (expected no fatal Xid)",
        "soak +01:00:00/04:00:00 (25%) stage gpu: 1 running, 0 done, 1 failed (n2 GPU-04)"]
    screen = io.StringIO()
    live = LiveProgress(Console(file=screen, force_terminal=True, width=160))
    live.update(view)
    live.close()
    drawn = screen.getvalue()
    assert "n1" in drawn and "running" in drawn and "Xid 79 [x]" in drawn and "\x1b[31m" not in drawn.split("Xid")[1]


def test_summary_folds_what_a_stopped_node_could_not_show() -> None:
    from burnin.cli.soak_cmd import _condense

    why = "not judged: the node's soak stopped at +01:30:00 when GPU-04 failed"
    xid = "GPU-04 gpu3 Xid 79 at +01:30:00"
    reasons = (xid, f"BRN-02 {why}", f"BRN-03 {why}", "BRN-06 soak stopped", f"BRN-05 {why}")
    assert _condense(reasons) == [xid, f"BRN-02,BRN-03,BRN-05 {why}", "BRN-06 soak stopped"]


def test_a_soak_whose_allocation_ends_before_its_first_step_can_be_resumed(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch,
                                                                          h100_topology: Any) -> None:
    """`burnin soak` checkpoints before its first step: an allocation cancelled at once stops the soak (exit 3,
    `--resume` promised), and the checkpoint `--resume` reads is there, nothing soaked yet."""
    import burnin.soak.nodes
    from burnin.cli.soak_cmd import _soak

    nodes = FakeNodes(lambda: 0.0, lost_at=0.0)  # nothing reaches the nodes from the start: Slurm says it ended

    class Dispatcher:
        def __init__(self) -> None:
            self.nodes = ["n1", "n2"]

        def launcher(self, facts: dict[str, Facts]) -> object:
            return object()  # open_nodes (below) holds nothing through it

    monkeypatch.setattr(burnin.soak.nodes, "open_nodes", lambda launcher, names, **kw: (nodes, None))
    state = SoakState(command={"sample_timeout": 30.0, "dry_run": False}, duration_s=4 * HOUR, interval_s=600.0,
                      nodes={})
    with pytest.raises(HoldEnded, match=r"ended at \+00:00:00 of 04:00:00: job 7 CANCELLED$"):
        _soak(state, Store(tmp_path), Dispatcher(), lambda t: None, SETTINGS,  # type: ignore[arg-type]
              h100_topology, tmp_path, on_fatal=None)
    saved = Store(tmp_path).load()
    assert saved.now == 0.0 and not saved.finished
    assert {name: progress.status for name, progress in saved.nodes.items()} == {"n1": RUNNING, "n2": RUNNING}
