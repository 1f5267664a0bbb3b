"""``lspci -vv`` / ``-vvv`` (with or without ``-D`` and ``-nn``), one stanza or a
whole machine.

Per device: address (normalised to ``0000:1a:00.0``), class and name, NUMA node,
link capability and status with lspci's ``(ok)``/``(downgraded)`` marks, ACS
capability and control bits, bridge bus numbers and AER status bits.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator
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
    seen_flags: dict[str, dict[str, bool]] | None = None  # the parse's flag lines read so far (most repeat)

    def flags(self, text: str) -> dict[str, bool]:
        """:func:`_flags` of ``text``, read once per parse: a device's own copy of it."""
        if self.seen_flags is None:
            return _flags(text)
        found = self.seen_flags.get(text)
        if found is None:
            found = self.seen_flags[text] = _flags(text)
        return dict(found)


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


def _draft(m: re.Match[str], seen_flags: dict[str, dict[str, bool]] | None = None) -> _Draft:
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
    return _Draft(address, cls, name, revision, vendor_id, device_id, seen_flags=seen_flags)


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


def _set_numa(d: _Draft, value: str) -> None:
    d.numa_node = parse_int(value)


def _set_lnkcap(d: _Draft, value: str) -> None:
    if d.lnkcap is None:
        d.lnkcap = value


def _set_lnksta(d: _Draft, value: str) -> None:
    if d.lnksta is None:
        d.lnksta = value


def _set_acs_cap(d: _Draft, value: str) -> None:
    d.acs_cap = d.flags(value)


def _set_acs_ctl(d: _Draft, value: str) -> None:
    d.acs_ctl = d.flags(value)


def _set_uesta(d: _Draft, value: str) -> None:
    if d.uesta is None:
        d.uesta = d.flags(value)


def _set_cesta(d: _Draft, value: str) -> None:
    if d.cesta is None:
        d.cesta = d.flags(value)


def _set_slot(d: _Draft, value: str) -> None:
    d.physical_slot = value


def _set_driver(d: _Draft, value: str) -> None:
    d.kernel_driver = value


def _set_bus(d: _Draft, value: str) -> None:
    m = _BUS.search(value)
    if m:
        d.secondary_bus = int(m.group(1), 16)
        d.subordinate_bus = int(m.group(2), 16)


_FIELDS = {
    "NUMA node": _set_numa, "LnkCap": _set_lnkcap, "LnkSta": _set_lnksta, "ACSCap": _set_acs_cap,
    "ACSCtl": _set_acs_ctl, "UESta": _set_uesta, "CESta": _set_cesta, "Physical Slot": _set_slot,
    "Kernel driver in use": _set_driver, "Bus": _set_bus,
}
"""What an indented ``Key: value`` line of a stanza sets, by its key; ``Capabilities...`` lines aside."""


def _apply(d: _Draft, line: str) -> None:
    """Read one indented line of a stanza into the draft (most lines are none of the keys read: dropped
    before their value is touched)."""
    key, sep, value = line.partition(":")
    if not sep:
        return
    key = key.strip()
    setter = _FIELDS.get(key)
    if setter is not None:
        setter(d, value.strip())
    elif d.port_type is None and key.startswith("Capabilities"):
        d.port_type = _express_port(value)


_COLUMN_ZERO = re.compile(r"\n(\S[^\n]*)")
"""A line that starts at column zero (a device line, or one no stanza reads), after the first."""
_READ_LINE = re.compile(r"\n[^\S\n]+(?:(" + "|".join(map(re.escape, _FIELDS)) + r")|Capabilities[^:\n]*)"
                        r"[^\S\n]*:([^\n]*)")
"""An indented line :func:`_apply` reads: a ``Key: value`` of :data:`_FIELDS` (group 1; None: a ``Capabilities``
line), and its value after the first colon (group 2)."""


def _plain_lines(text: str) -> bool:
    """Whether ``text``'s lines end in ``\n`` alone, without NULs or a byte-order mark: :func:`iter_lines` splits
    it on ``\n``, and the regular expressions below see the lines it gives."""
    return "\r" not in text and "\x00" not in text and not text.startswith("\ufeff")


def _stanzas(text: str, wanted: Collection[str]) -> Iterator[tuple[re.Match[str], int, int]]:
    """For plain-lined ``text``: each device line at an address of ``wanted`` (its match), and where its stanza
    begins (the device line's end) and ends (the next device line's start); a ParseError with no device line."""
    first = text.find("\n")
    lines = [(0, len(text) if first < 0 else first)] if text[:1] and not text[0].isspace() else []
    lines += [m.span(1) for m in _COLUMN_ZERO.finditer(text)]
    heads = [(start, end, m) for start, end in lines if (m := _HEAD.match(text[start:end].rstrip()))]
    if not heads:
        fail(TOOL, "no 'BB:DD.F class: name' device line found", head_excerpt(text))
    for index, (_, end, m) in enumerate(heads):
        if _address(m) in wanted:
            yield m, end, heads[index + 1][0] if index + 1 < len(heads) else len(text)


def _express_port(value: str) -> str | None:
    """The port type of a ``Capabilities: [68] Express (v2) Downstream Port ...`` line's value (None: another)."""
    express = _EXPRESS.search(value.strip()) if "Express" in value else None
    return express.group(1).strip() if express else None


def _parse_stanzas(text: str, wanted: Collection[str]) -> LspciReport:
    """:func:`_parse` of plain-lined text for ``wanted`` addresses, by regular expressions in C: the device
    lines are found without a loop over every line, and only the lines :func:`_apply` reads in the stanzas
    asked for are visited (the same devices, in the same order, read the same way)."""
    devices: list[PciDevice] = []
    seen_flags: dict[str, dict[str, bool]] = {}
    for m, end, stop in _stanzas(text, wanted):
        draft = _draft(m, seen_flags)
        for line in _READ_LINE.finditer(text, end, stop):
            field, value = line.groups()
            if field is not None:
                _FIELDS[field](draft, value.strip())
            elif draft.port_type is None:
                draft.port_type = _express_port(value)
        devices.append(_finish(draft))
    return LspciReport(devices=tuple(devices))


def _parse(text: str, wanted: Collection[str] | None) -> LspciReport:
    """Every device (``wanted`` None), or those at ``wanted``'s addresses, whose stanzas alone are read."""
    require_text(TOOL, text)
    if wanted is not None and _plain_lines(text):
        return _parse_stanzas(text, wanted)
    devices: list[PciDevice] = []
    seen_flags: dict[str, dict[str, bool]] = {}
    current: _Draft | None = None
    found = False
    for line in iter_lines(text):
        if not line or line.isspace():
            continue
        if not line[0].isspace():
            m = _HEAD.match(line.rstrip())
            if m:
                found = True
                if current is not None:
                    devices.append(_finish(current))
                current = _draft(m, seen_flags) if wanted is None or _address(m) in wanted else None
            continue
        if current is not None:
            _apply(current, line)
    if current is not None:
        devices.append(_finish(current))
    if not found:
        fail(TOOL, "no 'BB:DD.F class: name' device line found", head_excerpt(text))
    return LspciReport(devices=tuple(devices))


def parse_lspci(text: str) -> LspciReport:
    """Parse ``lspci -vv``/``-vvv`` output; a ParseError when no device is found."""
    return _parse(text, None)


def _address(m: re.Match[str]) -> str:
    domain = (m.group(1) or "0000").lower().rjust(4, "0")
    return f"{domain}:{m.group(2).lower()}:{m.group(3).lower()}.{m.group(4)}"


def parse_lspci_at(text: str, addresses: Collection[str]) -> LspciReport:
    """The devices of :func:`parse_lspci` at ``addresses`` (``0000:1a:00.0``), parsing only their stanzas.

    A whole machine's ``lspci -vvv`` is some 2,000 lines; a check that reads a few devices' lines
    reads every device line and only those devices' stanzas. The devices are the ones
    ``parse_lspci(text)`` gives at those addresses, and a ParseError when it would raise one.
    """
    return _parse(text, frozenset(addresses))


@dataclass(frozen=True, slots=True)
class PortControl:
    """What TOP-04 reads of a device: its PCI Express port type and its ACS Control bits (None: not shown)."""

    port_type: str | None
    acs_ctl: dict[str, bool] | None


_CONTROL_LINE = re.compile(r"\n[^\S\n]+(?:(ACSCtl)|Capabilities[^:\n]*)[^\S\n]*:([^\n]*)")
"""An indented ``ACSCtl:`` line (group 1) or ``Capabilities`` line, and its value after the first colon (group 2)."""


def parse_lspci_control_at(text: str, addresses: Collection[str]) -> dict[str, PortControl]:
    """Address -> the port type and ACS Control of the device there, for the devices at ``addresses``: those
    :func:`parse_lspci_at` gives (the last of two at one address), read from their ``Capabilities`` and
    ``ACSCtl`` lines alone; a ParseError when it would raise one."""
    require_text(TOOL, text)
    wanted = frozenset(addresses)
    if not _plain_lines(text):
        return {d.address: PortControl(d.port_type, d.acs_ctl) for d in _parse(text, wanted).devices}
    found: dict[str, PortControl] = {}
    seen_flags: dict[str, dict[str, bool]] = {}
    for m, end, stop in _stanzas(text, wanted):
        port_type: str | None = None
        acs_ctl: dict[str, bool] | None = None
        for line in _CONTROL_LINE.finditer(text, end, stop):
            field, value = line.groups()
            if field is not None:
                flags = value.strip()
                if flags not in seen_flags:
                    seen_flags[flags] = _flags(flags)
                acs_ctl = dict(seen_flags[flags])
            elif port_type is None:
                port_type = _express_port(value)
        found[_address(m)] = PortControl(port_type, acs_ctl)
    return found
