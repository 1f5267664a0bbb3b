"""One node's facts, cut down to what report.html shows: a summary and its numeric readings.

A node's facts file is large (command outputs, every PCI device); a fleet's
would not fit in memory at once. :func:`read_node` keeps only a few lines of
summary and a flat ``{reading: value}`` map per node, so the report of 1,024
nodes reads one file at a time.

Facts come from the node: any field may be missing, of the wrong type, NaN or
absurd. Nothing here trusts them: a value that is not a finite number is no
reading, and every string shown later goes through :func:`burnin.text.printable`
(the report's Jinja ``finalize``, or :mod:`burnin.report.plots` for SVG text).
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from burnin.facts import Facts, GpuFacts
from burnin.facts.gpu import ECC_VOLATILE_UNCORRECTED, PCIE_GEN, PCIE_WIDTH_NOW, POWER_LIMIT, TEMPERATURE
from burnin.facts.values import items, mapping, number

Curve = tuple[tuple[float, float], ...]
"""(x, y) points, e.g. (message size in bytes, busbw in GB/s)."""

@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What the report keeps of one node's facts."""

    node: str
    summary: tuple[tuple[str, str], ...] = ()
    """(label, text) lines: GPUs, driver, HCAs, ... in display order."""
    readings: dict[str, float] = field(default_factory=dict)
    """reading key (``gpu.temperature_max``) -> value; only finite numbers."""
    curves: dict[str, Curve] = field(default_factory=dict)
    """curve key (``nccl.single.all_reduce``) -> points, where the facts keep them."""
    problem: str = ""
    """Why there are no facts (missing, unreadable); empty when they were read."""


def _span(values: Iterable[float], unit: str) -> str:
    values = sorted(values)
    if not values:
        return ""
    low, high = values[0], values[-1]
    return f"{low:g} {unit}" if low == high else f"{low:g}-{high:g} {unit}"


def _counted(names: Iterable[str]) -> str:
    """``8 x NVIDIA H100 80GB HBM3`` (most common first)."""
    counts = Counter(names)
    return ", ".join(f"{n} x {name}" for name, n in counts.most_common())


def _put(readings: dict[str, float], key: str, value: float | None) -> None:
    if value is not None:
        readings[key] = value


def _index(gpu: GpuFacts) -> str:
    index = gpu.get("index")
    return "?" if index is None else str(index)


def _float(value: int | None) -> float | None:
    return None if value is None else float(value)


def _gpus(facts: Facts, summary: list[tuple[str, str]], readings: dict[str, float]) -> None:
    nvml = mapping(facts.section("nvml"))
    gpus = facts.gpus_reported()
    lost = [_index(g) for g in gpus if g.lost]
    count = number(nvml.get("device_count"))
    enumerated = count if count is not None else float(len(gpus)) if gpus else None
    # a GPU that fell off the bus is still enumerated, but it is not a GPU the node can use
    _put(readings, "gpu.count", None if enumerated is None else max(enumerated - len(lost), 0.0))
    gpus = [g for g in gpus if not g.lost]
    if gpus:
        summary.append(("GPUs", _counted(str(g.get("name") or "?") for g in gpus)))
    if lost:
        summary.append(("lost GPUs", ", ".join(f"gpu{i}" for i in lost)))
    driver = str(nvml.get("driver_version") or "")
    cuda = number(nvml.get("cuda_driver_version"))
    if driver:
        cuda_text = f", CUDA {int(cuda) // 1000}.{int(cuda) % 1000 // 10}" if cuda else ""
        summary.append(("driver", driver + cuda_text))
    vbios = sorted({str(g.get("vbios")) for g in gpus if g.get("vbios")})
    if vbios:
        summary.append(("VBIOS", ", ".join(vbios)))
    temps = [t for g in gpus if (t := g.read(TEMPERATURE)) is not None]
    _put(readings, "gpu.temperature_max", max(temps, default=None))
    limits = [lim for g in gpus if (lim := g.temperature_limit()) is not None]
    _put(readings, "gpu.temperature_limit", min(limits, default=None))
    if temps:
        summary.append(("temperature", _span(temps, "C")))
    power = [p / 1000 for g in gpus if (p := g.read(POWER_LIMIT)) is not None]
    _put(readings, "gpu.power_limit_min", min(power, default=None))
    if power:
        summary.append(("power limit", _span(power, "W")))
    _pcie(gpus, summary, readings)
    _nvlink(gpus, summary, readings)
    ecc = [float(e) for g in gpus if (e := g.read(ECC_VOLATILE_UNCORRECTED)) is not None]
    _put(readings, "gpu.ecc_volatile_uncorrected_max", max(ecc, default=None))


def _pcie(gpus: list[GpuFacts], summary: list[tuple[str, str]], readings: dict[str, float]) -> None:
    """The narrowest and slowest GPU PCIe link (GPU-08), and which GPUs trained below the others."""
    links = [(_index(g), _float(g.read(PCIE_GEN)), _float(g.read(PCIE_WIDTH_NOW))) for g in gpus]
    gens = [gen for _, gen, _ in links if gen is not None]
    widths = [width for _, _, width in links if width is not None]
    _put(readings, "gpu.pcie_gen_min", min(gens, default=None))
    _put(readings, "gpu.pcie_width_min", min(widths, default=None))
    if not gens or not widths:
        return
    common = Counter((gen, width) for _, gen, width in links if gen is not None and width is not None).most_common(1)
    best_gen, best_width = common[0][0]
    odd = [f"gpu{i} Gen{gen:g} x{width:g}" for i, gen, width in links
           if gen is not None and width is not None and (gen, width) != (best_gen, best_width)]
    summary.append(("PCIe", "; ".join([*odd, f"Gen{best_gen:g} x{best_width:g} on {common[0][1]} GPUs"])))


def _nvlink(gpus: list[GpuFacts], summary: list[tuple[str, str]], readings: dict[str, float]) -> None:
    per_gpu: list[tuple[str, int, int]] = []
    worst: float | None = None  # the highest replay or CRC count of any link
    for gpu in gpus:
        active = gpu.nvlink_active()
        if active is None:
            continue
        high = gpu.nvlink_max("replay", "crc_flit")
        if high is not None and (worst is None or high > worst):
            worst = high
        per_gpu.append((_index(gpu), active, len(gpu.links())))
    if not per_gpu:
        return
    _put(readings, "gpu.nvlink_active_min", float(min(active for _, active, _ in per_gpu)))
    _put(readings, "gpu.nvlink_errors_max", worst)
    short = [f"gpu{i} {a}/{n}" for i, a, n in per_gpu if a < n]
    full = {n for _, a, n in per_gpu if a == n}
    text = f"{min(full)}/{min(full)} active on {len(per_gpu) - len(short)} GPUs" if full else ""
    summary.append(("NVLink", "; ".join([*short, text] if text else short)))


def _hcas(facts: Facts, summary: list[tuple[str, str]], readings: dict[str, float]) -> None:
    hcas = facts.hcas_reported()
    if not hcas:
        return
    kinds = _counted(f"{h.get('hca_type', '?')} fw {h.get('fw_ver', '?')}" for h in hcas)
    summary.append(("HCAs", kinds))
    ib_rates: list[float] = []
    layers: Counter[str] = Counter()
    down: list[str] = []
    counters: list[float] = []
    for hca in sorted(hcas, key=lambda h: h.name):
        for port in hca.ports():
            layer = str(port.get("link_layer") or "?")
            layers[layer] += 1
            rate = port.rate_gbps
            if layer == "InfiniBand" and rate is not None:
                ib_rates.append(rate)
            if not port.active:
                down.append(f"{hca.name}/{port.number} {port.get('state', '?')}")
            counters.extend(float(n) for name in port.counters or () if (n := port.counter(name)) is not None)
    _put(readings, "ib.rate_min", min(ib_rates, default=None))
    _put(readings, "ib.error_counter_max", max(counters, default=None))
    ports = ", ".join(f"{n} {layer}" for layer, n in layers.most_common())
    rates = f"; InfiniBand {_span(ib_rates, 'Gb/s')}" if ib_rates else ""
    summary.append(("ports", ports + rates))
    if down:
        summary.append(("ports not active", ", ".join(down)))


def _kernel(kernel: dict[str, Any], summary: list[tuple[str, str]]) -> None:
    cmdline = str(kernel.get("cmdline") or "")
    release = next((w.rsplit("vmlinuz-", 1)[1] for w in cmdline.split() if "vmlinuz-" in w), "")
    iommu = " ".join(w for w in cmdline.split() if w.startswith(("iommu", "intel_iommu", "amd_iommu")))
    parts = [p for p in (release, iommu, f"numa_balancing={kernel['numa_balancing']}"
                         if "numa_balancing" in kernel else "") if p]
    if parts:
        summary.append(("kernel", "; ".join(parts)))


def _fabric(fabric: dict[str, Any], summary: list[tuple[str, str]], readings: dict[str, float],
            curves: dict[str, Curve]) -> None:
    nvls = mapping(fabric.get("settings")).get("nvls")
    shown: list[str] = []
    for collective, run in sorted(mapping(fabric.get("single")).items()):
        run = mapping(run)
        key = f"nccl.single.{collective}"
        if collective == "all_reduce":
            key += ".nvls" if nvls is not False else ".ring"
        busbw = number(run.get("busbw_gbps"))
        _put(readings, key, busbw)
        if busbw is not None:
            shown.append(f"{collective} {busbw:g} GB/s")
        curve = _curve(run.get("curve"))
        if curve:
            curves[key] = curve
    if shown:
        summary.append(("single-node busbw", ", ".join(shown)))
    # the run's medians the fabric checks judged stragglers against, under "fleet." + the reading's key
    for name, entry in mapping(fabric.get("fleet")).items():
        median_value = number(mapping(entry).get("median"))
        if name.startswith("single."):
            collective = name.removeprefix("single.")
            key = f"nccl.single.{collective}"
            key += ("" if collective != "all_reduce" else ".nvls" if nvls is not False else ".ring")
        else:
            key = name
        _put(readings, f"fleet.{key}", median_value)
    testcases = mapping(mapping(fabric.get("nvbandwidth")).get("testcases"))
    for testcase, key in (("device_to_device_memcpy_read_ce", "nvl.d2d_read_min"),
                          ("host_to_device_memcpy_ce", "nvl.h2d_min"), ("device_to_host_memcpy_ce", "nvl.d2h_min")):
        cells = [v for row in items(testcases.get(testcase)) for cell in items(row) if (v := number(cell)) is not None]
        _put(readings, key, min(cells, default=None))
    gdr = [number(mapping(m).get("bw_average_gbps"))
           for kinds in mapping(fabric.get("ib_write_bw")).values() for m in mapping(kinds).values()]
    _put(readings, "ib.write_bw_min", min((v for v in gdr if v is not None), default=None))
    _multi(mapping(fabric.get("multi")), readings)


def _multi(multi: dict[str, Any], readings: dict[str, float]) -> None:
    localization = mapping(multi.get("localization"))
    pairs = [number(mapping(t.get("measurement")).get("busbw_gbps"))
             for t in items(localization.get("tests")) if isinstance(t, dict)]
    _put(readings, "nccl.pair_best", max((v for v in pairs if v is not None), default=None))
    rails = [number(mapping(m).get("busbw_gbps")) for m in mapping(localization.get("rails")).values()]
    _put(readings, "nccl.rail_min", min((v for v in rails if v is not None), default=None))


def _curve(value: object) -> Curve:
    """``[[size_bytes, busbw_gbps], ...]`` (or ``{"size_bytes":, "busbw_gbps":}`` rows) as finite points."""
    points: list[tuple[float, float]] = []
    for row in items(value):
        if isinstance(row, dict):
            pair = (number(row.get("size_bytes")), number(row.get("busbw_gbps")))
        elif isinstance(row, list) and len(row) >= 2:
            pair = (number(row[0]), number(row[1]))
        else:
            continue
        if pair[0] is not None and pair[1] is not None and pair[0] > 0:
            points.append((pair[0], pair[1]))
    return tuple(sorted(points))


def _megatron(megatron: dict[str, Any], summary: list[tuple[str, str]], readings: dict[str, float]) -> None:
    """The single-node Megatron run's TFLOP/s per GPU as burnin computes it (MEG-03/04), and the run's median."""
    from burnin.evaluate.verdict import Unmeasurable
    from burnin.megatron.judge import throughput

    record = megatron.get("single")
    if not isinstance(record, dict) or record.get("timed_out"):
        return
    try:
        tflops = throughput(record).computed
    except (Unmeasurable, ArithmeticError, TypeError, ValueError):
        return  # no steady iteration: MEG-03/04 say why
    _put(readings, "megatron.single_tflops", number(tflops))
    if "megatron.single_tflops" in readings:
        summary.append(("Megatron", f"{tflops:.4g} TFLOP/s per GPU (single node)"))
    fleet = number(mapping(mapping(megatron.get("fleet")).get("single.tflops_per_gpu")).get("median"))
    _put(readings, "fleet.megatron.single_tflops", fleet)


def _storage_traffic(traffic: dict[str, Any], readings: dict[str, float]) -> None:
    """The most bytes one compute HCA moved while the storage suite wrote and read its mounts (STO-03)."""
    moved = [sum(v for key in ("xmit", "rcv") if (v := number(mapping(counts).get(key))) is not None)
             for counts in mapping(traffic.get("compute")).values()]
    _put(readings, "storage.compute_hca_bytes_max", max(moved, default=None))


def _sources(facts: Facts, summary: list[tuple[str, str]]) -> None:
    failed = [f"{name}: {why}" for name, why in sorted(facts.failed_sources().items())]
    if failed:
        summary.append(("not collected", "; ".join(failed)))


def summarize(node: str, facts: Mapping[str, Any]) -> NodeFacts:
    """The summary and readings of one node's facts document (pure)."""
    summary: list[tuple[str, str]] = []
    readings: dict[str, float] = {}
    curves: dict[str, Curve] = {}
    document = Facts.of(node, facts)
    hostname = document.section("hostname")
    if hostname is not None and str(hostname) != node:
        summary.append(("hostname", str(hostname)))
    if document.section("collected_at"):
        summary.append(("collected", str(document.section("collected_at"))))
    _gpus(document, summary, readings)
    _hcas(document, summary, readings)
    _kernel(mapping(document.section("kernel")), summary)
    _fabric(mapping(document.section("fabric")), summary, readings, curves)
    _megatron(mapping(document.section("megatron")), summary, readings)
    _storage_traffic(mapping(document.section("storage_traffic")), readings)
    _sources(document, summary)
    return NodeFacts(node, tuple(summary), readings, curves)


def read_node(node: str, path: Path) -> NodeFacts:
    """:func:`summarize` of ``path``; a missing or unreadable file is a :class:`NodeFacts` with its problem."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return NodeFacts(node, problem="no facts file")
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return NodeFacts(node, problem=f"facts unreadable: {type(exc).__name__}: {exc}")
    if not isinstance(document, dict):
        return NodeFacts(node, problem=f"facts unreadable: a JSON {type(document).__name__}, not an object")
    return summarize(node, document)


def median(values: Iterable[float]) -> float | None:
    values = list(values)
    return statistics.median(values) if values else None
