"""Kernel log lines about GPUs: NVRM ``Xid``, NVSwitch ``SXid``, PCIe bandwidth
limits and link carrier changes.

Reads plain ``dmesg`` (``[  123.456789]``), ``dmesg -T`` (``[Sun Feb 23 ...]``),
``dmesg --time-format iso`` with or without ``--decode`` (``kern  :warn  :``),
``journalctl -k`` / syslog (``Feb 23 16:24:18 host kernel:``) and bare lines.
Lines that say nothing of interest are ignored: a log without Xids is a valid
result with zero events.

Newer drivers (570) may report a GPU that has fallen off the bus without an Xid
line, in NVRM's own words over up to three lines (``NVRM: The NVIDIA GPU
0000:b3:00.0`` / ``NVRM: (PCI ID: 10de:26b5) installed in this system has`` /
``NVRM: fallen off the bus and is not responding to commands.``): that is read
as an Xid 79 event (the code NVIDIA gives the condition) unless the log also
holds the Xid 79 line for that GPU; its text says no Xid number was printed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from burnin.parsers._common import fail, iter_lines, parse_float, parse_int

TOOL = "dmesg-xid"


@dataclass(frozen=True, slots=True)
class XidEvent:
    pci: str  # as printed, e.g. "0000:9b:00"
    xid: int
    pid: int | None
    text: str  # the message after the pid/name fields
    timestamp: str | None  # as printed, in whatever format the log used
    process: str | None  # the "name=" field, when printed and known
    line: int  # 1-based line number in the input


@dataclass(frozen=True, slots=True)
class SxidEvent:
    pci: str
    sxid: int
    device: str | None  # "nvidia-nvswitch3"
    severity: str | None  # "Fatal", "Non-fatal", ...
    text: str
    timestamp: str | None
    line: int


@dataclass(frozen=True, slots=True)
class PcieLimitEvent:
    """``... available PCIe bandwidth, limited by 16.0 GT/s PCIe x16 link at ...``"""

    device: str
    available_gbps: float | None
    limited_speed_gts: float | None
    limited_width: int | None
    limited_at: str | None
    capable_gbps: float | None
    capable_speed_gts: float | None
    capable_width: int | None
    timestamp: str | None
    line: int


@dataclass(frozen=True, slots=True)
class LinkEvent:
    """``ib6: lost carrier`` / ``ib6: Gained carrier`` (systemd-networkd or kernel)."""

    interface: str
    up: bool
    timestamp: str | None
    line: int


@dataclass(frozen=True, slots=True)
class XidReport:
    events: tuple[XidEvent, ...]
    sxid_events: tuple[SxidEvent, ...]
    pcie_limits: tuple[PcieLimitEvent, ...]
    link_events: tuple[LinkEvent, ...]
    gpu_uuids: dict[str, str]  # PCI (as printed) -> GPU UUID, from "NVRM: GPU at PCI:..."
    lines: int


_XID = re.compile(r"\b(S?Xid) \((?:PCI:)?([0-9A-Fa-f]{1,8}(?::[0-9A-Fa-f]{1,8}){1,2}(?:\.\d)?)\):\s?")
_PID = re.compile(r"pid='?(<unknown>|\d+)'?")
_NAME = re.compile(r"name=([^,]*)")
_SEVERITIES = frozenset({"fatal", "non-fatal", "nonfatal"})
_SW_DEV = re.compile(r"(nvidia-nvswitch\d+)")
_GPU_AT = re.compile(r"NVRM: GPU at PCI:([0-9A-Fa-f:.]{7,16}): (GPU-[0-9A-Fa-f-]{8,40})")
_LIMIT = re.compile(
    r"(?:pci )?([0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d): ([\d.]+) Gb/s available PCIe"
    r" bandwidth, limited by ([\d.]+) GT/s PCIe x(\d+) link at ([0-9A-Fa-f:.]+)"
    r"(?: \(capable of ([\d.]+) Gb/s with ([\d.]+) GT/s PCIe x(\d+) link\))?"
)
_FALLEN_GPU = re.compile(r"NVRM: The NVIDIA GPU ([0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-7])?\b")
_FALLEN_TEXT = "GPU has fallen off the bus and is not responding to commands (NVRM message; no Xid number printed)"
_FALLEN_SPAN = 3  # lines from "The NVIDIA GPU ..." to "fallen off the bus"
_CARRIER = re.compile(r"\b([A-Za-z][\w.-]{0,30}): (lost carrier|[Gg]ained carrier)\b")

# Timestamp forms, tried on the text before the message.
_TS_MONO = re.compile(r"\[\s*(\d+\.\d+)\]")
_TS_CTIME = re.compile(r"\[([A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4})\]")
_TS_ISO = re.compile(r"(\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:[+-]\d\d:?\d\d|Z)?)")
_TS_SYSLOG = re.compile(r"^([A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d(?:\.\d+)?) ")


def _timestamp(prefix: str) -> str | None:
    for pattern in (_TS_CTIME, _TS_ISO):
        m = pattern.search(prefix)
        if m:
            return m.group(1)
    m = _TS_SYSLOG.match(prefix.lstrip())
    if m:
        return m.group(1)
    m = _TS_MONO.search(prefix)
    return m.group(1) if m else None


def _xid_fields(rest: str) -> tuple[int | None, str | None, str]:
    """Split ``"pid=12, name=python, message"`` into pid, process name and message."""
    pid: int | None = None
    name: str | None = None
    parts = rest.split(", ")
    i = 0
    while i < len(parts) and i < 2:
        part = parts[i].strip()
        m = _PID.fullmatch(part)
        if m:
            pid = parse_int(m.group(1))
            i += 1
            continue
        m = _NAME.fullmatch(part)
        if m:
            value = m.group(1).strip()
            name = None if value in ("<unknown>", "") else value
            i += 1
            continue
        break
    return pid, name, ", ".join(parts[i:]).strip()


def parse_xid_events(text: str) -> XidReport:
    """Collect Xid/SXid events (and PCIe-limit and carrier lines) from a kernel log.

    Never fails on content: text without any such line gives empty tuples.
    """
    if not isinstance(text, str):
        fail(TOOL, f"expected text, got {type(text).__name__}")
    events: list[XidEvent] = []
    sxids: list[SxidEvent] = []
    limits: list[PcieLimitEvent] = []
    links: list[LinkEvent] = []
    uuids: dict[str, str] = {}
    fallen: dict[str, tuple[str | None, int]] = {}  # PCI -> (timestamp, line) of NVRM's "fallen off the bus"
    named: tuple[str, str | None, int] | None = None  # the last "The NVIDIA GPU <pci>": (pci, timestamp, line)
    non_blank = 0
    for number, line in enumerate(iter_lines(text), start=1):
        if line and not line.isspace():
            non_blank += 1
        if "NVRM: The NVIDIA GPU" in line:
            gpu = _FALLEN_GPU.search(line)
            if gpu is not None:
                named = (gpu.group(1), _timestamp(line[: gpu.start()]), number)
        if named is not None and "fallen off the bus" in line and "Xid" not in line:
            if number - named[2] < _FALLEN_SPAN:
                fallen.setdefault(named[0], (named[1], named[2]))
            named = None
        if "Xid" in line:
            m = _XID.search(line)
            if m:
                kind, pci = m.group(1), m.group(2)
                head, _, rest = line[m.end() :].partition(",")
                code = parse_int(head)
                if code is None:
                    continue
                stamp = _timestamp(line[: m.start()])
                if kind == "Xid":
                    pid, name, message = _xid_fields(rest)
                    events.append(XidEvent(pci, code, pid, message, stamp, name, number))
                else:
                    sev, _, message = rest.strip().partition(",")
                    if sev.strip().lower() not in _SEVERITIES:
                        sev, message = "", rest
                    dev = _SW_DEV.search(line[: m.start()])
                    sxids.append(
                        SxidEvent(
                            pci=pci,
                            sxid=code,
                            device=dev.group(1) if dev else None,
                            severity=sev.strip() or None,
                            text=message.strip(),
                            timestamp=stamp,
                            line=number,
                        )
                    )
                continue
        if "GPU at PCI:" in line:
            m = _GPU_AT.search(line)
            if m:
                uuids[m.group(1)] = m.group(2)
            continue
        if "limited by" in line:
            m = _LIMIT.search(line)
            if m:
                limits.append(
                    PcieLimitEvent(
                        device=m.group(1),
                        available_gbps=parse_float(m.group(2)),
                        limited_speed_gts=parse_float(m.group(3)),
                        limited_width=parse_int(m.group(4)),
                        limited_at=m.group(5).rstrip("."),
                        capable_gbps=parse_float(m.group(6)),
                        capable_speed_gts=parse_float(m.group(7)),
                        capable_width=parse_int(m.group(8)),
                        timestamp=_timestamp(line[: m.start()]),
                        line=number,
                    )
                )
            continue
        if "carrier" in line:
            m = _CARRIER.search(line)
            if m:
                links.append(
                    LinkEvent(
                        interface=m.group(1),
                        up=m.group(2).lower().startswith("gained"),
                        timestamp=_timestamp(line[: m.start()]),
                        line=number,
                    )
                )
    seen_79 = {e.pci.lower().removeprefix("pci:")[:10] for e in events if e.xid == 79}
    for pci, (stamp, number) in fallen.items():
        if pci.lower() not in seen_79:
            events.append(XidEvent(pci, 79, None, _FALLEN_TEXT, stamp, None, number))
    events.sort(key=lambda e: e.line)
    return XidReport(
        events=tuple(events),
        sxid_events=tuple(sxids),
        pcie_limits=tuple(limits),
        link_events=tuple(links),
        gpu_uuids=uuids,
        lines=non_blank,
    )
