"""``mlnx_qos -i IFACE`` (MLNX_OFED / DOCA-OFED): trust mode, DSCP map, PFC and traffic classes of a port.

Layout (MLNX_OFED 5.x/23.x; older releases omit some sections)::

    DCBX mode: OS controlled
    Priority trust state: dscp
    dscp2prio mapping:
            prio:0 dscp:07,06,05,04,03,02,01,00,
            ...
            prio:6 dscp:30,55,54,53,52,51,50,49,
            prio:6 dscp:48,
    default priority:
    Receive buffer size (bytes): 130944,130944,0,0,0,0,0,0,max_buffer_size=262016
    Cable len: 7
    PFC configuration:
            priority    0   1   2   3   4   5   6   7
            enabled     0   0   0   1   0   0   0   0
            buffer      0   0   0   1   0   0   0   0
    tc: 0 ratelimit: unlimited, tsa: ets, bw: 50%
             priority:  0
             ...

A priority's DSCP values are printed at most 8 to a line, ``prio:N dscp:``
repeated on the next line for the rest (mlnx-tools ``printAppSelector``), in
the order the app table holds them. Lines of other commands around it are
ignored; the trust state or the PFC table must be there. When the text holds
several reports (``mlnx_qos`` run twice), the first one's map is read; a DSCP
mapped to two priorities within it is refused, never guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from burnin.parsers._common import fail, head_excerpt, iter_lines, parse_int, require_text

TOOL = "mlnx-qos"
MAX_LINE = 4096

_TRUST = re.compile(r"^Priority trust (?:state|mode):\s*(\S{1,16})")
_DCBX = re.compile(r"^DCBX mode:\s*(.{1,64}?)\s*$")
_DSCP_HEADER = re.compile(r"^dscp2prio mapping:\s*$")
_DSCP = re.compile(r"^prio:\s*(\d)\s+dscp:\s*([\d,\s]{0,400})$")
_TC = re.compile(r"^tc:\s*(\d{1,2})\s+ratelimit:\s*([^,]{1,40}),\s*tsa:\s*([A-Za-z_]{1,16})(?:,\s*bw:\s*(\d{1,3})%)?")
_TC_PRIO = re.compile(r"^priority:\s*(\d)\s*$")
_CABLE = re.compile(r"^Cable len:\s*(\d{1,6})")
_BUFFER = re.compile(r"^Receive buffer size \(bytes\):\s*(.{0,400})$")
_ROW = re.compile(r"^(priority|enabled|buffer)((?:\s+\d{1,3}){1,8})\s*$")


@dataclass(frozen=True, slots=True)
class MlnxQosTc:
    tc: int
    ratelimit: str
    tsa: str
    """``ets``, ``strict`` or ``vendor``."""
    bw_percent: int | None
    priorities: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class MlnxQos:
    dcbx_mode: str | None
    trust: str | None
    """``pcp`` or ``dscp``."""
    dscp_to_prio: dict[int, tuple[int, ...]]
    """Priority -> the DSCP values mapped to it."""
    pfc_enabled: tuple[int, ...] | None
    """Per priority 0..7: 1 when PFC is on (None when no PFC table was printed)."""
    pfc_buffer: tuple[int, ...] | None
    receive_buffer_bytes: tuple[int, ...]
    cable_len_m: int | None
    tcs: tuple[MlnxQosTc, ...]

    @property
    def pfc_priorities(self) -> tuple[int, ...]:
        """The priorities with PFC on."""
        return tuple(p for p, on in enumerate(self.pfc_enabled or ()) if on)


def parse_mlnx_qos(text: str) -> MlnxQos:
    """Parse ``mlnx_qos -i IFACE`` output."""
    require_text(TOOL, text)
    dcbx = trust = None
    dscp: dict[int, list[int]] = {}
    dscp_maps = 0  # "dscp2prio mapping:" headers seen; only the first map is read
    rows: dict[str, tuple[int, ...]] = {}
    buffers: tuple[int, ...] = ()
    cable: int | None = None
    tcs: list[tuple[int, str, str, int | None, list[int]]] = []
    for raw in iter_lines(text):
        if len(raw) > MAX_LINE:
            continue
        line = raw.strip()
        if not line:
            continue
        if (m := _TRUST.match(line)) is not None:
            trust = trust or m.group(1).lower()
        elif (m := _DCBX.match(line)) is not None:
            dcbx = dcbx or m.group(1)
        elif _DSCP_HEADER.match(line) is not None:
            dscp_maps += 1
        elif (m := _DSCP.match(line)) is not None and dscp_maps <= 1:
            values = (v for v in (parse_int(x) for x in m.group(2).replace(" ", "").split(",")) if v is not None)
            dscp.setdefault(int(m.group(1)), []).extend(values)
        elif (m := _ROW.match(line)) is not None:
            rows.setdefault(m.group(1), tuple(int(x) for x in m.group(2).split()))
        elif (m := _TC.match(line)) is not None:
            bw = m.group(4)
            tcs.append((int(m.group(1)), m.group(2).strip(), m.group(3).lower(), int(bw) if bw else None, []))
        elif (m := _TC_PRIO.match(line)) is not None and tcs:
            tcs[-1][4].append(int(m.group(1)))
        elif (m := _CABLE.match(line)) is not None:
            cable = int(m.group(1))
        elif (m := _BUFFER.match(line)) is not None:
            buffers = tuple(v for v in (parse_int(x) for x in m.group(1).split(",")) if v is not None)
    _check_dscp_map(dscp, text)
    priorities = rows.get("priority")
    enabled, buffer = rows.get("enabled"), rows.get("buffer")
    if priorities is not None and priorities != tuple(range(len(priorities))):
        fail(TOOL, f"PFC table priorities {priorities} are not 0..{len(priorities) - 1}", head_excerpt(text))
    if enabled is not None and any(v not in (0, 1) for v in enabled):
        fail(TOOL, f"PFC enabled row {enabled} holds values other than 0 and 1", head_excerpt(text))
    if trust is None and enabled is None:
        fail(TOOL, "neither 'Priority trust state:' nor a PFC 'enabled' row", head_excerpt(text))
    return MlnxQos(dcbx, trust, {prio: tuple(values) for prio, values in dscp.items()}, enabled, buffer, buffers, cable,
                   tuple(MlnxQosTc(tc, rate, tsa, bw, tuple(prios)) for tc, rate, tsa, bw, prios in tcs))


def _check_dscp_map(dscp: dict[int, list[int]], text: str) -> None:
    """Refuse a map no port can hold: a DSCP above 63, or one DSCP under two priorities."""
    owner: dict[int, int] = {}
    for prio, values in sorted(dscp.items()):
        for value in values:
            if value > 63:
                fail(TOOL, f"DSCP {value} under priority {prio} is not a DSCP (0..63)", head_excerpt(text))
            if owner.get(value) == prio:
                fail(TOOL, f"DSCP {value} is listed twice under priority {prio}", head_excerpt(text))
            if value in owner:
                fail(TOOL, f"DSCP {value} is mapped to priorities {owner[value]} and {prio}", head_excerpt(text))
            owner[value] = prio
