"""The CUDA sample ``p2pBandwidthLatencyTest``: devices, peer access, connectivity, bandwidth and latency.

The real tool (cuda-samples ``Samples/5_Domain_Specific/p2pBandwidthLatencyTest``) prints, in order::

    [P2P (Peer-to-Peer) GPU Bandwidth Latency Test]
    Device: 0, NVIDIA H100 80GB HBM3, pciBusID: 18, pciDeviceID: 0, pciDomainID:0
    Device=0 CAN Access Peer Device=1                 (or CANNOT)
    P2P Connectivity Matrix
         D\\D     0     1
         0	     1     1
    Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)
    Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)
    Bidirectional P2P=Disabled Bandwidth Matrix (GB/s)
    Bidirectional P2P=Enabled Bandwidth Matrix (GB/s)
    P2P=Disabled Latency Matrix (us)                  (a GPU table, then a CPU table)
    P2P=Enabled Latency (P2P Writes) Matrix (us)
    NOTE: The CUDA Samples are not meant for performance measurements. ...

each bandwidth matrix under ``   D\\D`` with one row per device. Any subset of
the matrices is read (published snippets quote one); ``[...]`` elisions and
quoted (``> ``) lines are tolerated. A matrix cut short (fewer rows than
columns), a title without its matrix, a ``Cuda failure`` line (the tool stops
there) or text without any matrix raise :class:`~burnin.errors.ParseError`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from burnin.parsers._common import (
    fail,
    head_excerpt,
    int_header,
    is_elision,
    parse_float,
    parse_int,
    require_text,
    split_lines,
    unquote,
)

TOOL = "p2p-bandwidth"
AXES = ("D\\D", "GPU", "CPU")
"""The first cell of a matrix header: bandwidth and connectivity matrices, the latency tables."""

_DEVICE = re.compile(r"^Device: (\d{1,4}), (.{1,200}?), pciBusID: ([0-9a-fA-F]{1,8})")
_PEER = re.compile(r"^Device=(\d{1,4}) (CAN|CANNOT) Access Peer Device=(\d{1,4})$")
_UNITS = ("GB/s", "us")


@dataclass(frozen=True, slots=True)
class P2pDevice:
    index: int
    name: str
    pci_bus_id: str | None
    """Hex as printed (``18``, ``3b``)."""


@dataclass(frozen=True, slots=True)
class P2pPeerAccess:
    """One ``Device=D CAN|CANNOT Access Peer Device=P`` line."""

    device: int
    peer: int
    can_access: bool


@dataclass(frozen=True, slots=True)
class P2pMatrix:
    title: str
    """As printed, e.g. ``Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)``."""
    kind: str
    """``bandwidth``, ``latency`` or ``connectivity``."""
    p2p_enabled: bool | None
    bidirectional: bool | None
    unit: str | None
    """``GB/s``, ``us`` or None (connectivity)."""
    axis: str
    """``D\\D``, ``GPU`` or ``CPU`` (latency matrices print a GPU and a CPU table)."""
    columns: tuple[int, ...]
    rows: tuple[int, ...]
    matrix: tuple[tuple[float | None, ...], ...]
    transfer: str | None = None
    """``writes`` or ``reads`` when the title says ``(P2P Writes)`` / ``(P2P Reads)``."""

    def cell(self, row: int, column: int) -> float | None:
        """The value of device ``row`` to device ``column`` (by the printed ids); None where not printed."""
        if row not in self.rows or column not in self.columns:
            return None
        return self.matrix[self.rows.index(row)][self.columns.index(column)]


@dataclass(frozen=True, slots=True)
class P2pReport:
    devices: tuple[P2pDevice, ...]
    matrices: tuple[P2pMatrix, ...]
    peer_access: tuple[P2pPeerAccess, ...] = ()

    def find(self, kind: str, *, p2p_enabled: bool | None = None, bidirectional: bool | None = None,
             axis: str | None = None) -> P2pMatrix | None:
        """The first matrix of ``kind`` that matches every criterion given (None: any)."""
        for m in self.matrices:
            if m.kind != kind:
                continue
            if p2p_enabled is not None and m.p2p_enabled is not p2p_enabled:
                continue
            if bidirectional is not None and m.bidirectional is not bidirectional:
                continue
            if axis is not None and m.axis != axis:
                continue
            return m
        return None




def describe_title(title: str) -> tuple[str, bool | None, bool | None, str | None, str | None]:
    """(kind, P2P enabled, bidirectional, unit, transfer) of a matrix title."""
    low = title.lower()
    kind = "latency" if "latency" in low else "connectivity" if "connectivity" in low else "bandwidth"
    enabled = True if "p2p=enabled" in low else False if "p2p=disabled" in low else None
    bidirectional = True if low.startswith("bidirectional") else False if low.startswith("unidirectional") else None
    unit = None
    if title.endswith(")") and "(" in title:
        unit = title[title.rfind("(") + 1 : -1]
        if unit not in _UNITS:
            unit = None
    transfer = "writes" if "(p2p writes)" in low else "reads" if "(p2p reads)" in low else None
    return kind, enabled, bidirectional, unit, transfer


def _read_rows(lines: list[str], start: int, width: int) -> tuple[list[int], list[tuple[float | None, ...]], int]:
    """The rows after a header of ``width`` columns: (row ids, values, index of the first line after them)."""
    rows: list[int] = []
    values: list[tuple[float | None, ...]] = []
    i = start
    while i < len(lines):
        tokens = unquote(lines[i]).split()
        if len(tokens) != width + 1:
            break
        row = parse_int(tokens[0])
        cells = [parse_float(c) for c in tokens[1:]]
        if row is None or any(v is None and c.upper() != "N/A" for v, c in zip(cells, tokens[1:], strict=True)):
            break
        rows.append(row)
        values.append(tuple(cells))
        i += 1
    return rows, values, i


def _matrix(title: str, axis: str, columns: tuple[int, ...], lines: list[str], start: int) -> tuple[P2pMatrix, int]:
    rows, values, end = _read_rows(lines, start, len(columns))
    if tuple(rows) != columns:
        near = "\n".join(unquote(ln) for ln in lines[max(0, start - 2) : end + 1])
        got = f"rows {list(rows)}" if rows else "no row"
        fail(TOOL, f"matrix {title!r} ({axis}) has {got} for columns {list(columns)}: output cut short?", near)
    kind, enabled, bidirectional, unit, transfer = describe_title(title)
    return P2pMatrix(title, kind, enabled, bidirectional, unit, axis, columns, tuple(rows), tuple(values),
                     transfer), end


def parse_p2p_bandwidth(text: str) -> P2pReport:
    """Parse ``p2pBandwidthLatencyTest`` output (any subset of its matrices)."""
    require_text(TOOL, text)
    lines = split_lines(text)
    devices: list[P2pDevice] = []
    peers: list[P2pPeerAccess] = []
    matrices: list[P2pMatrix] = []
    title: str | None = None
    pending = False  # a title whose matrix has not come yet
    i = 0
    while i < len(lines):
        line = unquote(lines[i])
        i += 1
        if not line or is_elision(line):
            continue
        if line.startswith("Cuda failure"):
            fail(TOOL, "the test stopped on a CUDA error", line)
        m = _DEVICE.match(line)
        if m:
            devices.append(P2pDevice(int(m.group(1)), m.group(2).strip(), m.group(3)))
            continue
        m = _PEER.match(line)
        if m:
            peers.append(P2pPeerAccess(int(m.group(1)), int(m.group(3)), m.group(2) == "CAN"))
            continue
        if "Matrix" in line:
            if pending:
                fail(TOOL, f"matrix {title!r} has no rows before the next title: output cut short?", line)
            title, pending = line, True
            continue
        tokens = line.split()
        if tokens[0] not in AXES:
            continue
        columns = int_header(tokens[1:])
        if columns is None:
            continue
        if title is None:
            fail(TOOL, "a matrix without a title", line)
        matrix, i = _matrix(title, tokens[0], columns, lines, i)
        matrices.append(matrix)
        pending = False
    if pending:
        fail(TOOL, f"matrix {title!r} has no rows: output cut short?", str(title))
    if not matrices:
        fail(TOOL, "no 'D\\D'/'GPU'/'CPU' matrix found", head_excerpt(text))
    return P2pReport(devices=tuple(devices), matrices=tuple(matrices), peer_access=tuple(peers))
