"""GPU health checks (GPU): memory errors, Xids, clocks, temperature, power, PCIe, NVLink."""

from __future__ import annotations

import functools

from burnin.checks import xid as xid_table
from burnin.checks.base import ERROR_COUNT, bad, check, judge, measured_count, measured_flag, ok, per_gpu
from burnin.checks.references import reference
from burnin.errors import ParseError
from burnin.evaluate.verdict import Finding, Unmeasurable, Verdict, roll_up
from burnin.facts import Facts, GpuFacts
from burnin.facts.gpu import (
    CLOCK_EVENT_REASONS,
    ECC_VOLATILE_UNCORRECTED,
    PCIE_MAX_GEN,
    PCIE_WIDTH_NOW,
    POWER_LIMIT,
    REMAP_FAILURE,
    REMAP_PENDING,
    REMAPPED_UNCORRECTABLE,
    SRAM_UNCORRECTED,
    TEMPERATURE,
)
from burnin.parsers.dmesg import XidReport, parse_xid_events
from burnin.topology.model import Topology

HW_SLOWDOWN = 0x8
HW_THERMAL_SLOWDOWN = 0x40
HW_POWER_BRAKE = 0x80
_BAD_CLOCK_BITS = {HW_SLOWDOWN: "HwSlowdown", HW_THERMAL_SLOWDOWN: "HwThermalSlowdown",
                   HW_POWER_BRAKE: "HwPowerBrakeSlowdown"}


@check("GPU-01", "No uncorrectable ECC errors (DRAM volatile, SRAM aggregate)",
       sources=("nvml",), references=("ecc_uncorrected_volatile", "sram_uncorrected_aggregate"))
def ecc_uncorrectable(facts: Facts, topology: Topology) -> Verdict:
    volatile = reference(topology, "ecc_uncorrected_volatile")
    sram = reference(topology, "sram_uncorrected_aggregate")
    expected = f"volatile uncorrectable {volatile.describe()}, SRAM aggregate {sram.describe()}"

    def judge_gpu(subject: str, gpu: GpuFacts) -> Finding:
        vol = gpu.measured(ECC_VOLATILE_UNCORRECTED, subject)
        sram_errors = gpu.measured(SRAM_UNCORRECTED, subject)
        text = f"{vol} volatile uncorrectable, {sram_errors} SRAM aggregate"
        return judge(subject, volatile.admits(vol) and sram.admits(sram_errors), text, expected)

    return roll_up("GPU-01", facts.node, per_gpu(facts, topology, judge_gpu), expected=expected,
                   healthy="0 uncorrectable ECC errors")


@check("GPU-03", "Row remapping: nothing pending, no failure", sources=("nvml",))
def row_remap(facts: Facts, topology: Topology) -> Verdict:
    expected = "no pending remap, no remap failure"

    def judge_gpu(subject: str, gpu: GpuFacts) -> Finding:
        pending = gpu.measured(REMAP_PENDING, subject)
        failure = gpu.measured(REMAP_FAILURE, subject)
        if failure:
            rows = gpu.get(*REMAPPED_UNCORRECTABLE.path)
            count = f"{rows} rows" if isinstance(rows, int) else "rows"
            return bad(subject, f"row-remap failure ({count} remapped for uncorrectable errors)", expected)
        if pending:
            return bad(subject, "row remap pending (GPU reset needed)", expected)
        return ok(subject, "no pending or failed remap", expected)

    return roll_up("GPU-03", facts.node, per_gpu(facts, topology, judge_gpu), expected=expected,
                   healthy="no pending or failed row remap")


def kernel_log_report(facts: Facts) -> XidReport:
    """The Xid and SXid events of the collected kernel log (GPU-04, INV-04 read it; parsed once per log).

    Unmeasurable when dmesg printed nothing at all or the log cannot be parsed.
    """
    text = facts.command("dmesg")
    record = facts.command_record("dmesg") or {}
    total = record.get("lines_total")
    # The collector keeps only GPU/HCA lines; lines_total says whether the log itself was empty.
    empty = total == 0 if isinstance(total, int) and not isinstance(total, bool) else not text.strip()
    if empty:
        raise Unmeasurable("dmesg printed nothing (kernel log empty or unreadable)")
    try:
        return _parsed_kernel_log(text)
    except ParseError as exc:
        raise Unmeasurable(f"kernel log unreadable: {exc}") from None


@functools.lru_cache(maxsize=4)
def _parsed_kernel_log(text: str) -> XidReport:
    return parse_xid_events(text)


def _pci_device(address: str) -> str:
    """``0000:61:00.0``, ``0000:61:00`` (as an Xid line prints it) and ``61:00`` → ``0000:61:00``."""
    device = address.lower().partition(".")[0]
    return device if device.count(":") == 2 else "0000:" + device


@check("GPU-04", "No fatal Xid in the kernel log", sources=("dmesg",))
def xid_scan(facts: Facts, topology: Topology) -> Verdict:
    expected = "no fatal Xid since boot"
    report = kernel_log_report(facts)
    # Name the GPU by the topology's slot at its bus id; without one, by the PCI address.
    bus_to_gpu = {_pci_device(device.bus_id): f"gpu{device.index}" for device in topology.gpus.devices}
    findings: list[Finding] = []
    seen: set[tuple[str, int, bool]] = set()
    for event in report.events:
        subject = bus_to_gpu.get(_pci_device(event.pci), f"PCI {event.pci}")
        fatal = xid_table.is_fatal(event.xid, event.text)
        if (subject, event.xid, fatal) in seen:
            continue
        seen.add((subject, event.xid, fatal))
        findings.append(judge(subject, not fatal, xid_table.describe(event.xid), expected))
    if not findings:
        findings.append(ok("node", "no Xid", expected))
    return roll_up("GPU-04", facts.node, findings, expected=expected)


@check("GPU-05", "No hardware clock slowdown (HW slowdown, HW thermal, power brake)", sources=("nvml",))
def clock_events(facts: Facts, topology: Topology) -> Verdict:
    expected = "no HwSlowdown/HwThermalSlowdown/HwPowerBrakeSlowdown"

    def judge_gpu(subject: str, gpu: GpuFacts) -> Finding:
        reasons = gpu.measured(CLOCK_EVENT_REASONS, subject)
        active = [name for bit, name in _BAD_CLOCK_BITS.items() if reasons & bit]
        text = f"clock event reasons 0x{reasons:x}" + (f" ({', '.join(active)})" if active else "")
        return judge(subject, not active, text, expected)

    return roll_up("GPU-05", facts.node, per_gpu(facts, topology, judge_gpu), expected=expected,
                   healthy="no hardware slowdown")


@check("GPU-06", "GPU temperature below the device's max operating limit",
       sources=("nvml",), references=("gpu_temp_margin_c",))
def temperature(facts: Facts, topology: Topology) -> Verdict:
    margin_ref = reference(topology, "gpu_temp_margin_c")
    margin = margin_ref.lower if margin_ref.lower is not None else margin_ref.value
    expected = f"temperature <= GPU max - {margin:g} C"

    def judge_gpu(subject: str, gpu: GpuFacts) -> Finding:
        temp = gpu.measured(TEMPERATURE, subject)
        limit = gpu.measured_temperature_limit(subject)
        return judge(subject, margin_ref.admits(limit - temp), f"{temp:g} C (limit {limit:g} C)",
                     f"<= {limit - margin:g} C")

    return roll_up("GPU-06", facts.node, per_gpu(facts, topology, judge_gpu), expected=expected)


@check("GPU-07", "Power limit at the default (not capped)", sources=("nvml",), references=("power_limit_w",))
def power_limit(facts: Facts, topology: Topology) -> Verdict:
    ref = reference(topology, "power_limit_w")

    def judge_gpu(subject: str, gpu: GpuFacts) -> Finding:
        enforced = gpu.measured(POWER_LIMIT, subject) / 1000
        return judge(subject, ref.admits(enforced), f"power limit {enforced:g} W", ref.describe())

    return roll_up("GPU-07", facts.node, per_gpu(facts, topology, judge_gpu),
                   expected=f"power limit {ref.describe()}")


@check("GPU-08", "GPU PCIe link generation and width", sources=("nvml",), references=("gpu_pcie_gen", "gpu_pcie_width"))
def pcie_link(facts: Facts, topology: Topology) -> Verdict:
    gen = reference(topology, "gpu_pcie_gen")
    width = reference(topology, "gpu_pcie_width")
    expected = f"Gen{int(gen.value)} x{int(width.value)}"

    def judge_gpu(subject: str, gpu: GpuFacts) -> Finding:
        # The link may downtrain its speed at idle, so judge the width now and the
        # generation the link can reach (its max), per check-catalog GPU-08.
        max_gen = gpu.measured(PCIE_MAX_GEN, subject)
        curr_width = gpu.measured(PCIE_WIDTH_NOW, subject)
        text = f"Gen{max_gen} x{curr_width}"
        return judge(subject, gen.admits(max_gen) and width.admits(curr_width), text, expected)

    return roll_up("GPU-08", facts.node, per_gpu(facts, topology, judge_gpu), expected=expected)


@check("GPU-10", "NVLink links active on every GPU", sources=("nvml",), references=("nvlink_links_active",))
def nvlink_links(facts: Facts, topology: Topology) -> Verdict:
    ref = reference(topology, "nvlink_links_active")

    def judge_gpu(subject: str, gpu: GpuFacts) -> Finding:
        links = gpu.measured_links(subject)
        states = [(link.get("link"), measured_flag(link.get("active"), subject, f"NVLink {link.get('link')} active"))
                  for link in links]
        active = sum(1 for _, up in states if up)
        down = [str(number) for number, up in states if not up]
        text = f"{active}/{len(links)} NVLink links active" + (f" (down: {','.join(down)})" if down else "")
        return judge(subject, ref.admits(active), text, f"{ref.describe()} active")

    return roll_up("GPU-10", facts.node, per_gpu(facts, topology, judge_gpu),
                   expected=f"{ref.describe()} active per GPU")


@check("GPU-11", "NVLink error counters within limits",
       sources=("nvml",), references=("nvlink_recovery_errors", "nvlink_replay_errors", "nvlink_crc_errors"))
def nvlink_errors(facts: Facts, topology: Topology) -> Verdict:
    refs = {
        "recovery": reference(topology, "nvlink_recovery_errors"),
        "replay": reference(topology, "nvlink_replay_errors"),
        "crc_flit": reference(topology, "nvlink_crc_errors"),
    }
    expected = ", ".join(f"{name} {ref.describe()}" for name, ref in refs.items())

    def judge_gpu(subject: str, gpu: GpuFacts) -> Finding:
        links = gpu.measured_links(subject)
        if not links:
            raise Unmeasurable(f"{subject} reports no NVLink links to read counters from")
        totals = dict.fromkeys(refs, 0)
        for link in links:
            number = link.get("link")
            for name in refs:
                value = link.get(name)
                if value is None:
                    why = gpu.link_error(number, name) or "not reported"
                    raise Unmeasurable(f"{subject} NVLink {number} {name} counter: {why}")
                if type(value) is int and ERROR_COUNT.lo <= value <= ERROR_COUNT.hi:  # a count: measured as is
                    totals[name] += value  # (432 counters a node: no reading's name spelled for nothing)
                else:
                    totals[name] += measured_count(value, subject, f"NVLink {number} {name} counter", ERROR_COUNT)
        over = [f"{name} {totals[name]}" for name, ref in refs.items() if not ref.admits(totals[name])]
        since = facts.counter_baseline
        if over and since:
            over[-1] += f" since baseline {since}"
        text = ", ".join(over) if over else "counters " + ", ".join(f"{k} {v}" for k, v in totals.items())
        return judge(subject, not over, text, expected)

    return roll_up("GPU-11", facts.node, per_gpu(facts, topology, judge_gpu), expected=expected,
                   healthy="NVLink error counters within limits")
