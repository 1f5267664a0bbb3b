"""GPU health checks (GPU): memory errors, Xids, clocks, temperature, power, PCIe, NVLink."""

from __future__ import annotations

from typing import Any

from burnin.checks import xid as xid_table
from burnin.checks.base import bad, check, gpu_field, judge, ok, per_gpu
from burnin.evaluate.verdict import Finding, Unmeasurable, Verdict, roll_up
from burnin.facts import Facts
from burnin.topology.model import Reference, Topology

HW_SLOWDOWN = 0x8
HW_THERMAL_SLOWDOWN = 0x40
HW_POWER_BRAKE = 0x80
_BAD_CLOCK_BITS = {HW_SLOWDOWN: "HwSlowdown", HW_THERMAL_SLOWDOWN: "HwThermalSlowdown",
                   HW_POWER_BRAKE: "HwPowerBrakeSlowdown"}


def _ref(topology: Topology, key: str) -> Reference:
    ref = topology.ref(key)
    if ref is None:
        raise Unmeasurable(f"topology {topology.name} defines no reference {key!r}")
    return ref


@check("GPU-01", "No uncorrectable ECC errors (DRAM volatile, SRAM aggregate)")
def ecc_uncorrectable(facts: Facts, topology: Topology) -> Verdict:
    volatile = _ref(topology, "ecc_uncorrected_volatile")
    sram = _ref(topology, "sram_uncorrected_aggregate")
    expected = f"volatile uncorrectable {volatile.describe()}, SRAM aggregate {sram.describe()}"

    def judge_gpu(subject: str, gpu: dict[str, Any]) -> Finding:
        vol = gpu_field(gpu, "ecc_errors", "volatile_uncorrected")
        sram_errors = gpu.get("ecc_errors", {}).get("sram_aggregate_uncorrected")
        text = f"{vol} volatile uncorrectable" + (f", {sram_errors} SRAM aggregate" if sram_errors else "")
        healthy = volatile.admits(vol) and (sram_errors is None or sram.admits(sram_errors))
        return judge(subject, healthy, text, expected)

    return roll_up("GPU-01", facts.node, per_gpu(facts, judge_gpu), expected=expected,
                   healthy="0 uncorrectable ECC errors")


@check("GPU-03", "Row remapping: nothing pending, no failure")
def row_remap(facts: Facts, topology: Topology) -> Verdict:
    expected = "no pending remap, no remap failure"

    def judge_gpu(subject: str, gpu: dict[str, Any]) -> Finding:
        pending = gpu_field(gpu, "remapped_rows", "pending")
        failure = gpu_field(gpu, "remapped_rows", "failure")
        unc = gpu.get("remapped_rows", {}).get("uncorrectable", 0)
        if failure:
            return bad(subject, f"row-remap failure ({unc} rows remapped for uncorrectable errors)", expected)
        if pending:
            return bad(subject, "row remap pending (GPU reset needed)", expected)
        return ok(subject, "no pending or failed remap", expected)

    return roll_up("GPU-03", facts.node, per_gpu(facts, judge_gpu), expected=expected,
                   healthy="no pending or failed row remap")


@check("GPU-04", "No fatal Xid in the kernel log")
def xid_scan(facts: Facts, topology: Topology) -> Verdict:
    from burnin.errors import ParseError
    from burnin.parsers.dmesg import parse_xid_events

    expected = "no fatal Xid since boot"
    text = facts.command("dmesg")
    try:
        report = parse_xid_events(text)
    except ParseError as exc:
        raise Unmeasurable(f"kernel log unreadable: {exc}") from None
    bus_to_gpu: dict[str, str] = {}
    try:
        for gpu in facts.gpus():
            bus = gpu.get("bus_id")
            if bus:
                bus_to_gpu[bus[:10].lower()] = f"gpu{gpu.get('index')}"
    except Unmeasurable:
        pass  # without NVML, name the PCI address instead of the GPU index
    for device in topology.gpus.devices:
        bus_to_gpu.setdefault(device.bus_id[:10], f"gpu{device.index}")
    findings: list[Finding] = []
    seen: set[tuple[str, int]] = set()
    for event in report.events:
        pci = event.pci.lower()
        if pci.count(":") == 1:
            pci = "0000:" + pci
        subject = bus_to_gpu.get(pci[:10], f"PCI {event.pci}")
        if (subject, event.xid) in seen:
            continue
        seen.add((subject, event.xid))
        fatal = xid_table.is_fatal(event.xid)
        findings.append(judge(subject, not fatal, xid_table.describe(event.xid), expected))
    if not findings:
        findings.append(ok("node", "no Xid", expected))
    return roll_up("GPU-04", facts.node, findings, expected=expected)


@check("GPU-05", "No hardware clock slowdown (HW slowdown, HW thermal, power brake)")
def clock_events(facts: Facts, topology: Topology) -> Verdict:
    expected = "no HwSlowdown/HwThermalSlowdown/HwPowerBrakeSlowdown"

    def judge_gpu(subject: str, gpu: dict[str, Any]) -> Finding:
        reasons = int(gpu_field(gpu, "clock_event_reasons"))
        active = [name for bit, name in _BAD_CLOCK_BITS.items() if reasons & bit]
        text = f"clock event reasons 0x{reasons:x}" + (f" ({', '.join(active)})" if active else "")
        return judge(subject, not active, text, expected)

    return roll_up("GPU-05", facts.node, per_gpu(facts, judge_gpu), expected=expected,
                   healthy="no hardware slowdown")


@check("GPU-06", "GPU temperature below the device's max operating limit")
def temperature(facts: Facts, topology: Topology) -> Verdict:
    margin = _ref(topology, "gpu_temp_margin_c")
    expected = f"temperature <= GPU max - {margin.lower if margin.lower is not None else margin.value:g} C"

    def judge_gpu(subject: str, gpu: dict[str, Any]) -> Finding:
        temp = gpu_field(gpu, "temperature_c")
        thresholds = gpu.get("temperature_thresholds") or {}
        limit = thresholds.get("gpu_max") or thresholds.get("slowdown")
        if limit is None:
            raise Unmeasurable(f"{subject}: no temperature threshold reported")
        headroom = limit - temp
        return judge(subject, margin.admits(headroom), f"{temp} C (limit {limit} C)",
                     f"<= {limit - (margin.lower or margin.value):g} C")

    return roll_up("GPU-06", facts.node, per_gpu(facts, judge_gpu), expected=expected)


@check("GPU-07", "Power limit at the default (not capped)")
def power_limit(facts: Facts, topology: Topology) -> Verdict:
    ref = _ref(topology, "power_limit_w")

    def judge_gpu(subject: str, gpu: dict[str, Any]) -> Finding:
        enforced = gpu_field(gpu, "power", "enforced_limit_mw") / 1000
        return judge(subject, ref.admits(enforced), f"power limit {enforced:g} W", ref.describe())

    return roll_up("GPU-07", facts.node, per_gpu(facts, judge_gpu), expected=f"power limit {ref.describe()}")


@check("GPU-08", "GPU PCIe link generation and width")
def pcie_link(facts: Facts, topology: Topology) -> Verdict:
    gen = _ref(topology, "gpu_pcie_gen")
    width = _ref(topology, "gpu_pcie_width")
    expected = f"Gen{int(gen.value)} x{int(width.value)}"

    def judge_gpu(subject: str, gpu: dict[str, Any]) -> Finding:
        # The link may downtrain its speed at idle, so judge the width now and the
        # generation the link can reach (its max), per check-catalog GPU-08.
        max_gen = gpu_field(gpu, "pcie", "max_gen")
        curr_width = gpu_field(gpu, "pcie", "curr_width")
        text = f"Gen{max_gen} x{curr_width}"
        return judge(subject, gen.admits(max_gen) and width.admits(curr_width), text, expected)

    return roll_up("GPU-08", facts.node, per_gpu(facts, judge_gpu), expected=expected)


@check("GPU-10", "NVLink links active on every GPU")
def nvlink_links(facts: Facts, topology: Topology) -> Verdict:
    ref = _ref(topology, "nvlink_links_active")

    def judge_gpu(subject: str, gpu: dict[str, Any]) -> Finding:
        links = gpu_field(gpu, "nvlink")
        active = sum(1 for link in links if link.get("active"))
        down = [str(link["link"]) for link in links if not link.get("active")]
        text = f"{active}/{len(links)} NVLink links active" + (f" (down: {','.join(down)})" if down else "")
        return judge(subject, ref.admits(active), text, f"{ref.describe()} active")

    return roll_up("GPU-10", facts.node, per_gpu(facts, judge_gpu),
                   expected=f"{ref.describe()} active per GPU")


@check("GPU-11", "NVLink error counters within limits")
def nvlink_errors(facts: Facts, topology: Topology) -> Verdict:
    refs = {
        "recovery": _ref(topology, "nvlink_recovery_errors"),
        "replay": _ref(topology, "nvlink_replay_errors"),
        "crc_flit": _ref(topology, "nvlink_crc_errors"),
    }
    expected = ", ".join(f"{name} {ref.describe()}" for name, ref in refs.items())

    def judge_gpu(subject: str, gpu: dict[str, Any]) -> Finding:
        links = gpu_field(gpu, "nvlink")
        totals = {name: sum(int(link.get(name) or 0) for link in links) for name in refs}
        over = [f"{name} {totals[name]}" for name, ref in refs.items() if not ref.admits(totals[name])]
        since = facts.data.get("counter_baseline")
        if over and since:
            over[-1] += f" since baseline {since}"
        text = ", ".join(over) if over else "counters " + ", ".join(f"{k} {v}" for k, v in totals.items())
        return judge(subject, not over, text, expected)

    return roll_up("GPU-11", facts.node, per_gpu(facts, judge_gpu), expected=expected,
                   healthy="NVLink error counters within limits")
