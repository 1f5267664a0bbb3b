"""``ibstat`` and ``ibstatus`` (infiniband-diags).

Indentation (tabs or spaces) is not relied on: ``CA '...'`` starts an adapter,
``Port N:`` starts a port, and the keys say the rest. Lines that belong to
neither tool (``ibpanic: ...`` when a device vanished mid-run, ``ibwarn``)
are kept in ``errors``; a check must treat a report with errors as incomplete.
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
    leading_float,
    parse_int,
    require_text,
    split_colon,
)


@dataclass(frozen=True, slots=True)
class IbPort:
    port: int
    state: str  # "Active", "Down", "Initializing", ...
    physical_state: str  # "LinkUp", "Polling", "Disabled", ...
    rate_gbps: float | None
    link_layer: str  # "InfiniBand" or "Ethernet"
    base_lid: int | None
    sm_lid: int | None
    lmc: int | None
    port_guid: str | None
    capability_mask: str | None


@dataclass(frozen=True, slots=True)
class IbCa:
    name: str
    type: str
    firmware: str
    ports: tuple[IbPort, ...]
    num_ports: int | None
    hardware_version: str | None
    node_guid: str | None
    system_image_guid: str | None


@dataclass(frozen=True, slots=True)
class IbstatReport:
    cas: tuple[IbCa, ...]
    errors: tuple[str, ...]  # ibpanic/ibwarn/other lines the tool printed on failure


@dataclass(frozen=True, slots=True)
class IbstatusPort:
    device: str
    port: int
    state: str  # "ACTIVE", "DOWN", ... (text after the numeric code)
    state_code: int | None
    physical_state: str  # "LinkUp", "Polling", ...
    physical_state_code: int | None
    rate_gbps: float | None
    rate_text: str | None  # "4X HDR"
    link_layer: str
    default_gid: str | None
    base_lid: str | None
    sm_lid: str | None


@dataclass(frozen=True, slots=True)
class IbstatusReport:
    ports: tuple[IbstatusPort, ...]
    errors: tuple[str, ...]


_CA = re.compile(r"^CA '([^']*)'$")
_PORT = re.compile(r"^Port (\d{1,9}):$")


@dataclass
class _PortDraft:
    port: int
    values: dict[str, str] = field(default_factory=dict)


@dataclass
class _CaDraft:
    name: str
    values: dict[str, str] = field(default_factory=dict)
    ports: list[_PortDraft] = field(default_factory=list)


def _build_port(d: _PortDraft) -> IbPort:
    v = d.values
    return IbPort(
        port=d.port,
        state=v.get("state", ""),
        physical_state=v.get("physical state", ""),
        rate_gbps=leading_float(v.get("rate")),
        link_layer=v.get("link layer", ""),
        base_lid=parse_int(v.get("base lid")),
        sm_lid=parse_int(v.get("sm lid")),
        lmc=parse_int(v.get("lmc")),
        port_guid=v.get("port guid"),
        capability_mask=v.get("capability mask"),
    )


def _build_ca(d: _CaDraft) -> IbCa:
    v = d.values
    return IbCa(
        name=d.name,
        type=v.get("ca type", ""),
        firmware=v.get("firmware version", ""),
        ports=tuple(_build_port(p) for p in d.ports),
        num_ports=parse_int(v.get("number of ports")),
        hardware_version=v.get("hardware version"),
        node_guid=v.get("node guid"),
        system_image_guid=v.get("system image guid"),
    )


def parse_ibstat(text: str) -> IbstatReport:
    """Parse ``ibstat`` output (all adapters or one).

    Output without a single ``CA '...'`` block is a ParseError (its message
    quotes what the tool printed instead, e.g. an ``ibpanic`` line).
    """
    require_text("ibstat", text)
    cas: list[IbCa] = []  # built as soon as the next CA begins: drafts are not kept
    current: _CaDraft | None = None
    errors: list[str] = []
    port: _PortDraft | None = None
    for raw in iter_lines(text):
        line = raw.strip()
        if not line or is_elision(line) or is_prompt(line) or is_command_echo(line, "ibstat"):
            continue
        m = _CA.match(line)
        if m:
            if current is not None:
                cas.append(_build_ca(current))
            current = _CaDraft(m.group(1))
            port = None
            continue
        m = _PORT.match(line)
        if m and current is not None:
            port = _PortDraft(int(m.group(1)))
            current.ports.append(port)
            continue
        kv = split_colon(line)
        if kv is None or current is None or line.startswith(("ibpanic", "ibwarn", "iberror")):
            errors.append(line)
            continue
        key = kv[0].lower()
        if port is not None:
            port.values[key] = kv[1]
        else:
            current.values[key] = kv[1]
    if current is None:
        message = "no \"CA '...'\" block found"
        if errors:
            message += f"; the tool printed: {errors[0][:200]}"
        fail("ibstat", message, head_excerpt(text))
    cas.append(_build_ca(current))
    return IbstatReport(cas=tuple(cas), errors=tuple(errors))


_IBSTATUS_HEAD = re.compile(r"^Infiniband device '([^']*)' port (\d{1,9}) status:$")


def _code_and_text(value: str) -> tuple[int | None, str]:
    code, sep, rest = value.partition(":")
    if sep:
        as_int = parse_int(code)
        if as_int is not None:
            return as_int, rest.strip()
    return None, value.strip()


def _build_status(device: str, port: int, v: dict[str, str]) -> IbstatusPort:
    state_code, state = _code_and_text(v.get("state", ""))
    phys_code, phys = _code_and_text(v.get("phys state", ""))
    rate = v.get("rate", "")
    rate_text = None
    if "(" in rate and rate.endswith(")"):
        rate_text = rate[rate.index("(") + 1 : -1].strip() or None
    return IbstatusPort(
        device=device,
        port=port,
        state=state,
        state_code=state_code,
        physical_state=phys,
        physical_state_code=phys_code,
        rate_gbps=leading_float(rate),
        rate_text=rate_text,
        link_layer=v.get("link_layer", ""),
        default_gid=v.get("default gid"),
        base_lid=v.get("base lid"),
        sm_lid=v.get("sm lid"),
    )


def parse_ibstatus(text: str) -> IbstatusReport:
    """Parse ``ibstatus`` output; a ParseError when it holds no port block."""
    require_text("ibstatus", text)
    blocks: list[tuple[str, int, dict[str, str]]] = []
    errors: list[str] = []
    for raw in iter_lines(text):
        line = raw.strip()
        if not line or is_elision(line) or is_prompt(line) or is_command_echo(line, "ibstatus"):
            continue
        m = _IBSTATUS_HEAD.match(line)
        if m:
            blocks.append((m.group(1), int(m.group(2)), {}))
            continue
        kv = split_colon(line)
        if kv is None or not blocks:
            errors.append(line)
            continue
        blocks[-1][2][kv[0].lower()] = kv[1]
    if not blocks:
        fail(
            "ibstatus",
            "no \"Infiniband device '...' port N status:\" block found",
            head_excerpt(text),
        )
    return IbstatusReport(ports=tuple(_build_status(d, p, v) for d, p, v in blocks), errors=tuple(errors))
