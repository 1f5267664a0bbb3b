"""nvidia-smi: ``topo -m``, ``nvlink --status`` / ``nvlink -e`` and
``--query-gpu ... --format=csv``. ``nvidia-smi -q`` lives in
:mod:`burnin.parsers.nvidia_smi_q` and is re-exported here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from burnin.parsers._common import (
    fail,
    head_excerpt,
    is_elision,
    is_prompt,
    iter_lines,
    leading_float,
    parse_int,
    require_text,
    split_lines,
)
from burnin.parsers.nvidia_smi_q import SmiGpu, SmiQuery, parse_smi_query

__all__ = [
    "NvlinkGpu",
    "NvlinkLink",
    "NvlinkReport",
    "QueryCsv",
    "SmiGpu",
    "SmiQuery",
    "TopoMatrix",
    "numeric",
    "parse_nvlink",
    "parse_query_csv",
    "parse_smi_query",
    "parse_topo_matrix",
]

# --------------------------------------------------------------------------- topo -m


@dataclass(frozen=True, slots=True)
class TopoMatrix:
    gpus: tuple[str, ...]  # "GPU0".."GPU7", header order
    nics: tuple[str, ...]  # "NIC0"... (or "mlx5_0"... in old drivers), header order
    links: dict[str, dict[str, str]]  # row device -> column device -> "NV18"/"PIX"/"SYS"/"X"...
    cpu_affinity: dict[str, str]  # GPU -> "0-55,112-167" (as printed; may be "N/A"); absent when unreadable
    numa_affinity: dict[str, int | None]
    nic_names: dict[str, str]  # "NIC0" -> "mlx5_0"
    gpu_numa_id: dict[str, int | None]  # the "GPU NUMA ID" column where printed
    truncated: bool  # a header device has no row, or a row is short


_DEVICE = re.compile(r"^(?:GPU\d{1,4}|NIC\d{1,4}|[a-z][a-z0-9]{0,15}_[\w]{1,20})$")
_DESCRIPTORS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_LEGEND = re.compile(r"^(NIC\d{1,4}): (\S{1,64})$")
# The link types of nvidia-smi's legend (SOC: drivers before 384).
_LINK = re.compile(r"^(?:X|NV\d{1,3}|PIX|PXB|PHB|NODE|SYS|SOC)$")
_DESCRIPTOR_VALUE = {
    "CPU Affinity": re.compile(r"^(?:N/A|\d{1,6}(?:-\d{1,6})?(?:,\d{1,6}(?:-\d{1,6})?){0,63})$"),
    "NUMA Affinity": re.compile(r"^(?:N/A|\d{1,4}(?:-\d{1,4})?(?:,\d{1,4}(?:-\d{1,4})?){0,63})$"),
    "GPU NUMA ID": re.compile(r"^(?:N/A|\d{1,4})$"),
}


def _is_header(tokens: list[str]) -> bool:
    return (
        len(tokens) >= 2
        and _DEVICE.match(tokens[0]) is not None
        and (_DEVICE.match(tokens[1]) is not None or tokens[1] == "CPU")
    )


def _header_columns(line: str) -> tuple[list[str], list[str]]:
    """Device columns and descriptor columns of the ``topo -m`` header."""
    words = line.split()
    n = 0
    while n < len(words) and _DEVICE.match(words[n]):
        n += 1
    devices = words[:n]
    descriptors: list[str] = []
    i = n
    while i < len(words):
        for name in _DESCRIPTORS:
            size = name.count(" ") + 1
            if " ".join(words[i : i + size]) == name:
                descriptors.append(name)
                i += size
                break
        else:
            descriptors.append(words[i])
            i += 1
    return devices, descriptors


def _descriptor_values(descriptors: list[str], values: list[str]) -> dict[str, str] | None:
    """CPU/NUMA affinity cells of a row, or None when they cannot be told apart.

    Blank cells vanish when the tabs become spaces (a VM without NUMA information prints
    ``PXB<TAB><TAB><TAB>N/A``), and two cells glue when a tab is lost (``56-111,168-2231``):
    a row whose values do not match the header's descriptors one for one is not guessed.
    """
    if len(values) != len(descriptors):
        return None
    pairs = dict(zip(descriptors, values, strict=True))
    if any(_DESCRIPTOR_VALUE[name].match(value) is None for name, value in pairs.items()):
        return None
    return pairs


def parse_topo_matrix(text: str) -> TopoMatrix:
    """Parse ``nvidia-smi topo -m`` (tab- or space-separated).

    A copy that lost a tab between two columns (``NIC8NIC9`` in the header, ``NODENODE``
    in a row) is refused: its cells can no longer be matched to their devices.
    """
    require_text("nvidia-smi-topo", text)
    lines = split_lines(text)
    devices: list[str] = []
    descriptors: list[str] = []
    start = None
    for i, line in enumerate(lines):
        if _is_header(line.split()):
            devices, descriptors = _header_columns(line)
            start = i + 1
            break
    if start is None:
        fail("nvidia-smi-topo", "no 'GPU0 GPU1 ...' header line found", head_excerpt(text))
    unknown = [d for d in descriptors if d not in _DESCRIPTORS]
    if unknown:
        fail("nvidia-smi-topo", f"header column {unknown[0]!r} is neither a device nor "
             "CPU Affinity, NUMA Affinity or GPU NUMA ID (two columns glued in the copy?)", lines[start - 1][:300])
    links: dict[str, dict[str, str]] = {}
    cpu: dict[str, str] = {}
    numa: dict[str, int | None] = {}
    gpu_numa: dict[str, int | None] = {}
    names: dict[str, str] = {}
    truncated = False
    in_legend = False
    for line in lines[start:]:
        s = line.strip()
        if not s or is_elision(s):
            continue
        if s.startswith(("Legend", "NIC Legend")):
            in_legend = True
            continue
        m = _LEGEND.match(s)
        if m:
            names[m.group(1)] = m.group(2)
            continue
        if in_legend:
            continue
        if "\t" in line:
            cells = [c.strip() for c in line.split("\t")]
            label, body = cells[0], cells[1:]
            link_cells = body[: len(devices)]
            extra = [c for c in body[len(devices) :] if c]
        else:
            tokens = s.split()
            label, body = tokens[0], tokens[1:]
            link_cells = body[: len(devices)]
            extra = body[len(devices) :]
        if label not in devices:
            continue
        if len(link_cells) < len(devices) or "" in link_cells:
            truncated = True
        bad = next((c for c in link_cells if c and _LINK.match(c) is None), None)
        if bad is not None:
            fail("nvidia-smi-topo", f"row {label}: {bad!r} is not a link type (two cells glued in the copy?)",
                 line.strip()[:300])
        links[label] = {dev: cell for dev, cell in zip(devices, link_cells, strict=False) if cell}
        values = _descriptor_values(descriptors, extra) if extra else {}
        for name, value in (values or {}).items():
            if name == "CPU Affinity":
                cpu[label] = value
            elif name == "NUMA Affinity":
                numa[label] = parse_int(value)
            elif name == "GPU NUMA ID":
                gpu_numa[label] = parse_int(value)
    if not links:
        fail("nvidia-smi-topo", "header found but no matrix rows", head_excerpt(text))
    if any(dev not in links for dev in devices):
        truncated = True
    gpus = tuple(d for d in devices if d.startswith("GPU"))
    nics = tuple(d for d in devices if not d.startswith("GPU"))
    for nic in nics:
        if not nic.startswith("NIC"):
            names.setdefault(nic, nic)
    return TopoMatrix(gpus, nics, links, cpu, numa, names, gpu_numa, truncated)


# --------------------------------------------------------------------------- nvlink


@dataclass(frozen=True, slots=True)
class NvlinkLink:
    link: int
    speed_gbps: float | None  # None when inactive or not printed (nvlink -e)
    active: bool | None  # None when the output does not say (nvlink -e)
    errors: dict[str, int | None]  # "Replay Errors" -> 0, ... (nvlink -e)


@dataclass(frozen=True, slots=True)
class NvlinkGpu:
    index: int
    name: str
    uuid: str | None
    links: tuple[NvlinkLink, ...]
    message: str | None  # e.g. "NVML: Unable to retrieve NVLink information as all links ..."
    all_links_inactive: bool


@dataclass(frozen=True, slots=True)
class NvlinkReport:
    gpus: tuple[NvlinkGpu, ...]
    elided: bool  # the text had "[...]" lines: links may be missing


_GPU_LINE = re.compile(r"^GPU (\d{1,4}): (.*)$")
_LINK_LINE = re.compile(r"^Link (\d{1,3}): (.*)$")
_SPEED = re.compile(r"^(?:Speed )?([\d.]{1,12}) GB/s$")


@dataclass
class _GpuDraft:
    index: int
    name: str
    uuid: str | None
    links: dict[int, tuple[float | None, bool | None, dict[str, int | None]]]
    message: str | None = None


def _gpu_draft(m: re.Match[str]) -> _GpuDraft:
    rest = m.group(2).strip()
    uuid = None
    pos = rest.rfind("(UUID:")
    if pos >= 0:
        uuid = rest[pos + 6 :].strip().rstrip(")").strip() or None
        rest = rest[:pos].strip()
        if uuid is not None and is_elision(uuid):  # "(UUID: ...)": the author hid it
            uuid = None
    return _GpuDraft(int(m.group(1)), rest, uuid, {})


def parse_nvlink(text: str) -> NvlinkReport:
    """Parse ``nvidia-smi nvlink --status`` and/or ``nvidia-smi nvlink -e``."""
    require_text("nvidia-smi-nvlink", text)
    gpus: list[_GpuDraft] = []
    elided = False
    for raw in iter_lines(text):
        line = raw.strip()
        if not line or is_prompt(line):
            continue
        if is_elision(line):
            elided = True
            continue
        m = _GPU_LINE.match(line)
        if m:
            gpus.append(_gpu_draft(m))
            continue
        if not gpus:
            continue
        gpu = gpus[-1]
        m = _LINK_LINE.match(line)
        if m is None:
            gpu.message = line if gpu.message is None else f"{gpu.message}; {line}"
            continue
        link, value = int(m.group(1)), m.group(2).strip()
        speed, active, errors = gpu.links.get(link, (None, None, {}))
        sm = _SPEED.match(value)
        if sm:
            speed, active = leading_float(sm.group(1)), True
        elif "inactive" in value.lower():
            speed, active = None, False
        else:
            name, sep, count = value.partition(":")
            if sep:
                errors = {**errors, name.strip(): parse_int(count)}
        gpu.links[link] = (speed, active, errors)
    if not gpus:
        fail("nvidia-smi-nvlink", "no 'GPU N: name (UUID: ...)' line found", head_excerpt(text))
    out = []
    for g in gpus:
        links = tuple(NvlinkLink(n, sp, act, err) for n, (sp, act, err) in sorted(g.links.items()))
        inactive = bool(g.message and "all links are inactive" in g.message)
        out.append(NvlinkGpu(g.index, g.name, g.uuid, links, g.message, inactive))
    return NvlinkReport(gpus=tuple(out), elided=elided)


# --------------------------------------------------------------------------- --query-gpu csv


@dataclass(frozen=True, slots=True)
class QueryCsv:
    columns: tuple[str, ...]  # field names without unit, e.g. "memory.total"
    units: dict[str, str | None]  # "memory.total" -> "MiB" (from the header)
    rows: tuple[dict[str, str], ...]  # values as printed, units kept
    truncated: bool  # a row had fewer cells than the header


_HEADER_CELL = re.compile(r"^[a-z][a-z0-9_.]{0,80}(?: \[[^\]]{1,20}\])?$")
_FAILURES = ("No devices were found", "is not a valid field", "NVIDIA-SMI has failed")


def numeric(value: str | None) -> float | None:
    """The number in a query value: ``"143771 MiB"`` -> 143771.0, ``"[N/A]"`` -> None."""
    if value is None:
        return None
    v = value.strip()
    if v.lower().startswith("0x"):
        n = parse_int(v.split()[0])
        return float(n) if n is not None else None
    return leading_float(v)


def _is_csv_header(cells: list[str]) -> bool:
    return all(_HEADER_CELL.match(c) for c in cells) and any(
        "." in c or "_" in c or c in ("name", "index", "uuid", "serial", "count", "timestamp") for c in cells
    )


def parse_query_csv(text: str, columns: tuple[str, ...] | None = None) -> QueryCsv:
    """Parse ``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]``.

    Columns come from the header line; for ``noheader`` output pass ``columns``
    (the names given to ``--query-gpu``). Lines before the header are skipped.
    """
    require_text("nvidia-smi-query", text)
    header: list[str] | None = list(columns) if columns else None
    units: dict[str, str | None] = {}
    rows: list[dict[str, str]] = []
    truncated = False
    for raw in iter_lines(text):
        line = raw.strip()
        if not line or is_prompt(line) or is_elision(line):
            continue
        if any(f in line for f in _FAILURES):
            fail("nvidia-smi-query", line[:200], line)
        cells = [c.strip() for c in line.split(",")]
        if not rows and _is_csv_header(cells):
            header = []
            for c in cells:
                name, _, unit = c.partition(" [")
                header.append(name)
                units[name] = unit.rstrip("]") or None
            continue
        if header is None:
            continue
        if len(cells) < len(header):
            truncated = True
            continue
        if len(cells) > len(header):
            continue
        rows.append(dict(zip(header, cells, strict=True)))
    if header is None:
        fail(
            "nvidia-smi-query",
            "no CSV header line (e.g. 'name, pci.bus_id'); for noheader output pass the columns",
            head_excerpt(text),
        )
    if not rows:
        fail("nvidia-smi-query", "no CSV rows found", head_excerpt(text))
    for name in header:
        units.setdefault(name, None)
    return QueryCsv(columns=tuple(header), units=units, rows=tuple(rows), truncated=truncated)
