"""Kernel log records to watch events (pure).

``/dev/kmsg`` gives one record per read: ``<prio>,<seq>,<usec>,<flags>[,...];<text>``
followed by optional continuation lines (`` KEY=value``). A file of such
records (the simulator's kernel log) reads the same way, one record a line.
Lines in any other form (``dmesg``, ``journalctl -k``, syslog) are taken whole
as the text, without sequence number or time, so a plain log file can be
followed too.

What counts is recognised by the kernel-log parser the GPU-04 check uses
(``burnin.parsers.dmesg``): NVRM Xid lines, NVSwitch SXid headlines and link
carrier changes; plus the mlx5 driver's port module (cable) events.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from burnin.parsers.dmesg import parse_xid_events
from burnin.text import printable
from burnin.watch.events import Kind, WatchEvent, gpu_bus

_RECORD = re.compile(r"(\d{1,3}),(\d{1,20}),(\d{1,20}),[^;]{0,64};(.*)", re.DOTALL)
# mlx5_core 0000:4c:00.0: Port module event: module 0, Cable unplugged
_MODULE = re.compile(r"mlx5_core ([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.\d):? "
                     r"Port module event(?:\[error\])?: module (\d+), (Cable (?:un)?plugged|[A-Za-z ]{1,40})")
# Link carriers that belong to the InfiniBand fabric (IPoIB interfaces).
_IB_INTERFACE = re.compile(r"ib[\w.]{0,14}")


@dataclass(frozen=True, slots=True)
class KernelRecord:
    seq: int | None
    usec: int | None
    level: int | None
    text: str


def parse_record(line: str) -> KernelRecord | None:
    """One kmsg record (or a plain log line); None for kmsg continuation and blank lines."""
    if not line.strip() or line.startswith(" "):
        return None
    first = line.split("\n", 1)[0].rstrip("\r")
    match = _RECORD.fullmatch(first)
    if match is None:
        return KernelRecord(None, None, None, first)
    prio, seq, usec, text = match.groups()
    return KernelRecord(int(seq), int(usec), int(prio) & 7, text)


def events_from_record(record: KernelRecord, detected_at: float,
                       labels: dict[str, str] | None = None) -> list[WatchEvent]:
    """The watch events in one kernel record (most records have none).

    ``labels`` names devices: a GPU's bus (``0000:1b:00``) -> ``gpu3`` (from NVML), an HCA's
    PCI function (``0000:4c:00.0``) -> ``mlx5_2`` (from sysfs).
    """
    text = record.text
    labels = labels or {}
    shown = printable(text, limit=300)

    def event(kind: Kind, device: str, code: int | None = None, label: str | None = None) -> WatchEvent:
        return WatchEvent("kmsg", kind, device, code, shown, detected_at, label=label,
                          kernel_usec=record.usec, kernel_seq=record.seq)

    found: list[WatchEvent] = []
    if "Xid" in text or "carrier" in text:
        report = parse_xid_events(text)
        for xid in report.events:
            bus = gpu_bus(xid.pci)
            found.append(event(Kind.XID, bus, xid.xid, labels.get(bus)))
        for sxid in report.sxid_events:  # continuation lines carry no severity: the headline was the event
            severity = (sxid.severity or "").lower()
            if severity in ("fatal", "non-fatal"):
                found.append(event(Kind.SXID_FATAL if severity == "fatal" else Kind.SXID,
                                   sxid.device or f"NVSwitch PCI {sxid.pci}", sxid.sxid))
        for link in report.link_events:
            if _IB_INTERFACE.fullmatch(link.interface):
                found.append(event(Kind.IB_PORT_UP if link.up else Kind.IB_PORT_DOWN, link.interface))
    if "Port module event" in text:
        module = _MODULE.search(text)
        if module is not None:
            bdf = module.group(1).lower()
            state = module.group(3)
            if state == "Cable plugged":
                found.append(event(Kind.IB_PORT_UP, bdf, label=labels.get(bdf)))
            elif state == "Cable unplugged" or "[error]" in text:
                found.append(event(Kind.IB_PORT_DOWN, bdf, label=labels.get(bdf)))
    return found
