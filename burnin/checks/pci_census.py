"""TOP-10 PCI device census: the devices the topology expects are on the bus, and no more of them.

Read from the collector's ``pci-census`` source (vendor, device and class of
every PCI function in ``/sys/bus/pci/devices``). Kinds and how they are told apart:

- GPUs: vendor 10de, class 0300/0302, at the topology's GPU addresses (none elsewhere);
- NVSwitches: vendor 10de, class 0680 (``Bridge: NVIDIA Corporation Device 22a3`` on H100),
  counted against ``nvswitch_count``;
- compute HCAs and storage NICs (BlueField): a vendor 15b3 function at each address the
  topology lists (other Mellanox functions, second ports, VFs and DPU management
  functions, are not judged);
- NVMe: class 0108, any vendor, counted against ``nvme_count``.

Owners: a GPU off the bus fails INV-01 (NVML's count) and TOP-10 (the bus) on purpose:
the pair tells a GPU that left the bus (both) from one on the bus that the driver did
not take (INV-01 alone). An absent HCA fails IB-01 and TOP-10 the same way. NVSwitches,
NVMe drives and BlueFields are counted by TOP-10 alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from burnin.checks.base import check, judge, unknown
from burnin.checks.references import reference
from burnin.evaluate.verdict import Finding, Status, Unmeasurable, Verdict, roll_up
from burnin.facts import Facts
from burnin.text import printable
from burnin.topology.model import Reference, Topology

NVIDIA = "0x10de"
MELLANOX = "0x15b3"
GPU_CLASSES = ("0x0300", "0x0302")  # VGA-compatible and 3D controllers
NVSWITCH_CLASS = "0x0680"  # bridge, other
NVME_CLASS = "0x0108"  # mass storage, non-volatile memory
_HEX_ID = re.compile(r"^0x[0-9a-f]{4}$")
_HEX_CLASS = re.compile(r"^0x[0-9a-f]{6}$")
_BDF = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
SHOWN = 4


@dataclass(frozen=True, slots=True)
class PciFunction:
    address: str
    vendor: str
    device: str
    device_class: str

    @property
    def is_gpu(self) -> bool:
        return self.vendor == NVIDIA and self.device_class.startswith(GPU_CLASSES)

    @property
    def is_nvswitch(self) -> bool:
        return self.vendor == NVIDIA and self.device_class.startswith(NVSWITCH_CLASS)

    @property
    def is_nvme(self) -> bool:
        return self.device_class.startswith(NVME_CLASS)

    def describe(self) -> str:
        return f"{self.vendor[2:]}:{self.device[2:]} class {self.device_class[2:6]}"


def read_census(raw: object) -> tuple[dict[str, PciFunction], list[str]]:
    """The functions the collector listed, and the addresses whose vendor, device or class were unreadable."""
    functions = raw.get("functions") if isinstance(raw, dict) else None
    if not isinstance(functions, dict):
        raise Unmeasurable("PCI function list unreadable")
    if not functions:
        raise Unmeasurable("/sys/bus/pci/devices lists no PCI function")
    found: dict[str, PciFunction] = {}
    unreadable: list[str] = []
    for address, ids in functions.items():
        if not isinstance(address, str) or not _BDF.match(address):
            raise Unmeasurable(f"PCI address {printable(repr(address), limit=40)} unreadable")
        values = ids if isinstance(ids, list) and len(ids) == 3 else [None, None, None]
        vendor, device, device_class = (v.strip().lower() if isinstance(v, str) else "" for v in values)
        if _HEX_ID.match(vendor) and _HEX_ID.match(device) and _HEX_CLASS.match(device_class):
            found[address] = PciFunction(address, vendor, device, device_class)
        else:
            unreadable.append(address)
    return found, sorted(unreadable)


def _listed(items: list[str]) -> str:
    shown = ", ".join(items[:SHOWN])
    return shown + (f", +{len(items) - SHOWN} more" if len(items) > SHOWN else "")


def _at_addresses(kind: str, expected: list[tuple[str, str]], functions: dict[str, PciFunction],
                  unreadable: list[str], vendor: str, wrong: str) -> Finding:
    """Devices the topology places at addresses: each there, with the right vendor (``wrong`` says what else)."""
    want = f"{len(expected)} at the topology's addresses"
    missing: list[str] = []
    unmeasured: list[str] = []
    for label, address in expected:
        function = functions.get(address)
        if function is None:
            (unmeasured if address in unreadable else missing).append(f"{label} {address}")
        elif function.vendor != vendor:
            missing.append(f"{label} {address} is {function.describe()}, {wrong}")
    present = len(expected) - len(missing) - len(unmeasured)
    if missing:
        return judge(kind, False, f"{present}/{len(expected)} on the bus (missing: {_listed(missing)})", want)
    if unmeasured:
        return unknown(kind, f"vendor/class unreadable at {_listed(unmeasured)}", want)
    return judge(kind, True, f"{present}/{len(expected)}", want)


def _gpus(topology: Topology, functions: dict[str, PciFunction], unreadable: list[str]) -> Finding:
    expected = [(f"gpu{d.index}", d.bus_id) for d in topology.gpus.devices]
    finding = _at_addresses("GPUs", expected, functions, unreadable, NVIDIA, "not an NVIDIA GPU")
    places = {address for _, address in expected}
    extra = sorted(a for a, f in functions.items() if f.is_gpu and a not in places)
    if not extra:
        return finding
    measured = finding.measured if finding.status is Status.FAIL else f"{len(expected)}/{len(expected)}"
    return judge("GPUs", False, f"{measured}; unexpected GPUs at {_listed(extra)}", finding.expected)


def count_text(ref: Reference) -> str:
    """A count reference without its unit: ``4``, ``>= 8``, ``8..10``."""
    return replace(ref, unit="").describe()


def _counted(kind: str, key: str, topology: Topology, matches: list[str], unreadable: list[str]) -> Finding:
    ref = reference(topology, key)
    count = len(matches)
    if ref.admits(count):
        return judge(kind, True, str(count), count_text(ref))
    if unreadable:
        return unknown(kind, f"{count} found; vendor/class unreadable at {_listed(unreadable)}", count_text(ref))
    return judge(kind, False, f"{count} on the bus", count_text(ref))


@check("TOP-10", "PCI device census: GPUs, NVSwitches, HCAs, storage NICs and NVMe on the bus",
       sources=("pci-census",), references=("nvswitch_count", "nvme_count"))
def pci_census(facts: Facts, topology: Topology) -> Verdict:
    functions, unreadable = read_census(facts.pci_census())
    findings = [_gpus(topology, functions, unreadable)]
    if unreadable:  # a function of unknown kind may be a device the census counts
        findings.append(unknown("node", f"vendor/class unreadable at {_listed(unreadable)}"))
    findings.append(_counted("NVSwitches", "nvswitch_count", topology,
                             sorted(a for a, f in functions.items() if f.is_nvswitch), unreadable))
    compute = [(h.name, h.bus_id) for h in topology.compute_hcas]
    if compute:
        findings.append(_at_addresses("compute HCAs", compute, functions, unreadable, MELLANOX,
                                      "not a Mellanox function"))
    storage = [(h.name, h.bus_id) for h in topology.storage_hcas]
    if storage:
        findings.append(_at_addresses("storage NICs", storage, functions, unreadable, MELLANOX,
                                      "not a Mellanox function"))
    findings.append(_counted("NVMe", "nvme_count", topology,
                             sorted(a for a, f in functions.items() if f.is_nvme), unreadable))
    expected = (f"{topology.gpus.count} GPUs, {count_text(reference(topology, 'nvswitch_count'))} NVSwitches, "
                f"{len(compute)} compute HCAs, {len(storage)} storage NICs, "
                f"{count_text(reference(topology, 'nvme_count'))} NVMe")
    healthy = ", ".join(f"{f.measured} {f.subject}" for f in findings)
    return roll_up("TOP-10", facts.node, findings, expected=expected, healthy=healthy)


__all__ = ["PciFunction", "count_text", "pci_census", "read_census"]
