"""``nvidia-smi -q`` (full, or partial with ``-d ECC``, ``-d PAGE_RETIREMENT``,
``-d ROW_REMAPPER``, ``-d TEMPERATURE`` ...).

The output is read into a tree by indentation first, then fields are looked up
by name, accepting the names different drivers use ("Clocks Throttle Reasons"
before 530, "Clocks Event Reasons" after; "Power Readings" vs "GPU Power
Readings"; absolute vs T.Limit-relative temperature thresholds; "SRAM
Uncorrectable" vs its Parity/SEC-DED split). Sections that are not printed
come back as None, never as an error.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from burnin.parsers._common import (
    NOT_AVAILABLE,
    fail,
    head_excerpt,
    is_elision,
    is_prompt,
    iter_lines,
    leading_float,
    leading_int,
    parse_int,
    require_text,
    split_key_value,
    yes_no,
)

TOOL = "nvidia-smi-q"


@dataclass(frozen=True, slots=True)
class EccCounts:
    sram_correctable: int | None
    sram_uncorrectable: int | None  # printed, or Parity + SEC-DED where split
    sram_uncorrectable_parity: int | None
    sram_uncorrectable_secded: int | None
    dram_correctable: int | None
    dram_uncorrectable: int | None
    single_bit_total: int | None  # pre-Ampere layout
    double_bit_total: int | None
    correctable_total: int | None
    uncorrectable_total: int | None
    sram_threshold_exceeded: bool | None
    counters: dict[str, int | None]  # every counter as printed ("Single Bit / Total")


@dataclass(frozen=True, slots=True)
class RetiredPages:
    single_bit_ecc: int | None
    double_bit_ecc: int | None
    pending: bool | None  # "Pending Page Blacklist" / "Pending Page Retirement"


@dataclass(frozen=True, slots=True)
class RemappedRows:
    correctable: int | None
    uncorrectable: int | None
    pending: bool | None
    failure: bool | None
    histogram: dict[str, int | None]  # "Max" -> 2560 banks, "High", "Partial", "Low", "None"


@dataclass(frozen=True, slots=True)
class SmiTemperature:
    gpu_c: float | None
    tlimit_c: float | None  # "GPU T.Limit Temp": degrees left before slowdown
    shutdown_c: float | None  # absolute thresholds (older drivers)
    slowdown_c: float | None
    max_operating_c: float | None
    shutdown_tlimit_c: float | None  # T.Limit-relative thresholds (535+)
    slowdown_tlimit_c: float | None
    max_operating_tlimit_c: float | None
    target_c: float | None
    memory_c: float | None
    memory_max_operating_c: float | None
    memory_max_operating_tlimit_c: float | None


@dataclass(frozen=True, slots=True)
class SmiGpu:
    pci_bus_id: str | None  # "00000000:19:00.0"; None for a snippet without a GPU header
    product_name: str | None
    product_architecture: str | None
    serial: str | None
    uuid: str | None
    vbios_version: str | None
    module_id: int | None
    persistence_mode: str | None  # "Enabled" / "Disabled"
    mig_mode_current: str | None
    mig_mode_pending: str | None
    pcie_gen_current: int | None
    pcie_gen_max: int | None
    pcie_gen_device_max: int | None
    pcie_gen_host_max: int | None
    link_width_current: int | None
    link_width_max: int | None
    pcie_replays: int | None
    ecc_mode_current: str | None
    ecc_mode_pending: str | None
    ecc_volatile: EccCounts | None
    ecc_aggregate: EccCounts | None
    sram_sources: dict[str, int | None] | None  # "Aggregate Uncorrectable SRAM Sources"
    retired_pages: RetiredPages | None
    remapped_rows: RemappedRows | None
    clock_event_reasons: dict[str, bool] | None  # name -> active
    temperature: SmiTemperature | None
    power_draw_w: float | None
    power_limit_w: float | None  # the limit in force ("Current"/"Enforced Power Limit")
    default_power_limit_w: float | None
    max_power_limit_w: float | None
    fabric_state: str | None
    fabric_status: str | None
    reset_required: bool | None
    drain_and_reset_recommended: bool | None


@dataclass(frozen=True, slots=True)
class SmiQuery:
    timestamp: str | None
    driver_version: str | None
    cuda_version: str | None
    attached_gpus: int | None
    gpus: tuple[SmiGpu, ...]
    errors: tuple[str, ...]  # lines such as "Unable to determine the device handle ..."


@dataclass
class _Node:
    key: str
    value: str | None
    children: list[_Node] = field(default_factory=list)

    def get(self, *names: str) -> _Node | None:
        wanted = [n.lower() for n in names]
        for name in wanted:
            for child in self.children:
                if child.key.lower() == name:
                    return child
        return None

    def val(self, *names: str) -> str | None:
        node = self.get(*names)
        if node is None or node.value is None:
            return None
        return None if node.value.strip().lower() in NOT_AVAILABLE else node.value

    def path(self, *steps: tuple[str, ...] | str) -> _Node | None:
        node: _Node | None = self
        for step in steps:
            if node is None:
                return None
            node = node.get(*((step,) if isinstance(step, str) else step))
        return node


_GPU_HEADER = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])$")
_TOP_KEYS = frozenset({"timestamp", "driver version", "cuda version", "attached gpus"})
# Keys that show a headerless snippet is one GPU's section.
_GPU_KEYS = frozenset(
    {
        "product name",
        "serial number",
        "gpu uuid",
        "vbios version",
        "persistence mode",
        "mig mode",
        "pci",
        "ecc mode",
        "ecc errors",
        "retired pages",
        "remapped rows",
        "clocks event reasons",
        "clocks throttle reasons",
        "temperature",
        "gpu power readings",
        "power readings",
        "fabric",
    }
)


def _sections(text: str) -> Iterator[_Node]:
    """The top-level entries of the indentation tree, each yielded once its last line is read.

    A ``GPU 0000:..`` section is read and dropped before the next begins, so a
    long output is never held as one tree.
    """
    top: _Node | None = None
    stack: list[tuple[int, _Node]] = []
    for raw in iter_lines(text):
        line = raw.expandtabs(4).rstrip()
        content = line.strip()
        if not content or is_elision(content) or is_prompt(content) or content.startswith("==="):
            continue
        indent = len(line) - len(line.lstrip())
        m = _GPU_HEADER.match(content)
        if m:
            node = _Node("GPU", m.group(1))
        else:
            kv = split_key_value(content)
            node = _Node(kv[0], kv[1]) if kv else _Node(content, None)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if m:  # a GPU header always starts a new top-level section
            stack.clear()
        if stack:
            stack[-1][1].children.append(node)
        else:
            if top is not None:
                yield top
            top = node
        stack.append((indent, node))
    if top is not None:
        yield top


def _leaves(node: _Node) -> dict[str, str]:
    """Every value below node, keyed by its path ("Single Bit / Total"), in order."""
    out: dict[str, str] = {}
    todo: list[tuple[str, _Node]] = [("", c) for c in reversed(node.children)]
    while todo:
        prefix, child = todo.pop()
        key = f"{prefix}{child.key}"
        if child.value is not None:
            out.setdefault(key, child.value)
        todo.extend((f"{key} / ", c) for c in reversed(child.children))
    return out


def _sum(*values: int | None) -> int | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _ecc(node: _Node | None) -> EccCounts | None:
    if node is None:
        return None
    raw = _leaves(node)
    if not raw:
        return None
    counters = {k: parse_int(v) for k, v in raw.items() if yes_no(v) is None}
    low = {k.lower(): v for k, v in counters.items()}
    sram_u = low.get("sram uncorrectable")
    parity = low.get("sram uncorrectable parity")
    secded = low.get("sram uncorrectable sec-ded")
    if sram_u is None and (parity is not None or secded is not None):
        sram_u = _sum(parity, secded)
    sram_c, dram_c = low.get("sram correctable"), low.get("dram correctable")
    dram_u = low.get("dram uncorrectable")
    single, double = low.get("single bit / total"), low.get("double bit / total")
    exceeded = next((yes_no(v) for k, v in raw.items() if "threshold exceeded" in k.lower()), None)
    return EccCounts(
        sram_correctable=sram_c,
        sram_uncorrectable=sram_u,
        sram_uncorrectable_parity=parity,
        sram_uncorrectable_secded=secded,
        dram_correctable=dram_c,
        dram_uncorrectable=dram_u,
        single_bit_total=single,
        double_bit_total=double,
        correctable_total=_sum(sram_c, dram_c) if single is None else single,
        uncorrectable_total=_sum(sram_u, dram_u) if double is None else double,
        sram_threshold_exceeded=exceeded,
        counters=counters,
    )


def _retired(node: _Node | None) -> RetiredPages | None:
    if node is None or not node.children:
        return None
    return RetiredPages(
        single_bit_ecc=parse_int(node.val("Single Bit ECC")),
        double_bit_ecc=parse_int(node.val("Double Bit ECC")),
        pending=yes_no(node.val("Pending Page Blacklist", "Pending Page Retirement", "Pending")),
    )


def _remapped(node: _Node | None) -> RemappedRows | None:
    if node is None or not node.children:
        return None
    hist_node = node.get("Bank Remap Availability Histogram")
    histogram = {c.key: leading_int(c.value) for c in hist_node.children} if hist_node is not None else {}
    return RemappedRows(
        correctable=parse_int(node.val("Correctable Error")),
        uncorrectable=parse_int(node.val("Uncorrectable Error")),
        pending=yes_no(node.val("Pending")),
        failure=yes_no(node.val("Remapping Failure Occurred")),
        histogram=histogram,
    )


def _reasons(node: _Node | None) -> dict[str, bool] | None:
    if node is None:
        return None
    out: dict[str, bool] = {}
    for key, value in _leaves(node).items():
        state = value.strip().lower()
        if state in ("active", "not active"):
            out[key.rsplit(" / ", 1)[-1]] = state == "active"
    return out


_TEMPS = {
    "gpu current temp": "gpu_c",
    "gpu t.limit temp": "tlimit_c",
    "gpu shutdown temp": "shutdown_c",
    "gpu slowdown temp": "slowdown_c",
    "gpu max operating temp": "max_operating_c",
    "gpu shutdown t.limit temp": "shutdown_tlimit_c",
    "gpu slowdown t.limit temp": "slowdown_tlimit_c",
    "gpu max operating t.limit temp": "max_operating_tlimit_c",
    "gpu target temperature": "target_c",
    "memory current temp": "memory_c",
    "memory max operating temp": "memory_max_operating_c",
    "memory max operating t.limit temp": "memory_max_operating_tlimit_c",
}


def _temperature(node: _Node | None) -> SmiTemperature | None:
    if node is None or not node.children:
        return None
    vals: dict[str, float | None] = dict.fromkeys(_TEMPS.values())
    for child in node.children:
        name = _TEMPS.get(child.key.lower())
        if name and child.value and child.value.strip().lower() not in NOT_AVAILABLE:
            vals[name] = leading_float(child.value)
    return SmiTemperature(**vals)


def _watts(node: _Node | None, *names: str) -> float | None:
    return leading_float(node.val(*names)) if node is not None else None


def _gpu(node: _Node, bus_id: str | None) -> SmiGpu:
    pci = node.get("PCI")
    link = pci.get("GPU Link Info") if pci else None
    gen = link.get("PCIe Generation") if link else None
    width = link.get("Link Width") if link else None
    ecc = node.get("ECC Errors")
    power = node.get("GPU Power Readings", "Power Readings")
    mig = node.get("MIG Mode")
    ecc_mode = node.get("ECC Mode")
    fabric = node.get("Fabric")
    reset = node.get("GPU Reset Status")
    return SmiGpu(
        pci_bus_id=bus_id or (pci.val("Bus Id") if pci else None),
        product_name=node.val("Product Name"),
        product_architecture=node.val("Product Architecture"),
        serial=node.val("Serial Number"),
        uuid=node.val("GPU UUID"),
        vbios_version=node.val("VBIOS Version"),
        module_id=parse_int(node.val("Module ID")),
        persistence_mode=node.val("Persistence Mode"),
        mig_mode_current=mig.val("Current") if mig else None,
        mig_mode_pending=mig.val("Pending") if mig else None,
        pcie_gen_current=parse_int(gen.val("Current")) if gen else None,
        pcie_gen_max=parse_int(gen.val("Max")) if gen else None,
        pcie_gen_device_max=parse_int(gen.val("Device Max")) if gen else None,
        pcie_gen_host_max=parse_int(gen.val("Host Max")) if gen else None,
        link_width_current=leading_int(width.val("Current")) if width else None,
        link_width_max=leading_int(width.val("Max")) if width else None,
        pcie_replays=parse_int(pci.val("Replays Since Reset")) if pci else None,
        ecc_mode_current=ecc_mode.val("Current") if ecc_mode else None,
        ecc_mode_pending=ecc_mode.val("Pending") if ecc_mode else None,
        ecc_volatile=_ecc(ecc.get("Volatile")) if ecc else None,
        ecc_aggregate=_ecc(ecc.get("Aggregate")) if ecc else None,
        sram_sources=_sources(ecc),
        retired_pages=_retired(node.get("Retired Pages")),
        remapped_rows=_remapped(node.get("Remapped Rows")),
        clock_event_reasons=_reasons(
            node.get("Clocks Event Reasons", "Clocks Throttle Reasons", "Clocks Event Reason")
        ),
        temperature=_temperature(node.get("Temperature")),
        power_draw_w=_watts(power, "Power Draw", "Average Power Draw", "Instantaneous Power Draw"),
        power_limit_w=_watts(power, "Current Power Limit", "Enforced Power Limit", "Power Limit"),
        default_power_limit_w=_watts(power, "Default Power Limit"),
        max_power_limit_w=_watts(power, "Max Power Limit"),
        fabric_state=fabric.val("State") if fabric else None,
        fabric_status=fabric.val("Status") if fabric else None,
        reset_required=yes_no(reset.val("Reset Required")) if reset else None,
        drain_and_reset_recommended=(yes_no(reset.val("Drain and Reset Recommended")) if reset else None),
    )


def _sources(ecc: _Node | None) -> dict[str, int | None] | None:
    node = ecc.get("Aggregate Uncorrectable SRAM Sources") if ecc else None
    if node is None:
        return None
    return {c.key: parse_int(c.value) for c in node.children}


def parse_smi_query(text: str) -> SmiQuery:
    """Parse ``nvidia-smi -q`` output, full or partial (``-d ...``) or a snippet."""
    require_text(TOOL, text)
    root = _Node("", None)  # the top-level entries other than GPU sections
    gpus: list[SmiGpu] = []
    errors: list[str] = []
    loose = _Node("", None)
    for node in _sections(text):
        if node.key == "GPU" and node.value:
            gpus.append(_gpu(node, node.value))
            continue
        root.children.append(node)
        if node.key.lower() in _TOP_KEYS:
            continue
        elif node.value is None and not node.children:
            errors.append(node.key)
        else:
            loose.children.append(node)
    if not gpus and any(n.key.lower() in _GPU_KEYS for n in loose.children):
        gpus.append(_gpu(loose, None))  # a snippet of one GPU's section without its header
    if not gpus and root.val("Driver Version", "Attached GPUs") is None:
        message = "no 'GPU 0000:..' section or nvidia-smi -q fields found"
        if errors:
            message += f"; the tool printed: {errors[0][:200]}"
        fail(TOOL, message, head_excerpt(text))
    return SmiQuery(
        timestamp=root.val("Timestamp"),
        driver_version=root.val("Driver Version"),
        cuda_version=root.val("CUDA Version"),
        attached_gpus=parse_int(root.val("Attached GPUs")),
        gpus=tuple(gpus),
        errors=tuple(errors),
    )
