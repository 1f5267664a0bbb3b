"""``lscpu`` (classic ``Key: value``, the indented tree style of newer
util-linux, ``lscpu -e`` and ``lscpu -p``) and ``numactl --hardware``.

CPU lists are kept as printed (``"0-55,112-167"``); use
:func:`burnin.parsers._common.expand_cpu_list` to get the numbers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from burnin.parsers._common import (
    compress_cpu_list,
    fail,
    head_excerpt,
    is_elision,
    is_user_prompt,
    iter_lines,
    parse_int,
    require_text,
    split_colon,
    split_lines,
    unquote,
)


@dataclass(frozen=True, slots=True)
class LscpuReport:
    style: str  # "classic", "tree", "table" (lscpu -e) or "parsable" (lscpu -p)
    architecture: str | None
    model_name: str | None
    vendor_id: str | None
    cpus: int | None
    online_cpus: str | None
    sockets: int | None
    cores_per_socket: int | None
    threads_per_core: int | None
    numa_node_count: int | None
    numa_nodes: dict[int, str]  # node -> CPU list as printed
    fields: dict[str, str]  # every "Key: value" line (first occurrence), as printed


@dataclass(frozen=True, slots=True)
class NumaNode:
    node: int
    cpus: tuple[int, ...]
    size_mb: int | None
    free_mb: int | None


@dataclass(frozen=True, slots=True)
class NumaHardware:
    available: int | None  # "available: 2 nodes (0-1)"; 0 for "No NUMA available"
    nodes: tuple[NumaNode, ...]
    distances: dict[int, dict[int, int]]


_NUMA_KEY = re.compile(r"^NUMA node(\d{1,6}) CPU\(s\)$")


def _classic(lines: list[str]) -> LscpuReport | None:
    fields: dict[str, str] = {}
    indents: set[int] = set()
    for line in lines:
        kv = split_colon(line)
        if kv is None:
            continue
        fields.setdefault(kv[0], kv[1])
        expanded = line.expandtabs(8)
        indents.add(len(expanded) - len(expanded.lstrip()))
    indented = len(indents) > 1
    if not any(k in fields for k in ("CPU(s)", "Architecture", "Model name", "Socket(s)")):
        return None
    numa: dict[int, str] = {}
    for key, value in fields.items():
        m = _NUMA_KEY.match(key)
        if m:
            numa[int(m.group(1))] = value
    return LscpuReport(
        style="tree" if indented else "classic",
        architecture=fields.get("Architecture"),
        model_name=fields.get("Model name"),
        vendor_id=fields.get("Vendor ID"),
        cpus=parse_int(fields.get("CPU(s)")),
        online_cpus=fields.get("On-line CPU(s) list"),
        sockets=parse_int(fields.get("Socket(s)")),
        cores_per_socket=parse_int(fields.get("Core(s) per socket")),
        threads_per_core=parse_int(fields.get("Thread(s) per core")),
        numa_node_count=parse_int(fields.get("NUMA node(s)")),
        numa_nodes=numa,
        fields=fields,
    )


def _table(header: list[str], rows: list[list[str]], style: str) -> LscpuReport | None:
    """``lscpu -e`` / ``lscpu -p``: one row per CPU."""
    cols = [h.upper() for h in header]
    if "CPU" not in cols:
        return None
    ci = cols.index("CPU")
    ni = cols.index("NODE") if "NODE" in cols else None
    si = cols.index("SOCKET") if "SOCKET" in cols else None
    ki = cols.index("CORE") if "CORE" in cols else None
    oi = cols.index("ONLINE") if "ONLINE" in cols else None
    cpus: list[int] = []
    online: list[int] = []
    nodes: dict[int, list[int]] = {}
    sockets: set[int] = set()
    cores: set[tuple[int | None, int]] = set()
    for row in rows:
        if len(row) <= ci:
            continue
        cpu = parse_int(row[ci])
        if cpu is None:
            continue
        cpus.append(cpu)
        if oi is None or (len(row) > oi and row[oi].lower() in ("yes", "y")):
            online.append(cpu)
        node = parse_int(row[ni]) if ni is not None and len(row) > ni else None
        if node is not None:
            nodes.setdefault(node, []).append(cpu)
        sock = parse_int(row[si]) if si is not None and len(row) > si else None
        if sock is not None:
            sockets.add(sock)
        core = parse_int(row[ki]) if ki is not None and len(row) > ki else None
        if core is not None:
            cores.add((sock, core))
    if not cpus:
        return None
    n_sockets = len(sockets) or None
    return LscpuReport(
        style=style,
        architecture=None,
        model_name=None,
        vendor_id=None,
        cpus=len(cpus),
        online_cpus=compress_cpu_list(online),
        sockets=n_sockets,
        cores_per_socket=len(cores) // n_sockets if cores and n_sockets else None,
        threads_per_core=len(cpus) // len(cores) if cores else None,
        numa_node_count=len(nodes) or None,
        numa_nodes={n: compress_cpu_list(c) for n, c in sorted(nodes.items())},
        fields={},
    )


def parse_lscpu(text: str) -> LscpuReport:
    """Parse ``lscpu`` in any of its common output styles."""
    require_text("lscpu", text)
    lines = [ln for ln in split_lines(text) if ln.strip() and not is_elision(ln) and not is_user_prompt(ln)]
    # lscpu -p: comment lines, the last one naming the columns, then CSV rows.
    comments = [ln for ln in lines if ln.lstrip().startswith("#") and "," in ln]
    csv_rows = [ln for ln in lines if not ln.lstrip().startswith("#") and "," in ln]
    if comments and csv_rows and ":" not in csv_rows[0]:
        header = comments[-1].lstrip().lstrip("#").strip().split(",")
        report = _table(header, [r.strip().split(",") for r in csv_rows], "parsable")
        if report is not None:
            return report
    # lscpu -e: a header line of upper-case column names starting with CPU.
    for i, line in enumerate(lines):
        tokens = line.split()
        if (
            tokens
            and tokens[0] == "CPU"
            and not any(t.endswith(":") for t in tokens)
            and any(t in ("NODE", "SOCKET", "CORE", "ONLINE") for t in tokens)
        ):
            rows = [ln.split() for ln in lines[i + 1 :]]
            report = _table(tokens, rows, "table")
            if report is not None:
                return report
            break
    report = _classic(lines)
    if report is None:
        fail("lscpu", "no lscpu fields (CPU(s), Architecture, Model name) found", head_excerpt(text))
    return report


_AVAILABLE = re.compile(r"^available:\s*(\d{1,6}) nodes?")
_NODE_LINE = re.compile(r"^node (\d{1,6}) (cpus|size|free):\s?(.*)$")


def parse_numactl_hardware(text: str) -> NumaHardware:
    """Parse ``numactl --hardware`` (``numactl -H``)."""
    require_text("numactl", text)
    available: int | None = None
    cpus: dict[int, tuple[int, ...]] = {}
    sizes: dict[int, int | None] = {}
    frees: dict[int, int | None] = {}
    distances: dict[int, dict[int, int]] = {}
    columns: list[int] | None = None
    seen = False
    for raw in iter_lines(text):
        # numactl prints no line starting with "#" or ">": those are Markdown headings or
        # quote marks a pasted copy gained ("#### node 0 size: 31862 MB").
        line = unquote(raw.strip().lstrip("#"))
        if not line:
            continue
        if line.startswith("No NUMA available"):
            available, seen = 0, True
            continue
        m = _AVAILABLE.match(line)
        if m:
            available, seen = int(m.group(1)), True
            continue
        m = _NODE_LINE.match(line)
        if m:
            seen = True
            node, what, value = int(m.group(1)), m.group(2), m.group(3)
            if what == "cpus":
                nums = [parse_int(t) for t in value.split()]
                cpus[node] = tuple(n for n in nums if n is not None)
            elif what == "size":
                sizes[node] = parse_int(value.split()[0]) if value.split() else None
            else:
                frees[node] = parse_int(value.split()[0]) if value.split() else None
            continue
        if line.startswith("node distances"):
            columns = []
            continue
        if columns is not None and line.startswith("node"):
            columns = [n for n in (parse_int(t) for t in line.split()[1:]) if n is not None]
            continue
        if columns and ":" in line:
            head, _, rest = line.partition(":")
            row = parse_int(head)
            vals = [parse_int(t) for t in rest.split()]
            if row is not None and len(vals) == len(columns) and None not in vals:
                distances[row] = {c: v for c, v in zip(columns, vals, strict=True) if v is not None}
    if not seen:
        fail("numactl", "no 'available:' or 'node N cpus:' lines found", head_excerpt(text))
    node_ids = sorted(set(cpus) | set(sizes) | set(frees))
    nodes = tuple(NumaNode(node=n, cpus=cpus.get(n, ()), size_mb=sizes.get(n), free_mb=frees.get(n)) for n in node_ids)
    return NumaHardware(available=available, nodes=nodes, distances=distances)
