"""Topology and host configuration checks (TOP): NUMA, affinity, PCIe paths, ACS, IOMMU."""

from __future__ import annotations

import os
from typing import Any

from burnin.checks.base import (
    NUMA_BALANCING_MODE,
    NUMA_NODE,
    bad,
    check,
    judge,
    measured_count,
    ok,
    parse_cpulist,
    unknown,
)
from burnin.checks.references import reference
from burnin.evaluate.verdict import Finding, Unmeasurable, Verdict, roll_up
from burnin.facts import Facts
from burnin.topology.model import Topology


def _devices_in_topology(topology: Topology) -> list[tuple[str, str, int]]:
    """(subject, bus id, expected NUMA node) for every GPU and HCA of the topology."""
    items = [(f"gpu{d.index}", d.bus_id, d.numa_node) for d in topology.gpus.devices]
    items += [(h.name, h.bus_id, h.numa_node) for h in topology.hcas]
    return items


def _absent(bus_id: str) -> str:
    """Why a device of the topology is not measured here (INV-01 or IB-01 fails the node for it)."""
    return f"{bus_id} absent from PCI"


@check("TOP-01", "NUMA node of every GPU and HCA", sources=("pci", "numa"))
def numa_nodes(facts: Facts, topology: Topology) -> Verdict:
    devices = facts.pci_devices()
    findings: list[Finding] = []
    online = facts.numa().get("online")
    if not online:
        findings.append(unknown("node", "/sys/devices/system/node/online unreadable",
                                f"{topology.numa.nodes} NUMA nodes"))
    else:
        count = len(parse_cpulist(str(online)))
        findings.append(judge("node", count == topology.numa.nodes, f"{count} NUMA nodes online",
                              f"{topology.numa.nodes} NUMA nodes"))
    for subject, bus_id, want in _devices_in_topology(topology):
        device = devices.get(bus_id)
        if device is None:
            findings.append(unknown(subject, _absent(bus_id), f"NUMA {want}"))
            continue
        try:
            numa = measured_count(device.get("numa_node"), bus_id, "numa_node", NUMA_NODE)
        except Unmeasurable as exc:
            findings.append(unknown(subject, exc.reason, f"NUMA {want}"))
            continue
        if numa == -1:
            findings.append(bad(subject, "NUMA -1 (firmware published no proximity)", f"NUMA {want}"))
        else:
            findings.append(judge(subject, numa == want, f"NUMA {numa}", f"NUMA {want}"))
    return roll_up("TOP-01", facts.node, findings, expected="NUMA layout as in the topology",
                   healthy="NUMA layout as in the topology")


@check("TOP-02", "GPU CPU affinity is its NUMA node's CPUs", sources=("pci",))
def cpu_affinity(facts: Facts, topology: Topology) -> Verdict:
    devices = facts.pci_devices()
    findings: list[Finding] = []
    for gpu in topology.gpus.devices:
        subject = f"gpu{gpu.index}"
        want_text = topology.numa.cpulists.get(gpu.numa_node, "")
        want = parse_cpulist(want_text)
        if not want:
            raise Unmeasurable(f"topology {topology.name} gives no CPU list for NUMA {gpu.numa_node}")
        expected = f"CPUs {want_text} (NUMA {gpu.numa_node})"
        device = devices.get(gpu.bus_id)
        if device is None:
            findings.append(unknown(subject, _absent(gpu.bus_id), expected))
            continue
        text = device.get("local_cpulist")
        if not text:
            findings.append(unknown(subject, f"{gpu.bus_id}/local_cpulist unreadable", expected))
            continue
        try:
            have = parse_cpulist(str(text))
        except Unmeasurable as exc:
            findings.append(unknown(subject, f"{gpu.bus_id}/local_cpulist: {exc.reason}", expected))
            continue
        findings.append(judge(subject, have == want, f"CPUs {text}", expected))
    return roll_up("TOP-02", facts.node, findings, expected="each GPU's local CPUs = its NUMA node's CPUs",
                   healthy="GPU CPU affinity matches NUMA layout")


def _ancestors(devices: dict[str, dict[str, Any]], bus_id: str) -> list[str]:
    """PCI addresses from the device up to its root port (nearest first)."""
    path = devices.get(bus_id, {}).get("path")
    if not path or not isinstance(path, str):
        raise Unmeasurable(f"PCI path of {bus_id} unknown")
    parts = [p for p in path.split(os.sep) if p.count(":") == 2]
    return list(reversed(parts[:-1]))


def pcie_relation(devices: dict[str, dict[str, Any]], a: str, b: str) -> str:
    """nvidia-smi-style relation of two devices from their sysfs paths.

    PIX: their upstream ports hang off one switch; PXB: several bridges, no
    host bridge; PHB/NODE: only the host bridge or the CPU in common; SYS:
    different NUMA nodes.
    """
    up_a, up_b = _ancestors(devices, a), _ancestors(devices, b)
    common = [p for p in up_a if p in up_b]
    if common:
        hops = up_a.index(common[0]) + up_b.index(common[0])
        return "PIX" if hops <= 2 else "PXB"
    numa_a = devices.get(a, {}).get("numa_node")
    numa_b = devices.get(b, {}).get("numa_node")
    root_a = devices.get(a, {}).get("path", "").split(os.sep)[3:4]
    root_b = devices.get(b, {}).get("path", "").split(os.sep)[3:4]
    if root_a == root_b:
        return "PHB"
    return "NODE" if numa_a == numa_b and numa_a not in (None, -1) else "SYS"


@check("TOP-03", "Each GPU shares a PCIe switch with its compute HCA (PIX)", sources=("pci",))
def gpu_nic_pairing(facts: Facts, topology: Topology) -> Verdict:
    devices = facts.pci_devices()
    hcas = {h.name: h for h in topology.hcas}
    findings: list[Finding] = []
    for gpu in topology.gpus.devices:
        if gpu.hca is None:
            continue
        subject = f"gpu{gpu.index}"
        hca = hcas[gpu.hca]
        absent = [bus for bus in (gpu.bus_id, hca.bus_id) if bus not in devices]
        if absent:
            findings.append(unknown(subject, _absent(absent[0]), f"PIX to {hca.name}"))
            continue
        try:
            relation = pcie_relation(devices, gpu.bus_id, hca.bus_id)
        except Unmeasurable as exc:
            findings.append(unknown(subject, exc.reason))
            continue
        findings.append(judge(subject, relation == "PIX", f"{relation} to {hca.name}", f"PIX to {hca.name}"))
    return roll_up("TOP-03", facts.node, findings, expected="every GPU PIX to its compute HCA",
                   healthy="every GPU PIX to its compute HCA")


# lspci's port types whose ACS Control the check judges: switch downstream ports
# must show one (check-catalog TOP-04); a root port is judged when it shows one.
_ACS_REQUIRED = "Downstream Port"
_ACS_JUDGED = ("Downstream Port", "Root Port")


@check("TOP-04", "ACS disabled on PCIe switch ports in GPU/HCA paths", sources=("pci", "lspci"), fast=False)
def acs_disabled(facts: Facts, topology: Topology) -> Verdict:
    from burnin.errors import ParseError
    from burnin.parsers.lspci import parse_lspci_control_at

    expected = "ACSCtl all '-' (SrcValid- ReqRedir- CmpltRedir- ...)"
    if not topology.host.acs_disabled:
        return roll_up("TOP-04", facts.node, [ok("node", "not required", "n/a")], expected="not required")
    devices = facts.pci_devices()
    text = facts.command("lspci")
    findings: list[Finding] = []
    in_paths: set[str] = set()
    for subject, bus_id, _ in _devices_in_topology(topology):
        if bus_id not in devices:
            findings.append(unknown(subject, _absent(bus_id) + ": its PCIe path is not known", expected))
            continue
        try:
            in_paths.update(_ancestors(devices, bus_id))
        except Unmeasurable as exc:
            findings.append(unknown(subject, exc.reason, expected))
    try:  # only the stanzas of the ports in the paths: a whole machine's lspci -vvv is ~2,000 lines
        listed = parse_lspci_control_at(text, in_paths)
    except ParseError as exc:
        raise Unmeasurable(f"lspci output unreadable: {exc}") from None
    for address in sorted(in_paths):
        device = listed.get(address)
        if device is None:
            findings.append(unknown(address, "not in the lspci output", expected))
        elif device.port_type is None:
            findings.append(unknown(address, "lspci showed no PCI Express capability (capabilities "
                                             "unreadable: run lspci as root)", expected))
        elif device.acs_ctl is None:
            if device.port_type == _ACS_REQUIRED:
                findings.append(unknown(address, f"{device.port_type} shows no ACSCtl line", expected))
        elif device.port_type in _ACS_JUDGED:
            enabled = sorted(name for name, on in device.acs_ctl.items() if on)
            text = f"ACSCtl {' '.join(n + '+' for n in enabled)}" if enabled else "ACS off"
            findings.append(judge(address, not enabled, text, "ACS off"))
    if not findings:
        raise Unmeasurable("no switch port in the GPU/HCA paths showed ACS control")
    return roll_up("TOP-04", facts.node, findings, expected=expected,
                   healthy="ACS off on every switch port in GPU/HCA paths")


@check("TOP-05", "IOMMU off or in passthrough for GPU/HCA DMA", sources=("kernel",))
def iommu_mode(facts: Facts, topology: Topology) -> Verdict:
    want = topology.host.iommu
    if want == "any":
        return roll_up("TOP-05", facts.node, [ok("node", "any IOMMU mode allowed", "any")], expected="IOMMU any")
    groups = facts.kernel().get("iommu_group_types")
    if not isinstance(groups, dict):
        raise Unmeasurable("/sys/kernel/iommu_groups was not read")
    translated = {kind: n for kind, n in groups.items() if kind.startswith("DMA")}
    unreadable = {kind: n for kind, n in groups.items() if kind != "identity" and kind not in translated}
    if translated:
        text = ", ".join(f"{n} groups {kind}" for kind, n in sorted(translated.items()))
        finding = bad("node", f"IOMMU translating: {text}", "passthrough (identity)")
    elif unreadable:
        text = ", ".join(f"{n} groups {kind!r}" for kind, n in sorted(unreadable.items()))
        finding = unknown("node", f"IOMMU group type unreadable: {text}", "passthrough (identity)")
    elif not groups:
        finding = ok("node", "IOMMU off (no groups)", "off or passthrough")
    else:
        finding = ok("node", "IOMMU passthrough (identity)", "passthrough")
    return roll_up("TOP-05", facts.node, [finding], expected=f"IOMMU {want}")


@check("TOP-08", "Automatic NUMA balancing off", sources=("kernel",), references=("numa_balancing",))
def numa_balancing(facts: Facts, topology: Topology) -> Verdict:
    ref = reference(topology, "numa_balancing")
    raw = facts.kernel().get("numa_balancing")
    if raw is None:
        raise Unmeasurable("/proc/sys/kernel/numa_balancing unreadable")
    value = measured_count(raw, "node", "kernel.numa_balancing", NUMA_BALANCING_MODE)
    finding = judge("node", ref.admits(value), f"kernel.numa_balancing={value}", "kernel.numa_balancing=0")
    return roll_up("TOP-08", facts.node, [finding], expected="kernel.numa_balancing=0")
