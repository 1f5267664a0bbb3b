"""``lspci -vv`` / ``-vvv`` (with or without ``-D`` and ``-nn``), one stanza or a
whole machine.

Per device: address (normalised to ``0000:1a:00.0``), class and name, NUMA node,
link capability and status with lspci's ``(ok)``/``(downgraded)`` marks, ACS
capability and control bits, bridge bus numbers and AER status bits.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from burnin.parsers._common import fail, head_excerpt, iter_lines, parse_int, require_text

TOOL = "lspci"


@dataclass(frozen=True, slots=True)
class PciDevice:
    address: str  # "0000:1a:00.0"
    device_class: str  # "Ethernet controller"
    name: str  # "Mellanox Technologies MT2910 Family [ConnectX-7]"
    revision: str | None
    vendor_id: str | None  # with -nn only
    device_id: str | None
    numa_node: int | None
    lnkcap_speed_gts: float | None
    lnkcap_width: int | None
    lnksta_speed_gts: float | None
    lnksta_width: int | None
    lnksta_downgraded: bool
    acs_cap: dict[str, bool] | None
    acs_ctl: dict[str, bool] | None
    port_type: str | None  # "Endpoint", "Downstream Port", "Root Port", ...
    secondary_bus: int | None  # bridges: "Bus: primary=17, secondary=19, subordinate=19"
    subordinate_bus: int | None
    physical_slot: str | None
    kernel_driver: str | None
    aer_uncorrectable: dict[str, bool] | None  # UESta bits
    aer_correctable: dict[str, bool] | None  # CESta bits


@dataclass(frozen=True, slots=True)
class LspciReport:
    devices: tuple[PciDevice, ...]


_HEAD = re.compile(r"^(?:([0-9a-fA-F]{4,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7]) (.*)$")
_IDS = re.compile(r" \[([0-9a-fA-F]{4}):([0-9a-fA-F]{4})\]")
_CLASS_CODE = re.compile(r" \[[0-9a-fA-F]{4}\]$")
_REV = re.compile(r" \(rev ([0-9a-fA-F]{1,4})\)")
_PROGIF = re.compile(r" \(prog-if [^)]{0,40}\)")
_SPEED = re.compile(r"Speed ([\d.]{1,8})GT/s")
_WIDTH = re.compile(r"Width x(\d{1,3})")
_EXPRESS = re.compile(r"Express \(v\d\) ([A-Za-z ]+?)(?: \(Slot[+-]\))?, MSI")
_BUS = re.compile(r"secondary=([0-9a-fA-F]{2}), subordinate=([0-9a-fA-F]{2})")


@dataclass
class _Draft:
    address: str
    device_class: str
    name: str
    revision: str | None
    vendor_id: str | None
    device_id: str | None
    numa_node: int | None = None
    lnkcap: str | None = None
    lnksta: str | None = None
    acs_cap: dict[str, bool] | None = None
    acs_ctl: dict[str, bool] | None = None
    port_type: str | None = None
    secondary_bus: int | None = None
    subordinate_bus: int | None = None
    physical_slot: str | None = None
    kernel_driver: str | None = None
    uesta: dict[str, bool] | None = None
    cesta: dict[str, bool] | None = None


def _flags(text: str) -> dict[str, bool]:
    """``"SrcValid+ TransBlk-"`` -> ``{"SrcValid": True, "TransBlk": False}``."""
    out: dict[str, bool] = {}
    for tok in text.split():
        name, sign = tok[:-1], tok[-1:]
        if sign in ("+", "-") and name[:1].isalpha() and name.replace("_", "").isalnum():
            out[name] = sign == "+"
    return out


def _speed(text: str | None) -> float | None:
    if not text:
        return None
    m = _SPEED.search(text)
    if m is None:
        return None
    try:
        return float(m.group(1))
    except ValueError:
        return None


def _width(text: str | None) -> int | None:
    if not text:
        return None
    m = _WIDTH.search(text)
    return int(m.group(1)) if m else None


def _draft(m: re.Match[str]) -> _Draft:
    domain = (m.group(1) or "0000").lower()
    if len(domain) < 4:
        domain = domain.rjust(4, "0")
    address = f"{domain}:{m.group(2).lower()}:{m.group(3).lower()}.{m.group(4)}"
    rest = m.group(5)
    cls, _, name = rest.partition(": ")
    if not _:
        cls, name = "", rest
    cls = _CLASS_CODE.sub("", cls.strip())
    vendor_id = device_id = None
    ids = _IDS.search(name)
    if ids:
        vendor_id, device_id = ids.group(1).lower(), ids.group(2).lower()
        name = name[: ids.start()] + name[ids.end() :]
    rev = _REV.search(name)
    revision = rev.group(1) if rev else None
    name = _PROGIF.sub("", _REV.sub("", name)).strip()
    return _Draft(address, cls, name, revision, vendor_id, device_id)


def _finish(d: _Draft) -> PciDevice:
    cap_speed, cap_width = _speed(d.lnkcap), _width(d.lnkcap)
    sta_speed, sta_width = _speed(d.lnksta), _width(d.lnksta)
    if d.lnksta is not None and ("(ok)" in d.lnksta or "downgraded" in d.lnksta):
        downgraded = "downgraded" in d.lnksta
    else:
        # Old lspci prints no marks: compare with the capability ourselves.
        downgraded = (sta_speed is not None and cap_speed is not None and sta_speed < cap_speed) or (
            sta_width is not None and cap_width is not None and sta_width < cap_width
        )
    return PciDevice(
        address=d.address,
        device_class=d.device_class,
        name=d.name,
        revision=d.revision,
        vendor_id=d.vendor_id,
        device_id=d.device_id,
        numa_node=d.numa_node,
        lnkcap_speed_gts=cap_speed,
        lnkcap_width=cap_width,
        lnksta_speed_gts=sta_speed,
        lnksta_width=sta_width,
        lnksta_downgraded=downgraded,
        acs_cap=d.acs_cap,
        acs_ctl=d.acs_ctl,
        port_type=d.port_type,
        secondary_bus=d.secondary_bus,
        subordinate_bus=d.subordinate_bus,
        physical_slot=d.physical_slot,
        kernel_driver=d.kernel_driver,
        aer_uncorrectable=d.uesta,
        aer_correctable=d.cesta,
    )


def _apply(d: _Draft, line: str) -> None:
    """Read one indented line of a stanza into the draft."""
    key, sep, value = line.partition(":")
    if not sep:
        return
    key = key.strip()
    value = value.strip()
    if key == "NUMA node":
        d.numa_node = parse_int(value)
    elif key == "LnkCap" and d.lnkcap is None:
        d.lnkcap = value
    elif key == "LnkSta" and d.lnksta is None:
        d.lnksta = value
    elif key == "ACSCap":
        d.acs_cap = _flags(value)
    elif key == "ACSCtl":
        d.acs_ctl = _flags(value)
    elif key == "UESta" and d.uesta is None:
        d.uesta = _flags(value)
    elif key == "CESta" and d.cesta is None:
        d.cesta = _flags(value)
    elif key == "Physical Slot":
        d.physical_slot = value
    elif key == "Kernel driver in use":
        d.kernel_driver = value
    elif key == "Bus":
        m = _BUS.search(value)
        if m:
            d.secondary_bus = int(m.group(1), 16)
            d.subordinate_bus = int(m.group(2), 16)
    elif key.startswith("Capabilities") and d.port_type is None and "Express" in value:
        m = _EXPRESS.search(value)
        if m:
            d.port_type = m.group(1).strip()


def parse_lspci(text: str) -> LspciReport:
    """Parse ``lspci -vv``/``-vvv`` output; a ParseError when no device is found."""
    require_text(TOOL, text)
    devices: list[PciDevice] = []
    current: _Draft | None = None
    for line in iter_lines(text):
        if not line.strip():
            continue
        if not line[0].isspace():
            m = _HEAD.match(line.rstrip())
            if m:
                if current is not None:
                    devices.append(_finish(current))
                current = _draft(m)
            continue
        if current is not None:
            _apply(current, line)
    if current is not None:
        devices.append(_finish(current))
    if not devices:
        fail(TOOL, "no 'BB:DD.F class: name' device line found", head_excerpt(text))
    return LspciReport(devices=tuple(devices))


# A device line as parse_lspci takes it: the address, a space, then some text (lines split on "\n" only).
_HEAD_LINE = re.compile(r"^(?:([0-9a-fA-F]{4,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7]) [^\n]*\S", re.MULTILINE)


def _address(m: re.Match[str]) -> str:
    domain = (m.group(1) or "0000").lower().rjust(4, "0")
    return f"{domain}:{m.group(2).lower()}:{m.group(3).lower()}.{m.group(4)}"


def parse_lspci_at(text: str, addresses: Collection[str]) -> LspciReport:
    """The devices of :func:`parse_lspci` at ``addresses`` (``0000:1a:00.0``), parsing only their stanzas.

    A whole machine's ``lspci -vvv`` is some 2,000 lines; a check that reads a few devices' lines
    cuts the output at each device line and parses those devices' stanzas alone. The devices are the
    ones ``parse_lspci(text)`` gives at those addresses, and a ParseError when it would raise one.
    """
    wanted = set(addresses)
    if "\r" in text or "\x00" in text or text.startswith("\ufeff"):  # line ends parse_lspci normalises
        return LspciReport(tuple(d for d in parse_lspci(text).devices if d.address in wanted))
    heads = list(_HEAD_LINE.finditer(text))
    if not heads:
        return parse_lspci(text)  # no device line: its ParseError
    ends = [m.start() for m in heads[1:]] + [len(text)]
    kept = [text[m.start():end] for m, end in zip(heads, ends, strict=True) if _address(m) in wanted]
    if not kept:
        return LspciReport(())
    return LspciReport(tuple(d for d in parse_lspci("\n".join(kept)).devices if d.address in wanted))
