"""The soak's verdicts, per node and check, when it is over; then verdicts.json, gate.json and series.json.

Every node gets one outcome for each check the soak covers:

- the monitored checks (GPU-01..06, GPU-09, GPU-11, IB-04): failed with the
  first fatal event (its time in the reason), else passed when the signal was
  read in every sample, else incomplete; GPU-06 also fails on temperature creep;
- BRN-01 (DCGM), BRN-02 (GPU stress: errors, drift, GPU vs node median, node vs
  fleet median), BRN-03 (all_reduce floor and drift), BRN-04 (stress-ng,
  STREAM per socket, machine checks, EDAC), BRN-05 (NVMe health);
- BRN-06: the node soaked its whole duration (a node stopped early is incomplete);
- BRN-07: the node was monitored throughout, at least twice per judging window
  (an hour, or a quarter of a shorter soak): sampled more coarsely, the growth
  within an hour, drift and creep cannot be judged, and BRN-07 is incomplete.

A node the node suite rejected before the soak (acceptance, ``acceptance/``)
is not soaked: every soak check is incomplete there, with that as the cause.
The gate's decision (``gate.json``) takes the acceptance verdicts and the
soak's together: a node is admitted only when both passed it.

A stage switched off in the site settings is not applicable, with the file as
the reason. The drift verdicts carry their series' summary (first, last, min,
slope, first and last hour means) in ``measured`` and in ``series.json``.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from burnin.atomic import write_text_atomic
from burnin.gate.decide import FAIL, INCOMPLETE, NOT_APPLICABLE, PASS, CheckOutcome, NodeDecision, decide, gate_document
from burnin.runfiles import GATE_FILE, VERDICTS_FILE
from burnin.soak import drift
from burnin.soak.monitor import Event, gpu_label, gpu_names
from burnin.soak.plan import DRY_RUN_REASON, SoakSettings, hms
from burnin.soak.results import ChunkRecord
from burnin.soak.signals import GpuReading, NodeSample
from burnin.soak.state import DONE, FAILED, HELD, NodeProgress, SoakState
from burnin.text import printable
from burnin.topology.model import Topology

SERIES_FILE = "series.json"
REASON_LIMIT = 700

MONITORED: dict[str, tuple[str, Callable[[NodeSample], bool]]] = {
    "GPU-01": ("uncorrectable ECC counters", lambda s: _all_gpus(s, lambda g: g.ecc_uncorrected is not None)),
    "GPU-02": ("correctable ECC counters", lambda s: _all_gpus(s, lambda g: g.ecc_corrected is not None)),
    "GPU-03": ("row-remap state", lambda s: _all_gpus(s, lambda g: g.remap_pending is not None)),
    "GPU-04": ("the kernel log", lambda s: not any(m.startswith("kernel-events") for m in s.missing)),
    "GPU-05": ("clock-event reasons", lambda s: _all_gpus(s, lambda g: g.clock_reasons is not None)),
    "GPU-06": ("temperatures", lambda s: _all_gpus(s, lambda g: g.temperature_c is not None)),
    "GPU-09": ("PCIe replay counters", lambda s: _all_gpus(s, lambda g: g.pcie_replay is not None)),
    "GPU-11": ("NVLink error counters", lambda s: _all_gpus(s, lambda g: g.nvlink_replay is not None)),
}


def _all_gpus(sample: NodeSample, readable: Callable[[GpuReading], bool]) -> bool:
    return bool(sample.gpus) and all(readable(g) for g in sample.gpus)


def _short(text: str) -> str:
    text = printable(text)
    return text if len(text) <= REASON_LIMIT else text[: REASON_LIMIT - 3] + "..."


@dataclass
class Judge:
    state: SoakState
    samples: Mapping[str, Sequence[NodeSample]]
    results: Mapping[str, Sequence[ChunkRecord]]
    settings: SoakSettings
    topology: Topology
    config_name: str  # the site settings file (or "the defaults"), named by a not-applicable stage

    def __post_init__(self) -> None:
        self.window_s = drift.window_for(self.state.duration_s)
        self.series: dict[str, dict[str, Any]] = {}
        self._gpu_means = {name: self._gpu_stats(name) for name in self.state.nodes}

    def outcomes(self) -> list[CheckOutcome]:
        out: list[CheckOutcome] = []
        for name, progress in self.state.nodes.items():
            out += self.node(name, progress)
        return out

    # -- helpers ------------------------------------------------------------------------------

    def _ok_samples(self, name: str) -> list[NodeSample]:
        attempt = self.state.nodes[name].attempt
        return [s for s in self.samples.get(name, ()) if s.ok and s.attempt == attempt]

    def _records(self, name: str, stage: str) -> list[ChunkRecord]:
        attempt = self.state.nodes[name].attempt
        return [r for r in self.results.get(name, ()) if r.stage == stage and r.attempt == attempt]

    def _points(self, records: Sequence[ChunkRecord]) -> dict[str, list[tuple[float, float]]]:
        points: dict[str, list[tuple[float, float]]] = {}
        for record in records:
            for key, values in record.series.items():
                points.setdefault(key, []).extend(values)
        return points

    def _keep(self, node: str, key: str, summary: drift.Summary | None, unit: str) -> None:
        if summary is not None:
            self.series.setdefault(node, {})[key] = {**summary.to_json(), "unit": unit}

    def _gpu_stats(self, name: str) -> dict[str, float]:
        return {gpu: statistics.fmean(v for _, v in pts)
                for gpu, pts in self._points(self._records(name, "gpu")).items() if pts}

    @staticmethod
    def _outcome(node: str, check: str, parts: Sequence[str], errors: Sequence[str], measured: str,
                 expected: str) -> CheckOutcome:
        if parts:
            return CheckOutcome(node, check, FAIL, _short(f"{check} " + "; ".join(parts)), _short(measured), expected)
        if errors:
            return CheckOutcome(node, check, INCOMPLETE, _short(f"{check} " + "; ".join(errors)), _short(measured),
                                expected)
        return CheckOutcome(node, check, PASS, "", _short(measured), expected)

    def _disabled(self, node: str, check: str, stage: str) -> CheckOutcome:
        return CheckOutcome(node, check, NOT_APPLICABLE, f"{check} the {stage} stage is switched off in "
                            f"{self.config_name}")

    # -- per node ------------------------------------------------------------------------------

    def node(self, name: str, progress: NodeProgress) -> list[CheckOutcome]:
        samples = self._ok_samples(name)
        out = [self._monitored(name, progress, check, samples) for check in MONITORED]
        out.append(self._ib(name, progress, samples))
        out.append(self._dcgm(name))
        out.append(self._gpu(name))
        out.append(self._sdc(name, progress))
        out.append(self._nccl(name))
        out.append(self._cpu(name, progress, samples))
        out.append(self._disk(name))
        out.append(self._duration(name, progress))
        out.append(self._coverage(name, progress))
        if self.state.command.get("dry_run"):  # nothing ran: one cause for every check
            why = f"not judged: {DRY_RUN_REASON}"
            return [dataclasses.replace(o, reason=f"{o.check} {why}") if o.status == INCOMPLETE else o for o in out]
        if progress.status == HELD:  # never soaked: nothing here is a pass
            why = f"not judged: {progress.held or 'the node was not soaked'}"
            return [dataclasses.replace(o, status=INCOMPLETE, reason=f"{o.check} {why}") if o.status != NOT_APPLICABLE
                    else o for o in out]
        if progress.status == FAILED and progress.fatal:
            # what a node stopped early could not show is one line, not a list of consequences
            first = progress.fatal[0]
            why = f"not judged: the node's soak stopped at +{hms(first.t)} when {first.check} failed"
            out = [dataclasses.replace(o, reason=f"{o.check} {why}") if o.status == INCOMPLETE and o.check != "BRN-06"
                   else o for o in out]
        return out

    def _fatal(self, progress: NodeProgress, check: str) -> list[str]:
        return [e.reason.removeprefix(f"{check} ") for e in progress.fatal if e.check == check]

    def _monitored(self, name: str, progress: NodeProgress, check: str, samples: Sequence[NodeSample]
                   ) -> CheckOutcome:
        what, readable = MONITORED[check]
        fails = self._fatal(progress, check)
        unread = sum(1 for s in samples if not readable(s))
        errors = [] if samples and not unread else [
            f"{what} not read in {unread} of {len(samples)} samples" if samples else f"{what} never read"]
        notes = [e.measured for e in progress.events if e.check == check and not e.fatal]
        measured = f"{len(samples)} samples" + (f"; noted: {', '.join(notes[:3])}" if notes else "")
        expected = {"GPU-04": "no fatal Xid during the soak", "GPU-06": "temperatures within limits, no creep"}.get(
            check, "no fatal event during the soak")
        if check == "GPU-06" and not fails:
            creep_fails, creep_errors, creep_measured = self._creep(name, samples)
            fails, errors = creep_fails, [*errors, *creep_errors]
            measured = creep_measured or measured
        return self._outcome(name, check, fails, errors if not fails else [], measured, expected)

    def _creep(self, name: str, samples: Sequence[NodeSample]) -> tuple[list[str], list[str], str]:
        tolerance = self.settings.tolerances.temperature_creep_c
        start = self.state.nodes[name].start_t + self.settings.tolerances.warmup_minutes * 60
        loaded = [s for s in samples if s.t >= start and (s.stage == "gpu" or not self.settings.gpu.enabled)]
        series: dict[str, list[tuple[float, float]]] = {}
        names = gpu_names(self.topology)
        for sample in loaded:
            for reading in sample.gpus:
                if reading.temperature_c is not None:
                    series.setdefault(gpu_label(reading, names), []).append((sample.t, reading.temperature_c))
        fails: list[str] = []
        errors: list[str] = []
        thin: list[str] = []
        worst = ""
        worst_rise = -1e9
        for gpu, points in sorted(series.items()):
            summary = drift.summarize(points, self.window_s)
            self._keep(name, f"{gpu}/temperature", summary, "C")
            if summary is None:
                continue
            risen = drift.rise(summary)
            if risen is None:
                thin.append(gpu)
                continue
            text = f"{gpu} temperature {risen:+.1f} C first to last hour under load ({summary.describe('C')})"
            if risen > worst_rise:
                worst, worst_rise = text, risen
            if drift.crept(summary, tolerance):
                fails.append(f"{gpu} temperature crept {risen:+.1f} C from the first to the last hour under load "
                             f"(expected at most +{tolerance:g} C; {summary.describe('C')})")
        if thin:
            errors.append(f"too few temperature samples under load to judge creep on {', '.join(thin)}")
        if not series:
            errors.append("no temperature sample under load")
        return fails, errors, worst

    def _ib(self, name: str, progress: NodeProgress, samples: Sequence[NodeSample]) -> CheckOutcome:
        hcas = [h.name for h in self.topology.compute_hcas]
        if not hcas:
            return CheckOutcome(name, "IB-04", NOT_APPLICABLE, f"IB-04 topology {self.topology.name} declares no "
                                "compute HCA")
        unread = sum(1 for s in samples if any(h not in s.ib for h in hcas))
        errors = [] if samples and not unread else [f"IB counters not read in {unread} of {len(samples)} samples"]
        return self._outcome(name, "IB-04", self._fatal(progress, "IB-04"), errors, f"{len(hcas)} HCAs",
                             "no IB-04 counter gain beyond its limit")

    def _stage_records(self, name: str, stage: str, what: str) -> tuple[list[ChunkRecord], list[str], list[str]]:
        records = self._records(name, stage)
        failures = [f for r in records for f in r.failures]
        errors = [e for r in records for e in r.errors]
        if not records:
            errors.append(f"{what} did not run on this node")
        return records, list(dict.fromkeys(failures)), list(dict.fromkeys(errors))

    def _dcgm(self, name: str) -> CheckOutcome:
        if not self.settings.dcgm.enabled:
            return self._disabled(name, "BRN-01", "dcgm")
        records, failures, errors = self._stage_records(name, "dcgm", f"dcgmi diag -r {self.settings.dcgm.level}")
        tests = sum(int(r.details.get("tests") or 0) for r in records)
        return self._outcome(name, "BRN-01", failures, errors, f"{tests} DCGM tests",
                             f"dcgmi diag -r {self.settings.dcgm.level}: every test Pass")

    def _gpu(self, name: str) -> CheckOutcome:
        if not self.settings.gpu.enabled:
            return self._disabled(name, "BRN-02", "gpu")
        tolerance = self.settings.tolerances
        records, fails, errors = self._stage_records(name, "gpu", "the GPU stress")
        points = self._points(records)
        drifts: list[str] = []
        thin: list[str] = []
        worst = ""
        worst_fall = -1e9
        for gpu, values in sorted(points.items()):
            summary = drift.summarize(values, self.window_s)
            self._keep(name, f"{gpu}/gflops", summary, "Gflop/s")
            if summary is None:
                continue
            share = drift.fall(summary)
            if share is None:
                thin.append(gpu)
                continue
            if share > worst_fall:
                worst_fall = share
                worst = f"{gpu} {summary.describe('Gflop/s', 0)}"
            if share > tolerance.throughput_drift:
                drifts.append(f"{gpu} throughput fell {share:.1%} from the first to the last hour "
                              f"(expected at most {tolerance.throughput_drift:.0%}; {summary.describe('Gflop/s', 0)})")
        means = self._gpu_means.get(name, {})
        slow = [f"{gpu} mean {v:.0f} Gflop/s is {short:.1%} below the node median {m:.0f}"
                for gpu, (v, m, short) in sorted(drift.stragglers(means, tolerance.straggler).items())]
        fleet = {n: statistics.fmean(m.values()) for n, m in self._gpu_means.items() if m}
        reference = self.settings.gpu.reference_gflops
        behind = drift.stragglers(fleet, tolerance.straggler, reference=reference).get(name)
        if behind is not None:
            norm = (f"the reference {reference:.0f} (gpu.reference_gflops in {self.config_name})"
                    if reference is not None and behind[1] == reference else f"the fleet median {behind[1]:.0f}")
            slow.append(f"node mean {behind[0]:.0f} Gflop/s per GPU is {behind[2]:.1%} below {norm}")
        if thin:
            errors.append(f"too few gpu_burn points in the first or last hour to judge drift on {', '.join(thin)}")
        if not points:
            errors.append("no gpu stress throughput measured")
        expected = (f"no errors; fall <= {tolerance.throughput_drift:.0%} first to last hour; within "
                    f"{tolerance.straggler:.0%} of the node and fleet medians"
                    + (f" (the fleet's held to {reference:.0f} Gflop/s)" if reference is not None else ""))
        return self._outcome(name, "BRN-02", [*fails, *drifts, *slow], errors, worst, expected)

    def _sdc(self, name: str, progress: NodeProgress) -> CheckOutcome:
        """GPU-14: the SDC rounds after each GPU stage (burnin.soak.sdc); failed with the first wrong GPU."""
        if not self.settings.gpu.enabled or not self.settings.gpu.sdc:
            why = "the gpu stage is switched off" if not self.settings.gpu.enabled else "gpu.sdc is false"
            return CheckOutcome(name, "GPU-14", NOT_APPLICABLE, f"GPU-14 {why} in {self.config_name}")
        records, _, errors = self._stage_records(name, "sdc", "the SDC workload after a GPU stage")
        fails = self._fatal(progress, "GPU-14")
        measured = f"{len(records)} SDC rounds after GPU stages" + (
            f" ({records[-1].details.get('measured')})" if records and records[-1].details.get("measured") else "")
        return self._outcome(name, "GPU-14", fails, errors if not fails else [], measured,
                             "every GPU's digests as the soak's other GPUs' after each GPU stage")

    def _nccl(self, name: str) -> CheckOutcome:
        if not self.settings.nccl.enabled:
            return self._disabled(name, "BRN-03", "nccl")
        ref = self.topology.ref("nccl_single_busbw_gbps")
        floor = ref.lower if ref is not None and ref.lower is not None else None
        records, fails, errors = self._stage_records(name, "nccl", "all_reduce_perf")
        values = self._points(records).get("busbw", [])
        summary = drift.summarize(values, self.window_s, min_points=1)
        self._keep(name, "busbw", summary, "GB/s")
        parts = list(fails)
        measured = summary.describe("GB/s") if summary else ""
        if summary is not None:
            if floor is not None and summary.min < floor:
                parts.append(f"all_reduce busbw fell to {summary.min:.1f} GB/s (expected >= {floor:g} GB/s)")
            share = drift.fall(summary)
            if share is None:
                errors.append("too few all_reduce results to judge drift (the soak is too short)")
            elif share > self.settings.tolerances.nccl_drift:
                parts.append(f"all_reduce busbw fell {share:.1%} from the first to the last hour (expected at most "
                             f"{self.settings.tolerances.nccl_drift:.0%}; {measured})")
        else:
            errors.append("no all_reduce busbw measured")
        if floor is None:
            errors.append(f"topology {self.topology.name} defines no nccl_single_busbw_gbps floor")
        return self._outcome(name, "BRN-03", parts, errors, measured,
                             f"busbw >= {floor:g} GB/s, fall <= {self.settings.tolerances.nccl_drift:.0%}"
                             if floor is not None else "a busbw floor")

    def _cpu(self, name: str, progress: NodeProgress, samples: Sequence[NodeSample]) -> CheckOutcome:
        parts = self._fatal(progress, "BRN-04")
        errors: list[str] = []
        measured = ""
        if self.settings.cpu.enabled:
            records, fails, errors = self._stage_records(name, "cpu", "the CPU/memory stress")
            parts += fails
            means: dict[str, float] = {}
            for socket, values in sorted(self._points(records).items()):
                summary = drift.summarize(values, self.window_s, min_points=1)
                self._keep(name, f"{socket}/triad", summary, "GB/s")
                if summary is not None:
                    means[socket] = summary.mean
            if len(means) >= 2:
                low, high = min(means.values()), max(means.values())
                spread = (high - low) / high if high > 0 else 0.0
                measured = "STREAM triad " + ", ".join(f"{k} {v:.1f}" for k, v in means.items()) + " GB/s"
                if spread > self.settings.tolerances.stream_socket_spread:
                    parts.append(f"STREAM triad sockets {spread:.1%} apart ({measured}; expected within "
                                 f"{self.settings.tolerances.stream_socket_spread:.0%})")
            elif not means:
                errors.append("no STREAM triad measured")
        if not samples or any(s.edac_ue is None for s in samples):
            errors.append("EDAC counters not readable (is the EDAC driver loaded?)")
        return self._outcome(name, "BRN-04", parts, errors, measured,
                             "no stress-ng failure, sockets within 5%, no machine check, EDAC UE 0")

    def _disk(self, name: str) -> CheckOutcome:
        if not self.settings.disk.enabled:
            return self._disabled(name, "BRN-05", "disk")
        records, fails, errors = self._stage_records(name, "disk", "nvme smart-log")
        devices = sorted({d for r in records for d in r.details})
        return self._outcome(name, "BRN-05", fails, errors, f"{len(devices)} NVMe devices",
                             "critical_warning 0, media_errors 0")

    def _duration(self, name: str, progress: NodeProgress) -> CheckOutcome:
        duration = self.state.duration_s
        end = progress.end_t if progress.end_t is not None else self.state.now
        soaked = max(0.0, end - progress.start_t)
        measured = f"soaked {hms(soaked)} of {hms(duration)}" + (f"; {'; '.join(progress.restarts)}"
                                                                 if progress.restarts else "")
        errors: list[str] = []
        if progress.status == FAILED:
            first = progress.fatal[0]
            errors.append(f"soak stopped at +{hms(first.t)} when {first.check} failed ({measured})")
        elif progress.status != DONE or soaked + 1e-6 < duration:
            errors.append(f"the node did not complete its soak ({measured})")
        return self._outcome(name, "BRN-06", [], errors, measured, f"{hms(duration)} under load without interruption")

    def _coverage(self, name: str, progress: NodeProgress) -> CheckOutcome:
        mine = [s for s in self.samples.get(name, ()) if s.attempt == progress.attempt]
        unread = [s for s in mine if not s.ok]
        interval, finest = self.state.interval_s, self.window_s / 2
        measured = f"{len(mine) - len(unread)} of {len(mine)} samples read every {hms(interval)}"
        errors = [] if mine and len(unread) < len(mine) else ["the node was never sampled"]
        if interval > finest:
            window = "hour" if self.window_s >= drift.HOUR_S else f"{hms(self.window_s)} window"
            errors.append(f"sampled every {hms(interval)}: too coarse to judge growth within an hour, drift and "
                          f"creep (two samples per {window} at least: every {hms(finest)} or more often)")
        return self._outcome(name, "BRN-07", [], errors, measured,
                             f"every node sampled each interval, at least every {hms(finest)}")


def write_outputs(out_dir: Path, state: SoakState, outcomes: Sequence[CheckOutcome], series: dict[str, Any], *,
                  meta: Mapping[str, Any], acceptance: Sequence[CheckOutcome] = ()) -> dict[str, NodeDecision]:
    """verdicts.json (the soak's), series.json, then gate.json (atomically, in that order); returns the
    decisions, which take the acceptance verdicts (the node suite's, run before the soak) with the soak's."""
    decisions = decide(list(state.nodes), [*acceptance, *outcomes])
    verdicts = [{**dataclasses.asdict(o), "reason": printable(o.reason), "measured": printable(o.measured),
                 "expected": printable(o.expected)} for o in outcomes]
    write_text_atomic(out_dir / VERDICTS_FILE, json.dumps(verdicts, indent=1))
    write_text_atomic(out_dir / SERIES_FILE, json.dumps(series, indent=1))
    doc = gate_document(decisions, **{"created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                      "kind": "soak", "partial": False, "interrupted": False,
                                      "dry_run": bool(state.command.get("dry_run")), **meta})
    write_text_atomic(out_dir / GATE_FILE, json.dumps(doc, indent=2) + "\n")
    return decisions


def first_events(progress: Mapping[str, NodeProgress]) -> dict[str, Event]:
    return {name: p.fatal[0] for name, p in progress.items() if p.fatal}
