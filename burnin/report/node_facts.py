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
import math
import re
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Curve = tuple[tuple[float, float], ...]
"""(x, y) points, e.g. (message size in bytes, busbw in GB/s)."""

_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec")


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


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def number(value: object) -> float | None:
    """``value`` as a finite float, or None (bools, NaN, inf and text are no numbers)."""
    kind = type(value)  # exact types: bool is an int subclass and no number here
    if kind is float:
        return value if math.isfinite(value) else None  # type: ignore[arg-type,return-value]
    if kind is int:
        try:
            return float(value)  # type: ignore[arg-type]
        except OverflowError:  # an integer beyond float range
            return None
    return None


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


def _gpus(nvml: dict[str, Any], summary: list[tuple[str, str]], readings: dict[str, float]) -> None:
    gpus = [g for g in _list(nvml.get("gpus")) if isinstance(g, dict)]
    lost = [str(g.get("index", "?")) for g in gpus if g.get("lost")]
    count = number(nvml.get("device_count"))
    enumerated = count if count is not None else float(len(gpus)) if gpus else None
    # a GPU that fell off the bus is still enumerated, but it is not a GPU the node can use
    _put(readings, "gpu.count", None if enumerated is None else max(enumerated - len(lost), 0.0))
    gpus = [g for g in gpus if not g.get("lost")]
    if gpus:
        summary.append(("GPUs", _counted(str(g.get("name", "?")) for g in gpus)))
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
    temps = [t for g in gpus if (t := number(g.get("temperature_c"))) is not None]
    _put(readings, "gpu.temperature_max", max(temps, default=None))
    limits = [lim for g in gpus if (lim := _temperature_limit(g)) is not None]
    _put(readings, "gpu.temperature_limit", min(limits, default=None))
    if temps:
        summary.append(("temperature", _span(temps, "C")))
    power = [p / 1000 for g in gpus if (p := number(_dict(g.get("power")).get("enforced_limit_mw"))) is not None]
    _put(readings, "gpu.power_limit_min", min(power, default=None))
    if power:
        summary.append(("power limit", _span(power, "W")))
    _pcie(gpus, summary, readings)
    _nvlink(gpus, summary, readings)
    ecc = [e for g in gpus if (e := number(_dict(g.get("ecc_errors")).get("volatile_uncorrected"))) is not None]
    _put(readings, "gpu.ecc_volatile_uncorrected_max", max(ecc, default=None))


def _pcie(gpus: list[dict[str, Any]], summary: list[tuple[str, str]], readings: dict[str, float]) -> None:
    """The narrowest and slowest GPU PCIe link (GPU-08), and which GPUs trained below the others."""
    links = [(str(g.get("index", "?")), number(_dict(g.get("pcie")).get("curr_gen")),
              number(_dict(g.get("pcie")).get("curr_width"))) for g in gpus]
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


def _temperature_limit(gpu: dict[str, Any]) -> float | None:
    thresholds = _dict(gpu.get("temperature_thresholds"))
    limit = number(thresholds.get("gpu_max"))
    return limit if limit is not None else number(thresholds.get("slowdown"))


def _nvlink(gpus: list[dict[str, Any]], summary: list[tuple[str, str]], readings: dict[str, float]) -> None:
    per_gpu: list[tuple[str, int, int]] = []
    worst: float | None = None  # the highest replay or CRC count of any link (hot loop: 18 links x 8 GPUs)
    for gpu in gpus:
        links = [link for link in _list(gpu.get("nvlink")) if isinstance(link, dict)]
        if not links:
            continue
        active = 0
        for link in links:
            active += link.get("active") is True
            for value in (link.get("replay"), link.get("crc_flit")):
                if (type(value) is int or type(value) is float) and value == value and (worst is None or value > worst):
                    worst = value
        per_gpu.append((str(gpu.get("index", "?")), active, len(links)))
    if not per_gpu:
        return
    _put(readings, "gpu.nvlink_active_min", float(min(active for _, active, _ in per_gpu)))
    _put(readings, "gpu.nvlink_errors_max", number(worst))
    short = [f"gpu{i} {a}/{n}" for i, a, n in per_gpu if a < n]
    full = {n for _, a, n in per_gpu if a == n}
    text = f"{min(full)}/{min(full)} active on {len(per_gpu) - len(short)} GPUs" if full else ""
    summary.append(("NVLink", "; ".join([*short, text] if text else short)))


def _hcas(infiniband: dict[str, Any], summary: list[tuple[str, str]], readings: dict[str, float]) -> None:
    hcas = {str(k): v for k, v in _dict(infiniband.get("hcas")).items() if isinstance(v, dict)}
    if not hcas:
        return
    kinds = _counted(f"{h.get('hca_type', '?')} fw {h.get('fw_ver', '?')}" for h in hcas.values())
    summary.append(("HCAs", kinds))
    ib_rates: list[float] = []
    layers: Counter[str] = Counter()
    down: list[str] = []
    counters: list[float] = []
    for name, hca in sorted(hcas.items()):
        for port_id, port in _dict(hca.get("ports")).items():
            if not isinstance(port, dict):
                continue
            layer = str(port.get("link_layer") or "?")
            layers[layer] += 1
            match = _RATE.match(str(port.get("rate") or ""))
            if layer == "InfiniBand" and match:
                ib_rates.append(float(match.group(1)))
            if "ACTIVE" not in str(port.get("state") or ""):
                down.append(f"{name}/{port_id} {port.get('state', '?')}")
            counters.extend(n for raw in _dict(port.get("counters")).values() if (n := number(raw)) is not None)
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
    nvls = _dict(fabric.get("settings")).get("nvls")
    shown: list[str] = []
    for collective, run in sorted(_dict(fabric.get("single")).items()):
        run = _dict(run)
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
    for name, entry in _dict(fabric.get("fleet")).items():
        median_value = number(_dict(entry).get("median"))
        if name.startswith("single."):
            collective = name.removeprefix("single.")
            key = f"nccl.single.{collective}"
            key += ("" if collective != "all_reduce" else ".nvls" if nvls is not False else ".ring")
        else:
            key = name
        _put(readings, f"fleet.{key}", median_value)
    testcases = _dict(_dict(fabric.get("nvbandwidth")).get("testcases"))
    for testcase, key in (("device_to_device_memcpy_read_ce", "nvl.d2d_read_min"),
                          ("host_to_device_memcpy_ce", "nvl.h2d_min"), ("device_to_host_memcpy_ce", "nvl.d2h_min")):
        cells = [v for row in _list(testcases.get(testcase)) for cell in _list(row) if (v := number(cell)) is not None]
        _put(readings, key, min(cells, default=None))
    gdr = [number(_dict(m).get("bw_average_gbps"))
           for kinds in _dict(fabric.get("ib_write_bw")).values() for m in _dict(kinds).values()]
    _put(readings, "ib.write_bw_min", min((v for v in gdr if v is not None), default=None))
    _multi(_dict(fabric.get("multi")), readings)


def _multi(multi: dict[str, Any], readings: dict[str, float]) -> None:
    localization = _dict(multi.get("localization"))
    pairs = [number(_dict(t.get("measurement")).get("busbw_gbps"))
             for t in _list(localization.get("tests")) if isinstance(t, dict)]
    _put(readings, "nccl.pair_best", max((v for v in pairs if v is not None), default=None))
    rails = [number(_dict(m).get("busbw_gbps")) for m in _dict(localization.get("rails")).values()]
    _put(readings, "nccl.rail_min", min((v for v in rails if v is not None), default=None))


def _curve(value: object) -> Curve:
    """``[[size_bytes, busbw_gbps], ...]`` (or ``{"size_bytes":, "busbw_gbps":}`` rows) as finite points."""
    points: list[tuple[float, float]] = []
    for row in _list(value):
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
    fleet = number(_dict(_dict(megatron.get("fleet")).get("single.tflops_per_gpu")).get("median"))
    _put(readings, "fleet.megatron.single_tflops", fleet)


def _storage_traffic(traffic: dict[str, Any], readings: dict[str, float]) -> None:
    """The most bytes one compute HCA moved while the storage suite wrote and read its mounts (STO-03)."""
    moved = [sum(v for key in ("xmit", "rcv") if (v := number(_dict(counts).get(key))) is not None)
             for counts in _dict(traffic.get("compute")).values()]
    _put(readings, "storage.compute_hca_bytes_max", max(moved, default=None))


def _sources(sources: dict[str, Any], summary: list[tuple[str, str]]) -> None:
    failed = [f"{name}: {_dict(s).get('error') or 'failed'}" for name, s in sorted(sources.items())
              if isinstance(s, dict) and s.get("ok") is False]
    if failed:
        summary.append(("not collected", "; ".join(failed)))


def summarize(node: str, facts: Mapping[str, Any]) -> NodeFacts:
    """The summary and readings of one node's facts document (pure)."""
    summary: list[tuple[str, str]] = []
    readings: dict[str, float] = {}
    curves: dict[str, Curve] = {}
    hostname = facts.get("hostname")
    if hostname is not None and str(hostname) != node:
        summary.append(("hostname", str(hostname)))
    if facts.get("collected_at"):
        summary.append(("collected", str(facts["collected_at"])))
    _gpus(_dict(facts.get("nvml")), summary, readings)
    _hcas(_dict(facts.get("infiniband")), summary, readings)
    _kernel(_dict(facts.get("kernel")), summary)
    _fabric(_dict(facts.get("fabric")), summary, readings, curves)
    _megatron(_dict(facts.get("megatron")), summary, readings)
    _storage_traffic(_dict(facts.get("storage_traffic")), readings)
    _sources(_dict(facts.get("sources")), summary)
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
