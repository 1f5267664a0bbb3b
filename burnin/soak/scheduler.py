"""The soak's loop: stages on every node at once, a sample of every node each interval.

Each turn of the loop, at the clock's ``now``:

1. a stage that ended is read (:mod:`burnin.soak.results`) and the next one starts
   (DCGM diagnostics once, then the stress stages in turn), clipped to the time
   the nodes have left;
2. when a sample is due (every interval, and when a node's time is up) every
   running node is sampled and judged (:mod:`burnin.soak.monitor`): a fatal
   event fails the node at once (``on_fatal`` drains it under ``--gate
   slurm``) and it takes no further part; the others go on;
3. a node that rebooted (new boot id) or went unmonitored for longer than
   ``max_gap_intervals`` intervals restarts its clock: its soak counts again
   from then, its earlier samples are kept;
4. the state is saved (atomically) after every sample round and stage.

On real nodes a stage runs in a thread while the loop samples; on simulated
ones (a :class:`~burnin.soak.clock.SimClock`) a stage's commands run when its
simulated time is up, and the clock jumps from event to event. A real stage
sized to the time left outlives the nodes' last sample by its tools' start-up;
the loop waits for it (its steps' timeouts bound the wait, and the soak's
deadline ends it) so that its record, and the SDC round after a gpu stage,
count.

The soak declares what it will run when it holds its nodes (:func:`plan_items`:
one turn of each stage on every node); with ``--dry-run`` the launcher prints
that and holds nothing, so there is no loop: nothing runs on any node, no sample
is taken and no checkpoint written; every check is then incomplete
(:data:`burnin.soak.plan.DRY_RUN_REASON`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

from burnin.launch.base import Each, Note, PlanItem
from burnin.soak import plan
from burnin.soak.clock import Clock
from burnin.soak.monitor import Event, Limits, judge_sample
from burnin.soak.nodes import HoldEnded, SoakNodes
from burnin.soak.plan import Chunk, SoakSettings, hms
from burnin.soak.results import ChunkRecord, read_chunk
from burnin.soak.signals import NodeSample, read_sample
from burnin.soak.state import DONE, FAILED, HELD, RESULTS_LOG, RUNNING, SAMPLES_LOG, NodeProgress, SoakState, Store
from burnin.transport.base import CommandResult

if TYPE_CHECKING:
    from burnin.topology.model import Topology

MIN_CHUNK_S = 60.0
SDC_TIMEOUT_S = 180.0  # the SDC workload imports torch and tests every GPU: longer than a sample
DEADLINE_FACTOR = 3.0  # restarts may stretch a soak; past this many durations the rest is incomplete

StepResults = dict[str, list[tuple[str, CommandResult]]]


@dataclass(frozen=True)
class SoakContext:
    settings: SoakSettings
    limits: Limits
    gpu_names: tuple[str, ...]  # the topology's GPU names in bus order (CUDA and NVML order)
    bus_names: dict[str, str]  # PCI device -> GPU name
    compute_hcas: tuple[str, ...]
    sockets: dict[int, int]  # socket -> cores
    sample_timeout_s: float = 60.0
    topology: Topology | None = None  # GPU-14 judges the SDC rounds against it (None: not judged)


@dataclass(frozen=True)
class NodeView:
    name: str
    status: str
    elapsed_s: float
    reason: str


@dataclass(frozen=True)
class View:
    """What the progress display shows after each sample round."""

    now: float
    duration_s: float
    stage: str
    nodes: tuple[NodeView, ...]
    events: tuple[Event, ...] = ()  # fatal events of this round


class Sink(Protocol):
    """Progress output (burnin.soak.progress)."""

    def update(self, view: View) -> None:
        """After each sample round."""

    def close(self) -> None:
        """At the end."""


class NoProgress:
    def update(self, view: View) -> None:
        """Shows nothing."""

    def close(self) -> None:
        """Nothing to close."""


def execute(nodes: SoakNodes, chunk: Chunk, names: Sequence[str]) -> StepResults:
    """Every step of ``chunk`` on ``names``, one step after the other."""
    out: StepResults = {name: [] for name in names}
    for step in chunk.steps:
        results = nodes.run(names, step.argv, timeout=step.timeout_s, stdin=step.stdin)
        for name in names:
            out[name].append((step.name, results[name]))
    return out


@dataclass
class Running:
    chunk: Chunk
    nodes: list[str]
    start: float
    due: float  # when the stage should end (simulated clock: when its commands run)
    future: Future[StepResults] | None = None


@dataclass
class Soak:
    nodes: SoakNodes
    state: SoakState
    store: Store
    clock: Clock
    ctx: SoakContext
    sink: Sink = field(default_factory=NoProgress)
    on_fatal: Callable[[str, list[Event]], None] | None = None
    samples: dict[str, list[NodeSample]] = field(default_factory=dict)
    results: dict[str, list[ChunkRecord]] = field(default_factory=dict)
    running: Running | None = None
    _pool: ThreadPoolExecutor | None = None

    # -- loop -----------------------------------------------------------------------------

    def run(self) -> None:
        state = self.state
        for name in state.nodes:
            self.samples.setdefault(name, [])
            self.results.setdefault(name, [])
        self._resume_chunk()
        try:
            while True:
                now = self.clock.now()
                state.now = now
                self._finish_chunk(now)
                if self.running is None:
                    self._start_chunk(now)
                if self._sample_due(now):
                    self._sample_round(now)
                past_deadline = now >= DEADLINE_FACTOR * state.duration_s
                if past_deadline:
                    self._stop_at_deadline(now)
                if not self._active() and (self.running is None or past_deadline):
                    break  # a stage still running when the nodes' time is up is waited for (its record counts)
                self._save()
                self.clock.sleep_until(self._wake(now))
            state.finished = True
            self._save()
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
            self.sink.close()

    def _active(self) -> list[str]:
        return [n for n, p in self.state.nodes.items() if p.status == RUNNING]

    def _end_of(self, progress: NodeProgress) -> float:
        return progress.start_t + self.state.duration_s

    def _sample_due(self, now: float) -> bool:
        if not self._active():
            return False  # every node's time is up: the loop only waits for the stage still running
        if now >= self.state.next_sample:
            return True
        return any(self._end_of(self.state.nodes[n]) <= now for n in self._active())

    def _wake(self, now: float) -> float:
        times = [self.state.next_sample]
        times += [self._end_of(self.state.nodes[n]) for n in self._active()]
        if self.running is not None:
            times.append(self.running.due if self.clock.simulated else now + 1.0)
        later = [t for t in times if t > now]
        return min(later) if later else now + 1.0

    def _save(self) -> None:
        self.store.save(self.state)

    def _stages(self) -> list[str]:
        return stages(self.ctx)

    def _chunk(self, stage: str, seconds: float) -> Chunk:
        return chunk_for(self.ctx, stage, seconds)

    def _resume_chunk(self) -> None:
        """A simulated stage in progress at the checkpoint ends as it would have; a real one starts again."""
        saved = self.state.running
        if saved is None or self.running is not None:
            return
        self.state.running = None
        if not self.clock.simulated:
            return  # its processes ended with the controller: the loop starts the stage again
        chunk = self._chunk(str(saved["stage"]), float(saved["seconds"]))
        self.running = Running(chunk, [str(n) for n in saved["nodes"]], float(saved["start"]), float(saved["due"]))
        self.state.running = saved

    def _start_chunk(self, now: float) -> None:
        active = self._active()
        if not active:
            return
        left = max(self._end_of(self.state.nodes[n]) for n in active) - now
        settings = self.ctx.settings
        if settings.dcgm.enabled and not self.state.dcgm_done:
            chunk = self._chunk("dcgm", 0.0)
        else:
            stages = self._stages()
            if not stages or left < MIN_CHUNK_S:
                return
            stage = stages[self.state.rotation % len(stages)]
            if stage == "disk":  # quick, and per node: run here, then go on with the next stage
                self._disk(active, now)
                self.state.rotation += 1
                if stages == ["disk"]:
                    return
                stage = stages[self.state.rotation % len(stages)]
            chunk = self._chunk(stage, min(plan.stage_minutes(settings, stage) * 60, left))
        running = Running(chunk, active, now, now + chunk.seconds)
        self.state.running = {"stage": chunk.stage, "seconds": chunk.seconds, "start": now, "due": running.due,
                              "nodes": active}
        if not self.clock.simulated:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="burnin-soak")
            running.future = self._pool.submit(execute, self.nodes, chunk, active)
        self.running = running

    def _finish_chunk(self, now: float) -> None:
        running = self.running
        if running is None:
            return
        if running.future is not None:
            if not running.future.done():
                return
            outputs = running.future.result()
        elif now >= running.due:
            # a simulated stage runs its commands now: on the nodes that have not failed meanwhile
            still = [n for n in running.nodes if self.state.nodes[n].status != FAILED]
            outputs = execute(self.nodes, running.chunk, still)
        else:
            return
        if outputs and not any(result.ok for steps in outputs.values() for _, result in steps):
            self._stop_if_ended(now)  # before its record: a stage the allocation's end cut short runs again
        end = now if running.future is not None else running.due
        self.running = None
        self.state.running = None
        if running.chunk.stage == "dcgm":
            self.state.dcgm_done = True
        else:
            self.state.rotation += 1
        self._record(running.chunk, outputs, running.start, end)
        if running.chunk.stage == "gpu" and self.ctx.settings.gpu.sdc:
            self._sdc_round([n for n in outputs if self.state.nodes[n].status != FAILED], end)

    def _sdc_round(self, names: list[str], t: float) -> None:
        """GPU-14 while the GPUs are hot: the SDC workload on ``names``, judged across them (burnin.soak.sdc)."""
        from burnin.soak.nodes import SDC_SOURCES
        from burnin.soak.sdc import judge_round

        if not names:
            return
        topology = self.ctx.topology
        if topology is None:
            return
        facts = self.nodes.sample(timeout=max(SDC_TIMEOUT_S, self.ctx.sample_timeout_s), nodes=names,
                                  sources=f"{SDC_SOURCES},sdc-size={topology.sdc.size}")
        if all(facts.get(name) is None or facts[name].unreachable for name in names):
            self._stop_if_ended(t)  # before its record: a round the allocation's end cut short runs again
        records, fatal = judge_round(facts, topology, t, {n: self.state.nodes[n].attempt for n in names})
        self._keep_records(records)
        for name, events in fatal.items():
            progress = self.state.nodes[name]
            progress.events += events
            progress.status = FAILED
            progress.end_t = t
            if self.on_fatal is not None:
                self.on_fatal(name, events)
        if fatal:
            self.sink.update(self.view(tuple(e for events in fatal.values() for e in events)))

    def _record(self, chunk: Chunk, outputs: StepResults, start: float, end: float) -> None:
        records = [read_chunk(chunk, name, steps, start=start, end=end, attempt=self.state.nodes[name].attempt,
                              gpu_names=self.ctx.gpu_names)
                   for name, steps in outputs.items() if self.state.nodes[name].status != FAILED]
        self._keep_records(records)

    def _keep_records(self, records: Sequence[ChunkRecord]) -> None:
        self.store.append(self.state, RESULTS_LOG, [r.to_json() for r in records])
        for record in records:
            self.state.nodes[record.node].results += 1
            self.results[record.node].append(record)

    def _disk(self, active: list[str], now: float) -> None:
        """nvme smart-log on every device of every node (the first time: find the devices with nvme list)."""
        from burnin.errors import ParseError
        from burnin.parsers.nvme import parse_nvme_list

        configured = self.ctx.settings.disk.devices
        unknown = [n for n in active if self.state.nodes[n].disks is None]
        listing = {} if configured is not None else self.nodes.run(unknown, plan.disk_list_step().argv,
                                                                   timeout=plan.disk_list_step().timeout_s)
        errors: dict[str, str] = {}
        for name in unknown:
            if configured is not None:
                self.state.nodes[name].disks = list(configured)
                continue
            result = listing[name]
            try:
                if not result.ok:
                    raise ParseError("nvme-list", result.describe_failure())
                self.state.nodes[name].disks = list(parse_nvme_list(result.stdout))
            except ParseError as exc:
                errors[name] = f"nvme list: {exc}"
        groups: dict[tuple[str, ...], list[str]] = {}
        for name in active:
            if name not in errors:
                groups.setdefault(tuple(self.state.nodes[name].disks or ()), []).append(name)
        outputs: StepResults = {name: [] for name in active}
        for devices, names in groups.items():
            chunk = plan.disk_chunk(devices)
            for name, steps in execute(self.nodes, chunk, names).items():
                outputs[name] = steps
        answered = [name for name in active if any(result.ok for _, result in outputs[name])
                    or (name in listing and listing[name].ok)]
        if active and not answered:
            self._stop_if_ended(now)  # before its record: the step the allocation's end cut short runs again
        records = []
        for name in active:
            progress = self.state.nodes[name]
            if name in errors or not outputs[name]:
                why = errors.get(name, "nvme list found no NVMe device")
                records.append(ChunkRecord(name, "disk", now, now, progress.attempt, errors=(why,)))
            else:
                records.append(read_chunk(plan.disk_chunk(tuple(progress.disks or ())), name, outputs[name],
                                          start=now, end=now, attempt=progress.attempt, gpu_names=self.ctx.gpu_names))
        self._keep_records(records)

    # -- samples --------------------------------------------------------------------------

    def _sample_round(self, now: float) -> None:
        state = self.state
        active = self._active()
        facts = self.nodes.sample(timeout=self.ctx.sample_timeout_s, nodes=active)
        stage = self.running.chunk.stage if self.running is not None else ""
        fatal_now: list[Event] = []
        judged: list[tuple[NodeProgress, NodeSample, list[Event]]] = []
        for name in active:
            progress = state.nodes[name]
            node_facts = facts.get(name)
            if node_facts is None:
                from burnin.facts import Facts

                node_facts = Facts.unreachable_node(name, "no sample returned")
            sample = read_sample(node_facts, t=now, stage=stage, attempt=progress.attempt)
            if sample.ok:
                sample = self._check_interruption(progress, sample, now)
            judged.append((progress, sample, self._judge(progress, sample)))
        if judged and not any(sample.ok for _, sample, _ in judged):
            self._stop_if_ended(now)  # before the round is kept: samples of nodes no longer held say nothing
        self.store.append(state, SAMPLES_LOG, [sample.to_json() for _, sample, _ in judged])
        for progress, sample, events in judged:
            name = progress.name
            progress.samples += 1
            self.samples[name].append(sample)
            progress.events += events
            fatal = [e for e in events if e.fatal]
            if fatal:
                progress.status = FAILED
                progress.end_t = min(e.t for e in fatal)
                fatal_now += fatal
                if self.on_fatal is not None:
                    self.on_fatal(name, fatal)
            elif now >= self._end_of(progress):
                progress.status = DONE
                progress.end_t = now
        while state.next_sample <= now:
            state.next_sample += state.interval_s
        self.sink.update(self.view(tuple(fatal_now)))

    def _stop_if_ended(self, now: float) -> None:
        """Stop the soak (:class:`HoldEnded`) when its hold on the nodes ended: the checkpoint is the last one
        saved, so ``--resume`` goes on from there in a new allocation."""
        why = self.nodes.ended()
        if why is not None:
            raise HoldEnded(why, now, self.state.duration_s)

    def _check_interruption(self, progress: NodeProgress, sample: NodeSample, now: float) -> NodeSample:
        why = None
        if progress.boot_id and sample.boot_id and sample.boot_id != progress.boot_id:
            why = "the node rebooted (boot id changed)"
        elif progress.last_ok_t is not None:
            gap = now - progress.last_ok_t
            if gap > self.ctx.settings.tolerances.max_gap_intervals * self.state.interval_s:
                why = f"the node was not monitored for {hms(gap)}"
        if why is not None:
            restart(progress, now, why)
            sample = replace(sample, attempt=progress.attempt)
        progress.boot_id = sample.boot_id or progress.boot_id
        progress.last_ok_t = now
        return sample

    def _judge(self, progress: NodeProgress, sample: NodeSample) -> list[Event]:
        if not sample.ok:
            return []
        if progress.baseline is None:
            progress.baseline = sample
        history = [s for s in self.samples[progress.name] if s.ok and s.attempt == progress.attempt]
        seen = set(progress.seen)
        events = judge_sample(sample, history=history, baseline=progress.baseline, limits=self.ctx.limits,
                              names=self.ctx.bus_names, compute_hcas=self.ctx.compute_hcas,
                              seen=seen.__contains__)
        progress.seen += [e.key for e in sample.kernel if e.key not in seen]
        return events

    def _stop_at_deadline(self, now: float) -> None:
        for name in self._active():
            progress = self.state.nodes[name]
            progress.status = DONE
            progress.end_t = now

    def view(self, events: tuple[Event, ...] = ()) -> View:
        rows = []
        for name, progress in self.state.nodes.items():
            end = progress.end_t if progress.end_t is not None else self.state.now
            reason = progress.fatal[0].reason if progress.fatal else (progress.restarts[-1] if progress.restarts
                                                                      else progress.held)
            soaked = 0.0 if progress.status == HELD else max(0.0, end - progress.start_t)
            rows.append(NodeView(name, progress.status, soaked, reason))
        stage = self.running.chunk.stage if self.running is not None else ""
        return View(self.state.now, self.state.duration_s, stage, tuple(rows), events)


def restart(progress: NodeProgress, now: float, why: str) -> None:
    """The node's own soak was interrupted: its clock starts again (its samples so far are kept)."""
    progress.attempt += 1
    progress.start_t = now
    progress.baseline = None
    progress.restarts.append(f"+{hms(now)}: clock restarted, {why}")


def stages(ctx: SoakContext) -> list[str]:
    """The stages the settings enable, in their order."""
    return [s for s in plan.STAGES if ctx.settings.enabled(s)]


def chunk_for(ctx: SoakContext, stage: str, seconds: float) -> Chunk:
    """One turn of ``stage`` lasting ``seconds``."""
    settings = ctx.settings
    gpus = len(ctx.gpu_names)
    if stage == "dcgm":
        return plan.dcgm_chunk(settings)
    if stage == "gpu":
        return plan.gpu_chunk(settings, seconds, gpus)
    if stage == "nccl":
        return plan.nccl_chunk(settings, seconds, gpus)
    return plan.cpu_chunk(settings, seconds, ctx.sockets)


def plan_items(ctx: SoakContext, nodes: Sequence[str], *, duration_s: float, interval_s: float) -> list[PlanItem]:
    """One turn of each stage as the loop starts it on every node, in order (what a dry run prints)."""
    settings = ctx.settings
    items: list[PlanItem] = [Note(f"soak: every node at once for {hms(duration_s)}: DCGM diagnostics once, then "
                                  f"the stages in turn until the time is up; a sample of every node every "
                                  f"{hms(interval_s)}")]
    enabled = stages(ctx)
    chunks = [chunk_for(ctx, "dcgm", 0.0)] if settings.dcgm.enabled else []
    if "disk" in enabled:
        devices = settings.disk.devices
        listing = () if devices is not None else (plan.disk_list_step(),)
        disk = plan.disk_chunk(devices if devices is not None else ("DEVICE",))
        chunks.append(plan.Chunk("disk", disk.seconds, (*listing, *disk.steps)))
    chunks += [chunk_for(ctx, stage, min(plan.stage_minutes(settings, stage) * 60, duration_s))
               for stage in enabled if stage != "disk"]
    for chunk in chunks:
        items.append(Note(f"{chunk.stage} ({plan.STAGE_CHECK[chunk.stage]})"))
        items += [Each(tuple(nodes), tuple(step.argv), step.timeout_s,
                       note="(with burnin's GPU stress on stdin)" if step.stdin else "") for step in chunk.steps]
        if chunk.stage == "gpu" and settings.gpu.sdc:
            items.append(Note("then, the GPUs hot, GPU-14: the collector's sdc source on every node (the SDC workload "
                              "on every GPU), the digests compared across the nodes"))
    return items
