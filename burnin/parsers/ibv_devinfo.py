"""``ibv_devinfo`` (rdma-core's libibverbs utilities), plain or ``-v``.

The tool prints, per device, ``hca_id:<TAB>mlx5_0``, device attributes one tab
in, then per port ``port:<TAB>1`` and the port's attributes (``state``,
``max_mtu``, ``active_mtu``, ``sm_lid``, ``port_lid``, ``port_lmc``,
``link_layer``; with ``-v`` many more). Indentation is not relied on (quoted
outputs lose their tabs): ``hca_id:`` starts a device, ``port:`` a port, and
every key after a ``port:`` line belongs to that port. An MTU reads
``4096 (5)``: bytes and the verbs enum (``IBV_MTU_4096`` = 5); a pair that
disagrees (or ``invalid MTU (7)``) is no reading (None).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from burnin.parsers._common import (
    fail,
    head_excerpt,
    is_command_echo,
    is_elision,
    is_prompt,
    iter_lines,
    parse_int,
    require_text,
    split_colon,
)

TOOL = "ibv-devinfo"


@dataclass(frozen=True, slots=True)
class IbvPort:
    port: int
    state: str  # "PORT_ACTIVE", "PORT_DOWN", "PORT_INIT", "PORT_ARMED"
    state_code: int | None  # 4 for PORT_ACTIVE
    max_mtu: int | None  # bytes: 256 ... 4096
    active_mtu: int | None
    sm_lid: int | None
    port_lid: int | None
    port_lmc: int | None
    link_layer: str  # "InfiniBand" or "Ethernet"


@dataclass(frozen=True, slots=True)
class IbvDevice:
    name: str
    transport: str  # "InfiniBand (0)"
    fw_ver: str | None
    node_guid: str | None
    sys_image_guid: str | None
    vendor_id: int | None
    vendor_part_id: int | None
    hw_ver: str | None
    board_id: str | None
    phys_port_cnt: int | None
    ports: tuple[IbvPort, ...]


@dataclass(frozen=True, slots=True)
class IbvDevinfoReport:
    devices: tuple[IbvDevice, ...]
    errors: tuple[str, ...]  # lines outside any device ("Failed to query port 1 props", a prompt left in)

    def device(self, name: str) -> IbvDevice | None:
        return next((d for d in self.devices if d.name == name), None)


_CODED = re.compile(r"^(\S+(?: \S+)*?)\s*\((-?\d{1,9})\)$")
_MTU_BYTES = {1: 256, 2: 512, 3: 1024, 4: 2048, 5: 4096}  # enum ibv_mtu


def _coded(value: str | None) -> tuple[str, int | None]:
    """``PORT_ACTIVE (4)`` -> ("PORT_ACTIVE", 4); text without a code -> (text, None)."""
    text = (value or "").strip()
    m = _CODED.match(text)
    return (m.group(1), int(m.group(2))) if m else (text, None)


def mtu_bytes(value: str | None) -> int | None:
    """``4096 (5)`` -> 4096; None unless the bytes and the enum agree."""
    text, code = _coded(value)
    if code is None or _MTU_BYTES.get(code) is None:
        return None
    return _MTU_BYTES[code] if parse_int(text) == _MTU_BYTES[code] else None


@dataclass
class _PortDraft:
    port: int
    values: dict[str, str] = field(default_factory=dict)


@dataclass
class _DeviceDraft:
    name: str
    values: dict[str, str] = field(default_factory=dict)
    ports: list[_PortDraft] = field(default_factory=list)


def _build_port(d: _PortDraft) -> IbvPort:
    v = d.values
    state, state_code = _coded(v.get("state"))
    return IbvPort(
        port=d.port,
        state=state,
        state_code=state_code,
        max_mtu=mtu_bytes(v.get("max_mtu")),
        active_mtu=mtu_bytes(v.get("active_mtu")),
        sm_lid=parse_int(v.get("sm_lid")),
        port_lid=parse_int(v.get("port_lid")),
        port_lmc=parse_int(v.get("port_lmc")),
        link_layer=v.get("link_layer", ""),
    )


def _build_device(d: _DeviceDraft) -> IbvDevice:
    v = d.values
    return IbvDevice(
        name=d.name,
        transport=v.get("transport", ""),
        fw_ver=v.get("fw_ver") or None,
        node_guid=v.get("node_guid") or None,
        sys_image_guid=v.get("sys_image_guid") or None,
        vendor_id=parse_int(v.get("vendor_id")),
        vendor_part_id=parse_int(v.get("vendor_part_id")),
        hw_ver=v.get("hw_ver") or None,
        board_id=v.get("board_id") or None,
        phys_port_cnt=parse_int(v.get("phys_port_cnt")),
        ports=tuple(_build_port(p) for p in d.ports),
    )


def parse_ibv_devinfo(text: str) -> IbvDevinfoReport:
    """Parse ``ibv_devinfo`` output (every device, or one with ``-d``).

    Output without a single ``hca_id:`` block is a ParseError quoting what the
    tool printed instead (``No IB devices found``, ``Failed to get IB devices list``).
    """
    require_text(TOOL, text)
    devices: list[IbvDevice] = []
    current: _DeviceDraft | None = None
    port: _PortDraft | None = None
    errors: list[str] = []
    for raw in iter_lines(text):
        line = raw.strip()
        if not line or is_elision(line) or is_prompt(line) or is_command_echo(line, "ibv_devinfo"):
            continue
        kv = split_colon(line)
        if kv is None:
            if current is None:  # inside a device: -v's capability flags and "... not supported" notes
                errors.append(line)
            continue
        key, value = kv[0].lower(), kv[1]
        if key == "hca_id":
            if current is not None:
                devices.append(_build_device(current))
            current, port = _DeviceDraft(value), None
            continue
        if current is None:
            errors.append(line)
            continue
        if key == "port":
            number = parse_int(value)
            if number is None:
                errors.append(line)
                continue
            port = _PortDraft(number)
            current.ports.append(port)
            continue
        target = port.values if port is not None else current.values
        target.setdefault(key, value)
    if current is None:
        message = "no 'hca_id:' block found"
        if errors:
            message += f"; the tool printed: {errors[0][:200]}"
        fail(TOOL, message, head_excerpt(text))
    devices.append(_build_device(current))
    return IbvDevinfoReport(devices=tuple(devices), errors=tuple(errors))
