"""The watch's sampling loop: a sample every ``interval_s``, fed to the stall detector; a stall becomes an event.

The loop gives each sample its time (the watch's clock), so the detector (``burnin.watch.stall``) reads none.
A stall (and its end) is put into the daemon's event lanes like any other event: classified (check NCCL-05,
the site's policy: alert or drain), recorded in the journal with the detector's figures, and acted on through
Slurm and the breaker under the drain policy. With ``--metrics FILE`` every sample rewrites a Prometheus
textfile (atomically) with the detector's state.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from burnin.atomic import write_text_atomic
from burnin.watch.events import Kind, WatchEvent
from burnin.watch.sampler import NvmlSampler, counter_files, take_sample
from burnin.watch.settings import StallSettings
from burnin.watch.stall import Sample, Stall, StallDetector, StallEnded

Emit = Callable[[WatchEvent], None]
Log = Callable[[str], None]

METRICS: dict[str, tuple[str, str]] = {
    "burnin_watch_stall_samples_total": ("counter", "Samples the watch's stall detector took."),
    "burnin_watch_stall_sample_timestamp_seconds": ("gauge", "When the last sample was taken, Unix time."),
    "burnin_watch_stall_watched_since_timestamp_seconds": ("gauge", "First sample of the unbroken sampling."),
    "burnin_watch_stall_sample_seconds": ("gauge", "Wall time the last sample took (NVML and sysfs reads)."),
    "burnin_watch_stall_readable": ("gauge", "1 when the last sample read every GPU and IB counter it needs."),
    "burnin_watch_job_running": ("gauge", "1 when a job runs on the node (a GPU lists a compute process)."),
    "burnin_watch_stall_active": ("gauge", "1 while the node's collective is stalled."),
    "burnin_watch_stalls_total": ("counter", "Stalls found since the watch started."),
    "burnin_watch_ib_counters_last_change_timestamp_seconds": (
        "gauge", "The sample that last saw the compute HCAs' traffic counters change, Unix time."),
}


def stall_details(stall: Stall, node: str, settings: StallSettings) -> dict[str, Any]:
    """The journal's ``stall`` object: what ``burnin stalls`` compares across nodes."""
    return {
        "node": node, "since": round(stall.since, 6), "found_at": round(stall.at, 6),
        "counters_changed_at": None if stall.counters_changed_at is None else round(stall.counters_changed_at, 6),
        "counters_changed_after": (None if stall.counters_changed_after is None
                                   else round(stall.counters_changed_after, 6)),
        "watched_since": round(stall.watched_since, 6),
        "after_s": settings.after_s, "interval_s": settings.interval_s, "policy": settings.policy,
        "gpus": [{"index": g.index, "utilisation_pct": g.utilisation_pct, "power_w": g.power_w,
                  "power_limit_w": g.power_limit_w, "sm_clock_mhz": g.sm_clock_mhz, "processes": g.processes}
                 for g in stall.gpus],
    }


class StallWatch:
    def __init__(self, node: str, settings: StallSettings, *, root: str, hcas: Sequence[str] | None, emit: Emit,
                 log: Log, clock: Callable[[], float] = time.time, metrics: Path | None = None,
                 nvml: NvmlSampler | None = None) -> None:
        self.node = node
        self.settings = settings
        self.root = root
        self.hcas = hcas
        self.emit = emit
        self.log = log
        self.clock = clock
        self.metrics = metrics
        self.nvml = nvml or NvmlSampler()
        self.detector = StallDetector(settings)
        self.files = counter_files(root, hcas)
        self.last_sample: Sample | None = None
        self.sample_s = 0.0
        self._unreadable = ""

    def tick(self) -> Stall | StallEnded | None:
        """One sample, fed to the detector; its event emitted; the metrics written."""
        if not self.files:
            self.files = counter_files(self.root, self.hcas)  # an HCA that came up since
        started = time.perf_counter()
        sample = take_sample(self.clock(), self.nvml, self.files)
        self.sample_s = time.perf_counter() - started
        self.last_sample = sample
        self._say_unreadable(sample)
        result = self.detector.feed(sample)
        if self.metrics is not None:  # before the event: the metrics never lag the journal
            try:
                write_text_atomic(self.metrics, self.exposition())
            except OSError as exc:
                self.log(f"stall metrics: cannot write {self.metrics}: {exc.strerror or exc}")
        if isinstance(result, Stall):
            details = stall_details(result, self.node, self.settings)
            self.emit(WatchEvent("sampler", Kind.STALL, "", None, result.describe(), result.at, details=details))
        elif isinstance(result, StallEnded):
            details = stall_details(result.stall, self.node, self.settings)
            details["ended_at"], details["why"] = round(result.at, 6), result.why
            self.emit(WatchEvent("sampler", Kind.STALL_ENDED, "", None, f"stall over: {result.why}", result.at,
                                 details=details))
        return result

    def _say_unreadable(self, sample: Sample) -> None:
        """Once per cause: what the detector could not read (no stall is found without it)."""
        why = sample.why_not if sample.counters is None or not sample.gpus else ""
        if why and why != self._unreadable:
            self.log(f"stall detector: {why}: no stall can be found while it lasts")
        self._unreadable = why

    def exposition(self) -> str:
        detector = self.detector
        sample = self.last_sample
        observation = detector.last_observation
        values: dict[str, float | None] = {
            "burnin_watch_stall_samples_total": detector.samples,
            "burnin_watch_stall_sample_timestamp_seconds": None if sample is None else sample.at,
            "burnin_watch_stall_watched_since_timestamp_seconds": detector.watched_since,
            "burnin_watch_stall_sample_seconds": self.sample_s,
            "burnin_watch_stall_readable": None if sample is None else float(
                sample.counters is not None and bool(sample.gpus)),
            "burnin_watch_job_running": None if observation is None else float(observation.job),
            "burnin_watch_stall_active": float(detector.stall is not None),
            "burnin_watch_stalls_total": detector.stalls,
            "burnin_watch_ib_counters_last_change_timestamp_seconds": detector.counters_changed_at,
        }
        label = self.node.replace("\\", "\\\\").replace('"', '\\"')
        lines: list[str] = []
        for name, (kind, help_text) in METRICS.items():
            value = values[name]
            if value is None:
                continue
            text = f"{int(value)}" if float(value).is_integer() else f"{value:.6f}"
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", f'{name}{{node="{label}"}} {text}']
        return "\n".join(lines) + "\n"

    def run(self, stop: threading.Event) -> None:
        hcas = ",".join(self.hcas) if self.hcas is not None else "every InfiniBand HCA"
        self.log(f"stall detector: a sample every {self.settings.interval_s:g} s; a stall is GPUs >= "
                 f"{self.settings.utilisation_pct:g}% busy at {self.settings.describe_power()} and no traffic on "
                 f"{hcas} for {self.settings.after_s:g} s; policy {self.settings.policy}")
        failed = ""
        while not stop.is_set():
            try:
                self.tick()
                failed = ""
            except Exception as exc:  # noqa: BLE001 - the sampler must not take the daemon down
                text = f"{type(exc).__name__}: {exc}"
                if text != failed:
                    self.log(f"stall detector: sample failed: {text}")
                failed = text
            stop.wait(self.settings.interval_s)
        self.nvml.close()
