"""The watch daemon: sources feed one queue; the main thread classifies, dedupes, acts, records.

Threads: one waits on NVML events (``burnin.watch.nvml``), one follows the
kernel log (``burnin.watch.follow``): only the kernel's own records about this
node's devices (``burnin.watch.records``, ``burnin.watch.devices``) become
events. The queue (``burnin.watch.lanes``) hands out drain and evict events
before records. The main thread handles events one at a
time, so two sightings of one incident can never race into two actions. When
NVML events are not available (no pynvml, no driver, no GPU offering events)
it runs the fast probe every ``probe_interval`` seconds instead, and drains
when a check starts failing.
"""

from __future__ import annotations

import dataclasses
import functools
import shlex
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from burnin.history.incidents import IncidentLog, incident
from burnin.text import printable
from burnin.watch.actions import RESTART_MARGIN_S, Actor, Outcome, SlurmActor, Step, start_again_argv
from burnin.watch.devices import NodeDevices, hca_labels, read_devices
from burnin.watch.events import Action, Decision, Kind, Policy, WatchEvent, classify
from burnin.watch.follow import KernelLog
from burnin.watch.journal import Incidents, Journal
from burnin.watch.kmsg import events_from_record
from burnin.watch.lanes import EventLanes
from burnin.watch.nvml import NvmlWatch
from burnin.watch.records import KernelRecord, LogFormat
from burnin.watch.settings import StallSettings
from burnin.watch.stallwatch import StallWatch

PROBE_GRACE_S = 3.0  # NVML gets this long to come up before the first fallback probe
RETRY_S = 2.0
RETRIES = 3
RESCAN_S = 30.0  # a line naming a device sysfs did not list reads sysfs again, at most this often


@dataclass
class WatchConfig:
    node: str
    state_dir: Path
    kernel_log: Path | None = Path("/dev/kmsg")
    kernel_log_format: LogFormat = LogFormat.AUTO
    root: str = "/"
    use_nvml: bool = True
    probe_interval: float = 60.0
    dedupe_window: float = 60.0
    policy: Policy = field(default_factory=Policy)
    dry_run: bool = False
    topology: str = "hgx-h100-8gpu"
    stall: StallSettings | None = None  # the stall detector (None or not enabled: off)
    compute_hcas: tuple[str, ...] | None = None  # whose traffic counters it reads (None: every InfiniBand HCA)
    metrics: Path | None = None  # the stall detector's Prometheus textfile


@dataclass
class _Retry:
    event: WatchEvent
    decision: Decision
    attempts: int
    due: float


def _in_thread(work: Callable[[], None]) -> None:
    threading.Thread(target=work, name="burnin-release", daemon=True).start()


class Watcher:
    def __init__(self, config: WatchConfig, *, actor: Actor | None = None, out: TextIO | None = None,
                 err: TextIO | None = None, clock: Callable[[], float] = time.time,
                 background: Callable[[Callable[[], None]], None] | None = None,
                 history: IncidentLog | None = None) -> None:
        """``background`` runs the release of requeued jobs (default: a daemon thread each); ``history``: where
        each incident is recorded as it is journaled (default: burnin's history, ``$BURNIN_HISTORY``)."""
        self.config = config
        self.background = background or _in_thread
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.clock = clock
        self.actor: Actor = actor or SlurmActor(config.node, dry_run=config.dry_run, out=self.out)
        self.journal = Journal(config.state_dir)
        self.history = history or IncidentLog(self.log)
        self.incidents = Incidents(config.dedupe_window)
        self.incidents.restore(self.journal.recent(clock() - config.dedupe_window))
        self.events = EventLanes(self._urgency)
        self.nvml: NvmlWatch | None = NvmlWatch(self.events.put, self.log) if config.use_nvml else None
        self.labels: dict[str, str] = hca_labels(config.root)
        self.devices: NodeDevices = read_devices(config.root)
        self._devices_read = time.monotonic()
        # (NVML's labels, sysfs's devices) -> both merged, kept while neither was replaced
        self._merged: tuple[dict[str, str] | None, NodeDevices, NodeDevices] = (None, self.devices, self.devices)
        self.untrusted = 0  # kernel-log lines the kernel did not write
        self.forged = 0  # ... of which would have been events
        self.kernel: KernelLog | None = None
        if config.kernel_log is not None:
            self.kernel = KernelLog(config.kernel_log, self._kernel_record, self.log, fmt=config.kernel_log_format)
        self._retries: list[_Retry] = []
        self.stalls: StallWatch | None = None
        if config.stall is not None and config.stall.enabled:
            self.stalls = StallWatch(config.node, config.stall, root=config.root, hcas=config.compute_hcas,
                                     emit=self.events.put, log=self.log, clock=clock, metrics=config.metrics)
        self._probe_failing: tuple[str, ...] = ()
        self._probe_topology: Any = None
        self._probe_broken: str | None = None
        self.probes = 0

    # ------------------------------------------------------------------ output

    def log(self, text: str) -> None:
        self.err.write(f"burnin watch: {self.config.node}: {text}\n")
        self.err.flush()

    def _urgency(self, event: WatchEvent) -> Action:
        """The event's class, for the lanes (another node's device: a record, without classifying it)."""
        return Action.RECORD if event.foreign else classify(event, self.config.policy).action

    def _kernel_record(self, record: KernelRecord, detected: float) -> None:
        """From the kernel-log thread: the record's events into the lanes; a line not the kernel's, counted."""
        try:
            if not record.trusted:
                self._untrusted(record, detected)
                return
            nvml_labels = self.nvml.labels if self.nvml else {}
            labels = {**self.labels, **nvml_labels} if nvml_labels else self.labels
            events = events_from_record(record, detected, labels, self._node_devices())
            if any(event.foreign for event in events) and time.monotonic() - self._devices_read >= RESCAN_S:
                self.devices = read_devices(self.config.root)  # a device added since: read sysfs again
                self._devices_read = time.monotonic()
                events = events_from_record(record, detected, labels, self._node_devices())
            for event in events:
                self.events.put(event)
        except Exception as exc:  # noqa: BLE001 - one odd line must not stop the kernel-log thread
            self.log(f"kernel log line not handled: {type(exc).__name__}: {exc}: {printable(record.text, limit=120)}")

    def _node_devices(self) -> NodeDevices:
        """sysfs's devices and NVML's GPUs (NVML replaces its labels whole when they change)."""
        nvml_labels = self.nvml.labels if self.nvml else None
        labels, base, merged = self._merged
        if nvml_labels is not labels or base is not self.devices:
            merged = self.devices.with_gpus(set(nvml_labels or ()))
            self._merged = (nvml_labels, self.devices, merged)
        return merged

    def _untrusted(self, record: KernelRecord, detected: float) -> None:
        self.untrusted += 1
        as_if = dataclasses.replace(record, trusted=True)
        if not events_from_record(as_if, detected, self.labels, self._node_devices()):
            return
        self.forged += 1
        if self.forged == 1:  # say it once; the rest are counted
            self.log(f"kernel log: not acted on, not written by the kernel ({record.origin}): "
                     f"{printable(record.text, limit=200)} (further ones counted)")

    # ------------------------------------------------------------------ one event

    def handle(self, event: WatchEvent) -> dict[str, Any] | None:
        """Classify, dedupe, act, record; the journal entry (None for a duplicate sighting)."""
        decision = classify(event, self.config.policy)
        now = self.clock()
        if self.incidents.duplicate(decision.key, now) and not self._resumed_since(decision, now):
            if self.incidents.repeats(decision.key) == 1:  # say it once per incident, not per repeat
                self.log(f"{event.source}: {decision.check_id} {decision.cause}: heard again, same incident "
                         "(further repeats not logged)")
            return None
        covered = self.incidents.covered(decision.action, now)
        if covered is not None and not self.config.dry_run and not self.actor.out_of_pool():
            covered = None  # resumed since: a new incident on a node back in the pool is acted on
        outcome: Outcome | None = None
        if covered is None and decision.action is not Action.RECORD:
            outcome = self._act(decision)
            if outcome.out_of_pool:
                self.incidents.acted(decision, now)
            elif not self.config.dry_run:
                self._retries.append(_Retry(event, decision, 1, now + RETRY_S))
        entry = self._entry(event, decision, outcome, covered, self.clock())
        self.journal.append(entry)
        self._remember(entry)
        self._say(entry, outcome)
        self._release_later(entry, outcome)
        return entry

    def _remember(self, entry: dict[str, Any]) -> None:
        """The journaled incident into the fleet's history (after the journal and the action: it never costs them)."""
        found = incident(entry, str(self.journal.path))
        if found is not None:
            self.history.record(found)

    def _resumed_since(self, decision: Decision, now: float) -> bool:
        """A repeat of an incident that took the node out of the pool, heard after it was put back: a new incident.

        Only when the watch did take it out (within the window) and the node is in the pool now, so two
        sightings of one event (NVML and the kernel log) are still one action, and a failed action is
        retried by its own schedule, not by a repeat.
        """
        if decision.action is Action.RECORD or self.config.dry_run:
            return False
        if self.incidents.covered(decision.action, now) is None:
            return False
        try:
            return not self.actor.out_of_pool()
        except Exception:  # noqa: BLE001 - Slurm unreadable: keep treating it as the same incident
            return False

    def _release_later(self, entry: dict[str, Any], outcome: Outcome | None) -> None:
        """Let each requeued job start again at once, in a thread (it waits for the job to complete)."""
        for job in outcome.requeued if outcome else ():
            self.background(functools.partial(self._release, entry, job))

    def _release(self, entry: dict[str, Any], job: str) -> None:
        try:
            step = self.actor.release(job)
        except Exception as exc:  # noqa: BLE001 - recorded; the job still starts, only later
            step = Step(shlex.join(start_again_argv(job)), False, f"{type(exc).__name__}: {exc}")
        released = self.clock()
        self.journal.append({
            "node": self.config.node, "kind": "job-released", "job": job, "key": entry["key"],
            "check": entry["check"], "detected_at": entry["detected_at"], "released_at": round(released, 6),
            "ok": step.ok, "steps": [step.to_json()],
        })
        verb = f"may start again (StartTime=now+{RESTART_MARGIN_S})" if step.ok else "not released"
        self.out.write(printable(f"burnin watch: {self.config.node} job {job} {verb} "
                                 f"[{released - entry['detected_at']:.3f} s after detection]: {step.detail}")
                       + "\n")
        self.out.flush()

    def _act(self, decision: Decision) -> Outcome:
        try:
            if decision.action is Action.EVICT:
                return self.actor.evict(decision.reason())
            return self.actor.drain(decision.reason())
        except Exception as exc:  # noqa: BLE001 - a failed action is recorded and retried, never fatal
            return Outcome((Step(decision.action.word, False, f"{type(exc).__name__}: {exc}"),), False)

    def _entry(self, event: WatchEvent, decision: Decision, outcome: Outcome | None, covered: str | None,
               acted_at: float) -> dict[str, Any]:
        action = decision.action.word if covered is None else "none"
        return {
            "node": self.config.node, "source": event.source, "kind": event.kind.value,
            "device": event.device, "subject": event.subject, "code": event.code,
            "check": decision.check_id, "class": decision.action.word, "action": action,
            "cause": decision.cause, "reason": decision.reason() if action in ("drain", "evict") else None,
            "note": covered, "message": printable(event.text, limit=300), "key": list(decision.key),
            "detected_at": round(event.detected_at, 6), "acted_at": round(acted_at, 6),
            "kernel_usec": event.kernel_usec, "kernel_seq": event.kernel_seq,
            "dry_run": self.config.dry_run,
            **({"stall": event.details} if event.details is not None else {}),
            "out_of_pool": outcome.out_of_pool if outcome else None,
            "requeued": list(outcome.requeued) if outcome else [],
            "steps": [step.to_json() for step in outcome.steps] if outcome else [],
        }

    def _say(self, entry: dict[str, Any], outcome: Outcome | None) -> None:
        took = entry["acted_at"] - entry["detected_at"]
        verb = {"evict": "EVICT", "drain": "DRAIN", "record": "record"}.get(entry["action"], "no action")
        if entry["kind"] == Kind.STALL.value and entry["action"] == "record":
            verb = "ALERT"  # the stall policy's default: the stuck rank's node is often not the faulty one
        line = (f"burnin watch: {entry['node']} {verb} {entry['check']} {entry['cause']} "
                f"[{entry['source']}, {took:.3f} s]")
        if entry["note"]:
            line += f": {entry['note']}"
        if outcome and outcome.requeued:
            line += f" requeued {','.join(outcome.requeued)}"
        self.out.write(printable(line) + "\n")
        self.out.flush()
        for step in outcome.steps if outcome else ():
            if not step.ok:
                self.log(f"{step.command}: {step.detail}")

    def _retry_due(self, now: float) -> None:
        due = [r for r in self._retries if r.due <= now]
        self._retries = [r for r in self._retries if r.due > now]
        for retry in due:
            if self.incidents.covered(retry.decision.action, now) is not None:
                continue
            outcome = self._act(retry.decision)
            entry = self._entry(retry.event, retry.decision, outcome, None, self.clock())
            entry["retry"] = retry.attempts
            self.journal.append(entry)
            self._remember(entry)
            self._say(entry, outcome)
            self._release_later(entry, outcome)
            if outcome.out_of_pool:
                self.incidents.acted(retry.decision, now)
            elif retry.attempts < RETRIES:
                self._retries.append(_Retry(retry.event, retry.decision, retry.attempts + 1, now + RETRY_S))

    # ------------------------------------------------------------------ fallback probe

    def _events_live(self) -> bool:
        return self.nvml is not None and self.nvml.available.is_set()

    def probe_once(self) -> WatchEvent | None:
        """Run the fast probe in-process; an event when a check newly fails."""
        from burnin.probe import run_probe
        from burnin.topology.fast import find_topology_fast

        if self._probe_topology is None:
            self._probe_topology = find_topology_fast(self.config.topology)
        result = run_probe(self._probe_topology, root=self.config.root)
        self.probes += 1
        failing = tuple(v.check_id for v in result.failed)
        new = failing and failing != self._probe_failing
        self._probe_failing = failing
        if not new:
            return None
        cause = result.drain_reason().removeprefix("burnin:").strip()
        cause = cause[len(",".join(failing)):].strip() if cause.startswith(",".join(failing)) else cause
        return WatchEvent("probe", Kind.PROBE_FAIL, "", None, cause, self.clock(), checks=failing)

    def _maybe_probe(self, now: float, due: float) -> float:
        if self._events_live() or self._probe_broken or now < due:
            return due
        try:
            event = self.probe_once()
        except Exception as exc:  # noqa: BLE001 - the fallback must not take the daemon down
            self._probe_broken = f"{type(exc).__name__}: {exc}"
            self.log(f"fallback probe disabled: {self._probe_broken}")
            return due
        if event is not None:
            self.handle(event)
        return now + self.config.probe_interval

    # ------------------------------------------------------------------ main loop

    def _next_event(self, timeout: float = 0.5) -> WatchEvent | None:
        """The next event to handle: while the kernel log is being read behind its end, only drain or evict ones.

        Reading comes first: a fatal line may wait further down the log, behind a flood of records whose
        handling (a journal line each) would otherwise share the CPU with the reading. The wait is short,
        so the reader's state is looked at again soon.
        """
        if self.kernel is not None and self.kernel.behind.is_set():
            return self.events.get(timeout=min(timeout, 0.02), routine=False)
        return self.events.get(timeout=timeout)

    def run(self, stop: threading.Event) -> int:
        threads: list[threading.Thread] = []
        if self.nvml is not None:
            threads.append(threading.Thread(target=self.nvml.run, args=(stop,), name="burnin-nvml", daemon=True))
        if self.kernel is not None:
            threads.append(threading.Thread(target=self.kernel.run, args=(stop,), name="burnin-kmsg",
                                            daemon=True))
        if self.stalls is not None:
            threads.append(threading.Thread(target=self.stalls.run, args=(stop,), name="burnin-stall", daemon=True))
        for thread in threads:
            thread.start()
        source = self.config.kernel_log or "none"
        if self.config.kernel_log is not None:
            source = f"{source}, format {self.config.kernel_log_format.value}"
        if not self.devices.gpus and self.nvml is None:
            self.log(f"no GPU listed in {Path(self.config.root) / 'sys/bus/pci/devices'} and NVML off: "
                     "Xids in the kernel log will be recorded, not acted on")
        self.log(f"watching (kernel log {source}; NVML {'on' if self.nvml else 'off'}; "
                 f"fallback probe every {self.config.probe_interval:g} s; "
                 f"{'dry run' if self.config.dry_run else f'acting through {self.actor.name}'})")
        probe_due = time.monotonic() + PROBE_GRACE_S
        while not stop.is_set():
            probe_due = self._maybe_probe(time.monotonic(), probe_due)
            if self._retries:
                self._retry_due(self.clock())
            event = self._next_event()
            if event is None:
                continue
            try:
                self.handle(event)
            except Exception as exc:  # noqa: BLE001 - one bad event must not stop the watch
                self.log(f"event {event.kind.value} from {event.source} not handled: {type(exc).__name__}: {exc}")
        for thread in threads:
            thread.join(timeout=2.0)
        self.history.close()
        overlong = self.kernel.overlong if self.kernel else 0
        self.log(f"stopped ({self.incidents.duplicates} duplicate sightings ignored; kernel log: {self.untrusted} "
                 f"lines not the kernel's, {self.forged} of them event-like; {overlong} overlong lines dropped; "
                 f"{self.events.dropped} records dropped in a flood)")
        return 0
