"""Judge each monitoring sample as it comes (pure): what went wrong on a node, and when.

A fatal :class:`Event` fails the node at once with the catalog's check id;
the soak goes on for the others. Counters are judged by what they gained, not
their value (check-catalog GPU-11: "store and diff"): since the node's
baseline (uncorrectable ECC, NVLink recovery, IB fatal counters: any gain
fails) or within the trailing hour (correctable ECC, PCIe replays, NVLink
replay/CRC, IB error counters, EDAC CE: more than the per-hour limit fails).

====================== =========================================================
GPU-01                 volatile uncorrectable or SRAM uncorrectable ECC gained
GPU-02                 correctable ECC gained > limit within an hour
GPU-03                 a row remap pending, or a remap failure
GPU-04                 a new fatal Xid in the kernel log (non-fatal ones noted)
GPU-05                 HW slowdown, HW thermal slowdown or power brake active
GPU-06                 GPU or memory temperature above its limit less the margin
GPU-09                 PCIe replays > limit within an hour; an uncorrected AER
GPU-11                 NVLink recovery gained; replay or CRC > limit within an hour
IB-04                  link_downed & co. gained; symbol errors & co. > limit an hour
BRN-04                 a machine check, an EDAC uncorrectable error, EDAC CE > limit
====================== =========================================================
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from burnin.checks import xid as xid_table
from burnin.checks.infiniband import ERROR_COUNTERS, FATAL_COUNTERS
from burnin.soak.plan import Tolerances, hms
from burnin.soak.signals import GpuReading, NodeSample
from burnin.topology.model import Topology

WINDOW_S = 3600.0
HW_SLOWDOWN_BITS = {0x8: "HwSlowdown", 0x40: "HwThermalSlowdown", 0x80: "HwPowerBrakeSlowdown"}


@dataclass(frozen=True, slots=True)
class Event:
    check: str
    node: str
    subject: str  # "gpu3", "mlx5_2", "node"
    t: float  # soak seconds when it happened (when the sample saw it, without a log stamp)
    fatal: bool
    measured: str
    expected: str

    @property
    def reason(self) -> str:
        return f"{self.check} {self.subject} {self.measured} at +{hms(self.t)} (expected {self.expected})"

    def to_json(self) -> dict[str, object]:
        return {"check": self.check, "node": self.node, "subject": self.subject, "t": self.t, "fatal": self.fatal,
                "measured": self.measured, "expected": self.expected}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Event:
        return cls(str(data["check"]), str(data["node"]), str(data["subject"]), float(data["t"]),  # type: ignore[arg-type]
                   bool(data["fatal"]), str(data["measured"]), str(data["expected"]))


@dataclass(frozen=True, slots=True)
class Limits:
    temperature_margin_c: float = 5.0
    ecc_corrected_per_hour: int = 100
    pcie_replay_per_hour: int = 100
    nvlink_replay_per_hour: float = 100
    nvlink_crc_per_hour: float = 100
    ib_errors_per_hour: float = 100
    edac_ce_per_hour: int = 10

    @classmethod
    def from_settings(cls, tolerances: Tolerances, topology: Topology) -> Limits:
        def upper(key: str, default: float) -> float:
            ref = topology.ref(key)
            return ref.upper if ref is not None and ref.upper is not None else default

        margin = topology.ref("gpu_temp_margin_c")
        return cls(
            temperature_margin_c=(margin.lower if margin and margin.lower is not None else 5.0),
            ecc_corrected_per_hour=tolerances.ecc_corrected_per_hour,
            pcie_replay_per_hour=tolerances.pcie_replay_per_hour,
            nvlink_replay_per_hour=upper("nvlink_replay_errors", 100),
            nvlink_crc_per_hour=upper("nvlink_crc_errors", 100),
            ib_errors_per_hour=upper("ib_error_counter", 100),
            edac_ce_per_hour=tolerances.edac_ce_per_hour,
        )


def gpu_names(topology: Topology) -> dict[str, str]:
    """PCI device (``0000:1b:00``) -> the topology's GPU name (``gpu0``)."""
    return {_device(d.bus_id): f"gpu{d.index}" for d in topology.gpus.devices}


def _device(address: str) -> str:
    device = address.lower().partition(".")[0]
    return device if device.count(":") == 2 else "0000:" + device


def gpu_label(reading: GpuReading, names: Mapping[str, str]) -> str:
    """The topology's name of a GPU reading (by its bus id), else ``gpu<NVML index>``."""
    return names.get(_device(reading.bus_id), f"gpu{reading.index}") if reading.bus_id else f"gpu{reading.index}"


def window_start(sample: NodeSample, history: Sequence[NodeSample], baseline: NodeSample) -> NodeSample:
    """The earliest sample of this attempt within the trailing hour (the baseline when there is none)."""
    for earlier in history:
        if earlier.ok and earlier.t >= sample.t - WINDOW_S:
            return earlier
    return baseline


def _gpu_by_index(sample: NodeSample) -> dict[int, GpuReading]:
    return {g.index: g for g in sample.gpus}


def _gain(now: int | None, before: int | None) -> int | None:
    return None if now is None or before is None else now - before


class _Judge:
    def __init__(self, sample: NodeSample, history: Sequence[NodeSample], baseline: NodeSample, limits: Limits,
                 names: Mapping[str, str]) -> None:
        self.sample = sample
        self.baseline = baseline
        self.window = window_start(sample, history, baseline)
        self.limits = limits
        self.names = names
        self.events: list[Event] = []
        self.span = hms(max(0.0, sample.t - self.window.t))

    def add(self, check: str, subject: str, measured: str, expected: str, *, t: float | None = None,
            fatal: bool = True) -> None:
        self.events.append(Event(check, self.sample.node, subject, self.sample.t if t is None else t, fatal,
                                 measured, expected))

    def gpus(self) -> None:
        base, window = _gpu_by_index(self.baseline), _gpu_by_index(self.window)
        for gpu in self.sample.gpus:
            name = gpu_label(gpu, self.names)
            self.gpu(name, gpu, base.get(gpu.index), window.get(gpu.index))

    def gpu(self, name: str, gpu: GpuReading, base: GpuReading | None, window: GpuReading | None) -> None:
        limits = self.limits
        if self.sample is self.baseline and (gpu.ecc_uncorrected or 0) > 0:
            # a volatile uncorrectable error before the load started is already a failure (GPU-01)
            self.add("GPU-01", name, f"{gpu.ecc_uncorrected} volatile uncorrectable ECC errors when the soak "
                     "started", "0 uncorrectable ECC errors")
        gained = _gain(gpu.ecc_uncorrected, base.ecc_uncorrected if base else None)
        sram = _gain(gpu.sram_uncorrected, base.sram_uncorrected if base else None)
        if (gained or 0) > 0 or (sram or 0) > 0:
            self.add("GPU-01", name, f"+{gained or 0} volatile and +{sram or 0} SRAM uncorrectable ECC errors "
                     "since the soak started", "no new uncorrectable ECC error")
        corrected = _gain(gpu.ecc_corrected, window.ecc_corrected if window else None)
        if corrected is not None and corrected > limits.ecc_corrected_per_hour:
            self.add("GPU-02", name, f"+{corrected} correctable ECC errors in {self.span}",
                     f"at most {limits.ecc_corrected_per_hour} per hour")
        if gpu.remap_failure or gpu.remap_pending:
            what = "row-remap failure" if gpu.remap_failure else "row remap pending (GPU reset needed)"
            self.add("GPU-03", name, what, "no pending or failed row remap")
        if gpu.clock_reasons is not None:
            active = [label for bit, label in HW_SLOWDOWN_BITS.items() if gpu.clock_reasons & bit]
            if active:
                self.add("GPU-05", name, f"clock event reasons 0x{gpu.clock_reasons:x} ({', '.join(active)})",
                         "no HwSlowdown/HwThermalSlowdown/HwPowerBrakeSlowdown")
        margin = limits.temperature_margin_c
        for label, value, limit in (("GPU", gpu.temperature_c, gpu.gpu_max_c),
                                    ("memory", gpu.memory_temperature_c, gpu.memory_max_c)):
            if value is not None and limit is not None and value > limit - margin:
                self.add("GPU-06", name, f"{label} temperature {value:g} C (limit {limit:g} C)",
                         f"<= {limit - margin:g} C")
        replay = _gain(gpu.pcie_replay, window.pcie_replay if window else None)
        if replay is not None and replay > limits.pcie_replay_per_hour:
            self.add("GPU-09", name, f"+{replay} PCIe replays in {self.span}",
                     f"at most {limits.pcie_replay_per_hour} per hour")
        recovery = _gain(gpu.nvlink_recovery, base.nvlink_recovery if base else None)
        if recovery is not None and recovery > 0:
            self.add("GPU-11", name, f"+{recovery} NVLink recovery errors since the soak started",
                     "no NVLink recovery")
        for label, now, before, limit in (
            ("replay", gpu.nvlink_replay, window.nvlink_replay if window else None, limits.nvlink_replay_per_hour),
            ("CRC", gpu.nvlink_crc, window.nvlink_crc if window else None, limits.nvlink_crc_per_hour),
        ):
            grown = _gain(now, before)
            if grown is not None and grown > limit:
                self.add("GPU-11", name, f"+{grown} NVLink {label} errors in {self.span}",
                         f"at most {limit:g} per hour")

    def hcas(self, compute: Iterable[str]) -> None:
        for hca in compute:
            now, base, window = self.sample.ib.get(hca), self.baseline.ib.get(hca), self.window.ib.get(hca)
            if now is None:
                continue
            fatal = [f"{c} +{g}" for c in FATAL_COUNTERS if (g := _gain(now.get(c), (base or {}).get(c)) or 0) > 0]
            if fatal:
                self.add("IB-04", hca, ", ".join(fatal) + " since the soak started",
                         f"no gain of {', '.join(FATAL_COUNTERS)}")
            errors = [f"{c} +{g}" for c in ERROR_COUNTERS
                      if (g := _gain(now.get(c), (window or {}).get(c)) or 0) > self.limits.ib_errors_per_hour]
            if errors:
                self.add("IB-04", hca, ", ".join(errors) + f" in {self.span}",
                         f"at most {self.limits.ib_errors_per_hour:g} per hour each")

    def host(self) -> None:
        ue = _gain(self.sample.edac_ue, self.baseline.edac_ue)
        if ue is not None and ue > 0:
            self.add("BRN-04", "node", f"EDAC ue_count +{ue} since the soak started", "EDAC ue_count unchanged")
        ce = _gain(self.sample.edac_ce, self.window.edac_ce)
        if ce is not None and ce > self.limits.edac_ce_per_hour:
            self.add("BRN-04", "node", f"EDAC ce_count +{ce} in {self.span}",
                     f"at most {self.limits.edac_ce_per_hour} per hour")

    def kernel(self, seen: Callable[[str], bool]) -> None:
        for event in self.sample.kernel:
            if seen(event.key):
                continue
            t = self.sample.event_time(event)
            if event.kind == "xid" and event.xid is not None:
                subject = self.names.get(_device(event.pci), f"PCI {event.pci}") if event.pci else "node"
                fatal = xid_table.is_fatal(event.xid, event.text)
                self.add("GPU-04", subject, xid_table.describe(event.xid), "no fatal Xid", t=t, fatal=fatal)
            elif event.kind in ("mce", "edac-ue"):
                self.add("BRN-04", "node", f"kernel: {event.text[:160]}", "no machine check, no EDAC UE", t=t)
            elif event.kind == "aer-uncorrected":
                self.add("GPU-09", "node", f"kernel: {event.text[:160]}", "no uncorrected AER error", t=t)
            elif event.kind in ("edac-ce", "aer-corrected"):
                self.add("BRN-07", "node", f"kernel: {event.text[:160]}", "noted", t=t, fatal=False)


def judge_sample(sample: NodeSample, *, history: Sequence[NodeSample], baseline: NodeSample, limits: Limits,
                 names: Mapping[str, str], compute_hcas: Iterable[str],
                 seen: Callable[[str], bool]) -> list[Event]:
    """Events in ``sample`` against this attempt's ``baseline`` and earlier samples (``history``, oldest first).

    ``seen(key)`` says whether a kernel-log line was already judged (it is judged once).
    """
    if not sample.ok:
        return []
    judge = _Judge(sample, history, baseline, limits, names)
    judge.kernel(seen)
    judge.gpus()
    judge.hcas(compute_hcas)
    judge.host()
    return judge.events
