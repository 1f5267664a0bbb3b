"""nccl-tests ``*_perf`` output (all_reduce, all_gather, reduce_scatter, alltoall,
sendrecv, broadcast, reduce, ...).

Columns are read from the header line, per group (out-of-place, in-place): a
group without its ``#wrong`` column (a header cut at the terminal's edge, or
edited) has three numbers in each row, not four. Each data row is split from the
right, so rows with a blank ``redop`` (sendrecv) or without ``redop``/``root``
columns (old versions) still parse. Lines that are not part of the table (MPI
help messages, ``NCCL INFO``/``WARN`` lines, ``srun -l``/``mpirun
--tag-output`` prefixes) are skipped; warning and error lines are kept.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass

from burnin.parsers._common import (
    fail,
    head_excerpt,
    iter_lines,
    parse_float,
    parse_int,
    require_text,
)

TOOL = "nccl-tests"

COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "alltoall",
    "sendrecv",
    "broadcast",
    "reduce",
    "gather",
    "scatter",
    "hypercube",
)

# Bytes per element for the dtypes nccl-tests prints.
DTYPE_SIZES: dict[str, int] = {
    "int8": 1,
    "char": 1,
    "uint8": 1,
    "int32": 4,
    "int": 4,
    "uint32": 4,
    "int64": 8,
    "uint64": 8,
    "half": 2,
    "float16": 2,
    "float": 4,
    "float32": 4,
    "double": 8,
    "float64": 8,
    "bfloat16": 2,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
}


@dataclass(frozen=True, slots=True)
class NcclRank:
    rank: int
    host: str
    device: int | None
    bus_id: str | None
    pid: int | None
    gpu_name: str | None


@dataclass(frozen=True, slots=True)
class NcclMeasure:
    """One half of a row: out-of-place or in-place."""

    time_us: float | None
    algbw_gbps: float | None
    busbw_gbps: float | None
    wrong: int | float | None  # "#wrong" count, or the max error of old versions


@dataclass(frozen=True, slots=True)
class NcclRow:
    size_bytes: int
    count: int
    dtype: str | None
    redop: str | None
    root: int | None
    out_of_place: NcclMeasure
    in_place: NcclMeasure


@dataclass(frozen=True, slots=True)
class NcclRun:
    collective: str | None
    nranks: int
    ranks: tuple[NcclRank, ...]
    rows: tuple[NcclRow, ...]
    avg_busbw_gbps: float | None
    out_of_bounds: int | None
    warnings: tuple[str, ...]
    truncated: bool
    max_busbw_gbps: float | None
    nccl_version: str | None
    params: dict[str, str]


_PREFIX = re.compile(r"^\s*(?:\[\d+,\d+\]<std(?:out|err)>:|\d+:(?=\s))\s?")
_RANK = re.compile(
    r"^#\s*Rank\s+(\d{1,9})\s+(?:Group\s+\d+\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)"
    r"\s+\[([^\]]*)\]\s?(.*)$"
)
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)")
_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)")
_PERF_NAME = re.compile(r"\b(" + "|".join(COLLECTIVES) + r")_perf")
_NCCL_VERSION = re.compile(r"\bNCCL version (\S+)")
_PARAM = re.compile(
    r"\b(nThread|nGpus|minBytes|maxBytes|step:|warmup iters:|agg iters:|iters:|"
    r"validation:|graph:)\s*(\S+)"
)
_WARN = re.compile(
    r"NCCL WARN|NCCL ERROR|failure|FAILED|Segmentation fault|MPI_ABORT|"
    r"\bAbort|[Ee]rror:|\berror\b|Assertion"
)
# MPI's own chatter about its help system is not a warning about the run.
_MPI_HELP = re.compile(r"help message|help / error messages|orte_base_help_aggregate")


@dataclass(frozen=True, slots=True)
class _Layout:
    widths: tuple[int, ...]  # per group (out-of-place, then in-place): 4 with a #wrong/error column, else 3


_WRONG_NAMES = frozenset({"#wrong", "wrong", "error"})


def _header_layout(tokens: list[str]) -> _Layout | None:
    names = [t.lower() for t in tokens]
    if "size" not in names or "time" not in names or "busbw" not in names:
        return None
    starts = [i for i, name in enumerate(names) if name == "time"][:2]
    bounds = [*starts[1:], len(names)]
    widths = tuple(4 if _WRONG_NAMES & set(names[a:b]) else 3 for a, b in zip(starts, bounds, strict=True))
    return _Layout(widths)


def _wrong(token: str) -> int | float | None:
    t = token.rstrip("*")
    as_int = parse_int(t)
    if as_int is not None:
        return as_int
    return parse_float(t)


def _measure(tokens: list[str], width: int) -> NcclMeasure:
    vals = [*tokens, "", "", "", ""]
    return NcclMeasure(
        time_us=parse_float(vals[0]),
        algbw_gbps=parse_float(vals[1]),
        busbw_gbps=parse_float(vals[2]),
        wrong=_wrong(vals[3]) if width == 4 else None,
    )


def _row(tokens: list[str], layout: _Layout) -> NcclRow | None:
    """A data row, or None when the tokens are not a complete row."""
    need = sum(layout.widths)
    if len(tokens) < 3 + need or len(tokens) > 5 + need:
        return None
    size, count = parse_int(tokens[0]), parse_int(tokens[1])
    dtype = sys.intern(tokens[2])  # one string per type, not one per row, in long outputs
    if size is None or count is None or not dtype[:1].isalpha():
        return None
    prefix = tokens[3 : len(tokens) - need]
    redop: str | None = None
    root: int | None = None
    for tok in prefix:
        as_int = parse_int(tok)
        if as_int is not None and root is None:
            root = as_int
        elif as_int is None and redop is None and tok[:1].isalpha():
            redop = sys.intern(tok)
        else:
            return None
    measures = tokens[len(tokens) - need :]
    if all(parse_float(t) is None and t.upper() != "N/A" for t in measures[:3]):
        return None
    w = layout.widths[0]
    out_place = _measure(measures[:w], w)
    in_place = _measure(measures[w:], layout.widths[1]) if len(layout.widths) == 2 else _measure([], 3)
    return NcclRow(size, count, dtype, redop, root, out_place, in_place)


def _looks_like_row(tokens: list[str]) -> bool:
    return len(tokens) >= 2 and parse_int(tokens[0]) is not None and tokens[0].isdigit()


def _infer_collective(rows: tuple[NcclRow, ...], nranks: int) -> str | None:
    """Guess the collective from the numbers when the output does not name it."""
    if nranks < 2:
        return None
    best = None
    for row in rows:
        usable = row.out_of_place.algbw_gbps and row.out_of_place.busbw_gbps and row.count > 0
        if usable and (best is None or row.size_bytes > best.size_bytes):
            best = row
    if best is None or best.dtype not in DTYPE_SIZES:
        return None
    elem = DTYPE_SIZES[best.dtype]
    ratio = best.size_bytes / (best.count * elem)
    algbw = best.out_of_place.algbw_gbps or 0.0
    factor = (best.out_of_place.busbw_gbps or 0.0) / algbw if algbw else 0.0
    n = nranks
    tol = 0.05
    if abs(ratio - n) < 0.01:
        if best.redop not in (None, "none"):
            return "reduce_scatter"
        return None  # all_gather and alltoall print the same columns and factors
    if abs(ratio - 1) < 0.01:
        if abs(factor - 2 * (n - 1) / n) < tol:
            return "all_reduce"
        if abs(factor - 1) < tol:
            if best.root is not None and best.root >= 0:
                return "reduce" if best.redop not in (None, "none") else "broadcast"
            return "sendrecv"
    return None


def parse_nccl_tests(text: str, collective: str | None = None, *, name_hint: str | None = None) -> NcclRun:
    """Parse the output of one nccl-tests binary.

    ``collective`` names the test when the caller knows it for sure (the command
    it ran). Otherwise it is taken from a ``<name>_perf`` mention in the text,
    then from ``name_hint`` (e.g. guessed from a file name), then inferred from
    the numbers (size/count ratio, busbw/algbw factor, redop, root), else None.
    """
    require_text(TOOL, text)
    layout: _Layout | None = None
    seen_header = False
    ranks: list[NcclRank] = []
    rows: list[NcclRow] = []
    warnings: list[str] = []
    params: dict[str, str] = {}
    avg: float | None = None
    oob: int | None = None
    partial = False
    named: str | None = None
    version: str | None = None
    for raw in iter_lines(text):
        line = _PREFIX.sub("", raw, count=1).rstrip()
        stripped = line.strip()
        if not stripped:
            continue
        if named is None:
            m = _PERF_NAME.search(stripped)
            if m:
                named = m.group(1)
        if stripped.startswith("#"):
            body = stripped.lstrip("#").strip()
            tokens = body.split()
            m = _RANK.match(stripped)
            if m:
                ranks.append(
                    NcclRank(
                        rank=int(m.group(1)),
                        host=m.group(3),
                        device=parse_int(m.group(4)),
                        bus_id=m.group(5).strip() or None,
                        pid=parse_int(m.group(2)),
                        gpu_name=m.group(6).strip() or None,
                    )
                )
                continue
            hdr = _header_layout(tokens)
            if hdr is not None:
                layout, seen_header = hdr, True
                continue
            m = _AVG.match(stripped)
            if m:
                avg = parse_float(m.group(1))
                continue
            m = _OOB.match(stripped)
            if m:
                oob = parse_int(m.group(1))
                if oob:
                    warnings.append(stripped)
                continue
            if body.startswith("nThread"):
                seen_header = True
                for key, value in _PARAM.findall(body):
                    params[key.rstrip(":")] = value
                continue
            if _WARN.search(body) and not _MPI_HELP.search(body):
                warnings.append(stripped)
            continue
        m = _NCCL_VERSION.search(stripped) if version is None else None
        if m:
            version = m.group(1)
        tokens = stripped.split()
        if _looks_like_row(tokens):
            row = _row(tokens, layout or _Layout((4, 4)))
            if row is not None:
                rows.append(row)
                partial = False
                continue
            partial = True
            continue
        if _WARN.search(stripped) and not _MPI_HELP.search(stripped):
            warnings.append(stripped)
    if not rows and not ranks and not seen_header:
        fail(TOOL, "no nccl-tests header, rank lines or result rows found", head_excerpt(text))
    nranks = len(ranks)
    rows_t = tuple(rows)
    busbws = [bw for r in rows_t for bw in (r.out_of_place.busbw_gbps, r.in_place.busbw_gbps) if bw is not None]
    if collective is None:
        collective = named or name_hint or _infer_collective(rows_t, nranks)
    return NcclRun(
        collective=collective,
        nranks=nranks,
        ranks=tuple(ranks),
        rows=rows_t,
        avg_busbw_gbps=avg,
        out_of_bounds=oob,
        warnings=tuple(warnings),
        truncated=avg is None or partial,
        max_busbw_gbps=max(busbws) if busbws else None,
        nccl_version=version,
        params=params,
    )
