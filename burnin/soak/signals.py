"""One monitoring sample of one node, read out of the collector's facts (pure).

A :class:`NodeSample` holds what BRN-07 watches: per GPU the temperatures
(and their limits), power, clock-event reasons, ECC, row remapping, PCIe
replays and NVLink error totals; per HCA the port counters; EDAC counts; and
the kernel log's Xid, machine-check, EDAC and AER lines. A reading the node
could not give is ``None``: judging treats it as not measured, never as
healthy. Power and temperatures fall back to ``nvidia-smi dmon`` when NVML
gave none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from typing import Any

from burnin.facts import Facts, GpuFacts
from burnin.facts.gpu import (
    CLOCK_EVENT_REASONS,
    ECC_VOLATILE_CORRECTED,
    ECC_VOLATILE_UNCORRECTED,
    REMAP_FAILURE,
    REMAP_PENDING,
    SRAM_UNCORRECTED,
    TEMPERATURE,
)
from burnin.facts.values import count, items, mapping, number, text
from burnin.parsers.dmesg import parse_xid_events

_STAMP = re.compile(r"^\s*\[\s*(\d{1,10}\.\d{1,9})\]")


@dataclass(frozen=True, slots=True)
class GpuReading:
    index: int
    bus_id: str | None = None
    lost: bool = False
    temperature_c: float | None = None
    gpu_max_c: float | None = None
    memory_temperature_c: float | None = None
    memory_max_c: float | None = None
    power_w: float | None = None
    clock_reasons: int | None = None
    ecc_corrected: int | None = None
    ecc_uncorrected: int | None = None
    sram_uncorrected: int | None = None
    remap_pending: bool | None = None
    remap_failure: bool | None = None
    pcie_replay: int | None = None
    nvlink_replay: int | None = None
    nvlink_recovery: int | None = None
    nvlink_crc: int | None = None


@dataclass(frozen=True, slots=True)
class KernelEvent:
    kind: str  # "xid", "mce", "edac-ue", "edac-ce", "aer-uncorrected", "aer-corrected"
    text: str
    uptime_s: float | None  # the log's own timestamp, when it printed one
    xid: int | None = None
    pci: str | None = None

    @property
    def key(self) -> str:
        return f"{self.kind}|{self.uptime_s}|{self.text}"


@dataclass(frozen=True, slots=True)
class NodeSample:
    node: str
    t: float  # soak seconds
    stage: str  # the stage running when it was taken ("" between stages)
    attempt: int  # the node's soak attempt (its clock restarted when it went up by one)
    error: str | None = None  # the node could not be sampled at all
    missing: tuple[str, ...] = ()  # sources that failed, with why
    uptime_s: float | None = None
    boot_id: str | None = None
    gpus: tuple[GpuReading, ...] = ()
    ib: dict[str, dict[str, int]] = field(default_factory=dict)  # HCA -> port 1 counters
    edac_ce: int | None = None
    edac_ue: int | None = None
    kernel: tuple[KernelEvent, ...] = ()

    def to_json(self) -> dict[str, Any]:
        # by hand: dataclasses.asdict deep-copies every value, and a soak writes thousands of these
        return {"node": self.node, "t": self.t, "stage": self.stage, "attempt": self.attempt, "error": self.error,
                "missing": list(self.missing), "uptime_s": self.uptime_s, "boot_id": self.boot_id,
                "gpus": [{name: getattr(g, name) for name in _GPU_FIELDS} for g in self.gpus],
                "ib": {hca: dict(counters) for hca, counters in self.ib.items()}, "edac_ce": self.edac_ce,
                "edac_ue": self.edac_ue,
                "kernel": [{name: getattr(e, name) for name in _EVENT_FIELDS} for e in self.kernel]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> NodeSample:
        return cls(
            node=data["node"], t=float(data["t"]), stage=data.get("stage", ""), attempt=int(data.get("attempt", 0)),
            error=data.get("error"), missing=tuple(data.get("missing", ())), uptime_s=data.get("uptime_s"),
            boot_id=data.get("boot_id"), gpus=tuple(GpuReading(**g) for g in data.get("gpus", ())),
            ib={k: dict(v) for k, v in data.get("ib", {}).items()}, edac_ce=data.get("edac_ce"),
            edac_ue=data.get("edac_ue"), kernel=tuple(KernelEvent(**e) for e in data.get("kernel", ())),
        )

    @property
    def ok(self) -> bool:
        return self.error is None

    def event_time(self, event: KernelEvent) -> float:
        """When a kernel event happened, in soak seconds (the sample's time when the log has no stamp)."""
        if event.uptime_s is None or self.uptime_s is None or event.uptime_s > self.uptime_s:
            return self.t
        return max(0.0, self.t - (self.uptime_s - event.uptime_s))


_GPU_FIELDS = tuple(f.name for f in fields(GpuReading))
_EVENT_FIELDS = tuple(f.name for f in fields(KernelEvent))


def _dmon(facts: Facts) -> dict[int, dict[str, float | None]]:
    """``nvidia-smi dmon``'s latest power and temperatures by GPU, where NVML gave none."""
    record = facts.command_record("dmon") or {}
    output = text(record.get("stdout"))
    if not output or record.get("exit_status") != 0:
        return {}
    from burnin.errors import ParseError
    from burnin.parsers.dmon import parse_dmon

    try:
        return {gpu: sample.values for gpu, sample in parse_dmon(output).latest().items()}
    except ParseError:
        return {}


def _gpus(facts: Facts) -> tuple[GpuReading, ...]:
    listed = facts.gpus_reported()
    # what only a soak gathers (collector source gpu-telemetry), by NVML index
    extra = {g.get("index"): g for g in items(mapping(facts.section("gpu_telemetry")).get("gpus"))
             if isinstance(g, dict)}
    dmon = _dmon(facts)
    by_index = {gpu.index: gpu for gpu in listed if gpu.index is not None}
    readings: list[GpuReading] = []
    for index in [gpu.index for gpu in listed] if listed else sorted(dmon):
        if index is None:
            continue
        gpu = by_index.get(index, GpuFacts({}))
        more = extra.get(index, {})
        backup = dmon.get(index, {})
        temperature = gpu.read(TEMPERATURE)
        memory_temperature = number(more.get("memory_temperature_c"))
        power_mw = number(more.get("power_mw"))
        readings.append(GpuReading(
            index=index,
            bus_id=gpu.bus_id,
            lost=gpu.lost,
            temperature_c=temperature if gpu.get(*TEMPERATURE.path) is not None else backup.get("gtemp"),
            gpu_max_c=gpu.temperature_limit(),
            memory_temperature_c=memory_temperature if more.get("memory_temperature_c") is not None
            else backup.get("mtemp"),
            memory_max_c=number(more.get("memory_max_c")),
            power_w=power_mw / 1000 if power_mw is not None else backup.get("pwr"),
            clock_reasons=gpu.read(CLOCK_EVENT_REASONS),
            ecc_corrected=gpu.read(ECC_VOLATILE_CORRECTED),
            ecc_uncorrected=gpu.read(ECC_VOLATILE_UNCORRECTED),
            sram_uncorrected=gpu.read(SRAM_UNCORRECTED),
            remap_pending=gpu.read(REMAP_PENDING),
            remap_failure=gpu.read(REMAP_FAILURE),
            pcie_replay=count(more.get("pcie_replay")),
            nvlink_replay=gpu.nvlink_total("replay"),
            nvlink_recovery=gpu.nvlink_total("recovery"),
            nvlink_crc=gpu.nvlink_total("crc_flit"),
        ))
    return tuple(readings)


def _ib(facts: Facts) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for hca in facts.hcas_reported():
        port = hca.port("1")
        counters = port.counters if port is not None else None
        if counters is not None:
            out[hca.name] = {k: v for k, v in counters.items() if count(v) is not None}
    return out


def _stamp(line: str) -> float | None:
    match = _STAMP.match(line)
    return float(match.group(1)) if match else None


def kernel_events(text: str) -> tuple[KernelEvent, ...]:
    """Xid, machine-check, EDAC and AER lines of a kernel log (other lines are ignored)."""
    events: list[KernelEvent] = []
    for xid in parse_xid_events(text).events:
        stamp = float(xid.timestamp) if xid.timestamp and _STAMP.match(f"[{xid.timestamp}]") else None
        events.append(KernelEvent("xid", f"Xid {xid.xid}: {xid.text}", stamp, xid.xid, xid.pci))
    for line in text.splitlines():
        lower = line.lower()
        body = line.split("]", 1)[1].strip() if _STAMP.match(line) else line.strip()
        if "mce:" in lower or "machine check" in lower:
            events.append(KernelEvent("mce", body, _stamp(line)))
        elif "edac" in lower and (" ue " in lower or "uncorrected" in lower):
            events.append(KernelEvent("edac-ue", body, _stamp(line)))
        elif "edac" in lower and (" ce " in lower or "corrected" in lower):
            events.append(KernelEvent("edac-ce", body, _stamp(line)))
        elif "aer:" in lower and "uncorrected" in lower:
            events.append(KernelEvent("aer-uncorrected", body, _stamp(line)))
        elif "aer:" in lower and "corrected" in lower:
            events.append(KernelEvent("aer-corrected", body, _stamp(line)))
    return tuple(events)


def _edac(host: dict[str, Any], key: str) -> int | None:
    controllers = host.get("edac")
    if not host.get("edac_present") or not isinstance(controllers, dict) or not controllers:
        return None
    values = [count(c.get(key)) if isinstance(c, dict) else None for c in controllers.values()]
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def read_sample(facts: Facts, *, t: float, stage: str, attempt: int) -> NodeSample:
    """The monitoring sample in one node's collector output."""
    if facts.unreachable:
        return NodeSample(facts.node, t, stage, attempt, error=facts.unreachable)
    missing = tuple(f"{name}: {why}" for name, why in facts.failed_sources().items())
    host = mapping(facts.section("host_health"))
    record = facts.command_record("kernel-events") or {}
    log = text(record.get("stdout")) if not record.get("error") else None
    if log is None:
        missing += ("kernel-events: no kernel log",)
    return NodeSample(
        node=facts.node, t=t, stage=stage, attempt=attempt, missing=missing,
        uptime_s=number(host.get("uptime_s")), boot_id=text(host.get("boot_id")), gpus=_gpus(facts), ib=_ib(facts),
        edac_ce=_edac(host, "ce_count"), edac_ue=_edac(host, "ue_count"),
        kernel=kernel_events(log) if log is not None else (),
    )
