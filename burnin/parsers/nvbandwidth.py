"""nvbandwidth (per-testcase matrix and SUM).

The CUDA sample p2pBandwidthLatencyTest has its own parser,
:mod:`burnin.parsers.p2p_bandwidth` (its names are re-exported here).

Matrices are read row by row until a line that is not a row; ``N/A`` cells
become None. ``[...]`` elisions and quoted (``> ``) lines are tolerated.
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
from burnin.parsers.p2p_bandwidth import P2pDevice, P2pMatrix, P2pReport, parse_p2p_bandwidth

__all__ = ["NvbTestcase", "NvbandwidthReport", "P2pDevice", "P2pMatrix", "P2pReport", "parse_nvbandwidth",
           "parse_p2p_bandwidth"]


@dataclass(frozen=True, slots=True)
class NvbTestcase:
    name: str | None  # "host_to_device_memcpy_ce"; None when the output does not say
    title: str | None  # "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)"
    unit: str | None  # "GB/s"
    row_kind: str | None  # "CPU" or "GPU"
    column_kind: str | None
    columns: tuple[int, ...]
    rows: tuple[int, ...]
    matrix: tuple[tuple[float | None, ...], ...]
    sum: float | None
    status: str  # "ok", "waived", "error" or "no-matrix"


@dataclass(frozen=True, slots=True)
class NvbandwidthReport:
    version: str | None
    cuda_runtime_version: str | None
    cuda_driver_version: str | None
    driver_version: str | None
    testcases: tuple[NvbTestcase, ...]




def _read_matrix(
    lines: list[str], start: int, columns: tuple[int, ...]
) -> tuple[tuple[int, ...], tuple[tuple[float | None, ...], ...], int]:
    """Rows after a column header; returns (row ids, matrix, next index)."""
    rows: list[int] = []
    matrix: list[tuple[float | None, ...]] = []
    i = start
    while i < len(lines):
        tokens = unquote(lines[i]).split()
        if len(tokens) != len(columns) + 1:
            break
        rid = parse_int(tokens[0])
        cells = tokens[1:]
        values = [parse_float(c) for c in cells]
        if rid is None or any(v is None and c.upper() != "N/A" for v, c in zip(values, cells, strict=True)):
            break
        rows.append(rid)
        matrix.append(tuple(values))
        i += 1
    return tuple(rows), tuple(matrix), i


_VERSION_KEYS = {
    "nvbandwidth version": "version",
    "cuda runtime version": "cuda_runtime_version",
    "cuda driver version": "cuda_driver_version",
    "driver version": "driver_version",
}
_RUNNING = re.compile(r"^Running (\w{1,100})\.?$")
_SUM = re.compile(r"^SUM (\w{1,100}) (\S{1,40})$")
_NVB_TITLE = re.compile(r"(CPU|GPU)\(row\) (->|<-|<->) (CPU|GPU)\(column\)")


def parse_nvbandwidth(text: str) -> NvbandwidthReport:
    """Parse nvbandwidth's plain-text output (one or many testcases)."""
    require_text("nvbandwidth", text)
    lines = split_lines(text)
    info: dict[str, str] = {}
    cases: list[NvbTestcase] = []
    pending_name: str | None = None
    pending_status = "no-matrix"
    i = 0
    while i < len(lines):
        line = unquote(lines[i])
        i += 1
        if not line or is_elision(line):
            continue
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() in _VERSION_KEYS:
            info.setdefault(_VERSION_KEYS[key.strip().lower()], value.strip())
            continue
        m = _RUNNING.match(line)
        if m:
            if pending_name is not None:
                cases.append(_empty_case(pending_name, pending_status))
            pending_name, pending_status = m.group(1), "no-matrix"
            continue
        if line.lower().startswith("waived"):
            pending_status = "waived"
            continue
        if "(row)" in line and "(column)" in line:
            title = line
            if i >= len(lines):
                break
            columns = int_header(unquote(lines[i]).split())
            if columns is None:
                continue
            rows, matrix, i = _read_matrix(lines, i + 1, columns)
            tm = _NVB_TITLE.search(title)
            unit = title[title.rfind("(") + 1 : -1] if title.endswith(")") else None
            cases.append(
                NvbTestcase(
                    name=pending_name,
                    title=title,
                    unit=unit,
                    row_kind=tm.group(1) if tm else None,
                    column_kind=tm.group(3) if tm else None,
                    columns=columns,
                    rows=rows,
                    matrix=matrix,
                    sum=None,
                    status="ok" if matrix else "error",
                )
            )
            pending_name = None
            continue
        m = _SUM.match(line)
        if m:
            name, total = m.group(1), parse_float(m.group(2))
            if cases and cases[-1].sum is None and cases[-1].name in (None, name):
                last = cases[-1]
                cases[-1] = NvbTestcase(
                    name, last.title, last.unit, last.row_kind, last.column_kind,
                    last.columns, last.rows, last.matrix, total, last.status,
                )  # fmt: skip
            else:
                cases.append(NvbTestcase(name, None, None, None, None, (), (), (), total, "no-matrix"))
            continue
        if pending_name is not None and line.lower().startswith(("error", "fail")):
            pending_status = "error"
    if pending_name is not None:
        cases.append(_empty_case(pending_name, pending_status))
    if not cases:
        fail("nvbandwidth", "no testcase matrix or SUM line found", head_excerpt(text))
    return NvbandwidthReport(
        version=info.get("version"),
        cuda_runtime_version=info.get("cuda_runtime_version"),
        cuda_driver_version=info.get("cuda_driver_version"),
        driver_version=info.get("driver_version"),
        testcases=tuple(cases),
    )


def _empty_case(name: str, status: str) -> NvbTestcase:
    return NvbTestcase(name, None, None, None, None, (), (), (), None, status)
