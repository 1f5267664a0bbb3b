"""The kernel's driver messages to watch events (pure).

A record is an event only when the kernel wrote it (``KernelRecord.trusted``,
decided by ``burnin.watch.records`` from the log's format) and its message is a
driver's own, from its first character:

- ``NVRM: Xid (PCI:0000:1b:00): 79, ...``: the NVIDIA driver's Xid;
- ``nvidia-nvswitch3: SXid (PCI:0000:8a:00.0): 24007, Fatal, ...``: an NVSwitch's SXid headline
  (continuation lines carry no severity: the headline was the event);
- ``mlx5_core 0000:4c:00.0: Port module event: module 0, Cable unplugged``: the HCA's cable;
- ``ib0: lost carrier`` / ``ib0: Gained carrier``: an IPoIB interface's link.

A message that only quotes such a text (a segfault line naming a library, an
audit line naming a file) is no event. The fields are those the GPU-04 check's
parser (``burnin.parsers.dmesg``) reads, here anchored at the message's start
(and cheap: under a flood the kernel-log thread reads thousands of lines a
second). An event about a device that is not this node's
(``burnin.watch.devices``) carries ``foreign``: it is recorded, never acted on.
"""

from __future__ import annotations

import re

from burnin.text import printable
from burnin.watch.devices import NodeDevices
from burnin.watch.events import Kind, WatchEvent, gpu_bus
from burnin.watch.records import KernelRecord

_PCI = r"(?:PCI:)?([0-9a-fA-F]{1,8}(?::[0-9a-fA-F]{1,8}){1,2}(?:\.\d)?)"
# NVRM: Xid (PCI:0000:1b:00): 79, pid=..., name=..., message
_XID_LINE = re.compile(rf"NVRM: Xid \({_PCI}\): (\d{{1,6}}),")
# nvidia-nvswitch3: SXid (PCI:0000:8a:00.0): 24007, Fatal, message (continuation lines: no severity)
_SXID_LINE = re.compile(rf"(nvidia-nvswitch\d{{1,4}}): SXid \({_PCI}\): (\d{{1,6}}), ?([^,]*)")
# mlx5_core 0000:4c:00.0: Port module event: module 0, Cable unplugged
_MODULE = re.compile(r"mlx5_core ([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.\d):? "
                     r"Port module event(?:\[error\])?: module (\d+), (Cable (?:un)?plugged|[A-Za-z ]{1,40})")
# An IPoIB interface's carrier, as the whole message.
_CARRIER = re.compile(r"(ib[\w.]{0,14}): (lost carrier|[Gg]ained carrier)\s*")


def pci_function(text: str) -> str:
    """``0000:8a:00.0`` from ``0000:8A:00.0``, ``8a:00.0`` or ``0000:8a:00`` (function 0)."""
    parts = text.strip().lower().removeprefix("pci:").split(":")
    if len(parts) == 2:
        parts = ["0000", *parts]
    if len(parts) == 3 and "." not in parts[2]:
        parts[2] += ".0"
    return ":".join(parts)


def events_from_record(record: KernelRecord, detected_at: float, labels: dict[str, str],
                       devices: NodeDevices) -> list[WatchEvent]:
    """The watch events in one kernel record (most records have none; an untrusted record never has).

    ``labels`` names devices: a GPU's bus (``0000:1b:00``) -> ``gpu3`` (from NVML), an HCA's
    PCI function (``0000:4c:00.0``) -> ``mlx5_2`` (from sysfs). ``devices`` are this node's.
    """
    if not record.trusted:
        return []
    text = record.text
    shown = printable(text, limit=300)

    def event(kind: Kind, device: str, code: int | None = None, label: str | None = None,
              foreign: str = "") -> WatchEvent:
        return WatchEvent("kmsg", kind, device, code, shown, detected_at, label=label,
                          kernel_usec=record.usec, kernel_seq=record.seq, foreign=foreign)

    xid = _XID_LINE.match(text)
    if xid is not None:
        bus = gpu_bus(xid.group(1))
        return [event(Kind.XID, bus, int(xid.group(2)), labels.get(bus),
                      "" if bus in devices.gpus else "not a GPU of this node")]
    sxid = _SXID_LINE.match(text)
    if sxid is not None:
        switch, pci, code, severity = sxid.groups()
        if severity.strip().lower() not in ("fatal", "non-fatal"):
            return []
        own = devices.has_nvidia_function(pci_function(pci))
        return [event(Kind.SXID_FATAL if severity.strip().lower() == "fatal" else Kind.SXID, switch, int(code),
                      foreign="" if own else "not an NVSwitch of this node")]
    module = _MODULE.match(text)
    if module is not None:
        bdf = module.group(1).lower()
        foreign = "" if devices.has_hca(bdf) else "not an HCA of this node"
        state = module.group(3)
        if state == "Cable plugged":
            return [event(Kind.IB_PORT_UP, bdf, label=labels.get(bdf), foreign=foreign)]
        if state == "Cable unplugged" or "[error]" in text:
            return [event(Kind.IB_PORT_DOWN, bdf, label=labels.get(bdf), foreign=foreign)]
        return []
    carrier = _CARRIER.fullmatch(text)
    if carrier is not None:
        name = carrier.group(1)
        foreign = "" if devices.has_netdev(name) else "not a network interface of this node"
        kind = Kind.IB_PORT_DOWN if carrier.group(2) == "lost carrier" else Kind.IB_PORT_UP
        return [event(kind, name, foreign=foreign)]
    return []
