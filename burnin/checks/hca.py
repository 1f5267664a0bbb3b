"""HCA checks: inventory and firmware (INV-09), PCIe link (IB-06), MTU and partition keys (IB-09).

Where the topology declares no expected value (``hca_firmware``, ``ib_partitions``),
the check still measures whether the node's HCAs agree with each other: a node
whose eight compute HCAs run two firmware versions fails on consistency alone,
and the verdict says that no expected value was declared. That is a measurement,
so it is pass or fail, never incomplete.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from burnin.checks.base import (
    PCIE_WIDTH,
    PhysicalRange,
    bad,
    check,
    judge,
    measured_count,
    measured_number,
    ok,
    per_hca,
    unknown,
)
from burnin.checks.references import reference
from burnin.evaluate.verdict import Finding, Unmeasurable, Verdict, roll_up
from burnin.facts import Facts, HcaFacts
from burnin.parsers.sysfs_values import link_speed_gts, pkey, pkey_text
from burnin.topology.model import Hca, Topology

PCIE_SPEED_GTS = PhysicalRange(2.5, 256, "GT/s")  # PCIe 1.0 .. well past Gen7
IB_MTU_BYTES = PhysicalRange(256, 4096, "bytes")  # the verbs MTUs: 256 .. 4096
FULL_MEMBER = 0x8000  # a partition key's membership bit (IBTA): set = full member, clear = limited


def _quote(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _group_names(names: list[str]) -> str:
    return ", ".join(names) if len(names) <= 3 else f"{', '.join(names[:2])} and {len(names) - 2} more"


def disagreement(values: Mapping[str, str]) -> str | None:
    """How ``name -> value`` splits when not every name has the same value; None when they agree.

    The largest group is named last as "the other N" (when it is the only largest).
    """
    groups: dict[str, list[str]] = {}
    for name, value in values.items():
        groups.setdefault(value, []).append(name)
    if len(groups) <= 1:
        return None
    ordered = sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))
    (top, top_names), rest = ordered[0], ordered[1:]
    if len(top_names) > len(rest[0][1]):
        parts = [f"{value} on {_group_names(names)}" for value, names in reversed(rest)]
        return "; ".join(parts) + f" vs {top} on the other {len(top_names)}"
    return "; ".join(f"{value} on {_group_names(names)}" for value, names in ordered)


# ------------------------------------------------------------------ INV-09


def _identity(data: HcaFacts, key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value.strip():
        raise Unmeasurable(f"{key} unreadable ({_quote(value)})")
    return value.strip()


@check("INV-09", "HCA inventory and firmware: each HCA at its bus id, one firmware and PSID per role",
       sources=("infiniband",))
def hca_firmware(facts: Facts, topology: Topology) -> Verdict:
    golden = topology.hca_firmware
    want_fw = golden.version if golden else None
    want_psid = golden.psid if golden else None
    undeclared = [what for what, value in (("firmware", want_fw), ("PSID", want_psid)) if value is None]
    compute_expected = (f"firmware {want_fw}" if want_fw else "one firmware") + ", " + (
        f"PSID {want_psid}" if want_psid else "one PSID")
    expected = f"compute HCAs on {compute_expected}; storage HCAs on one firmware and PSID; each at its bus id"
    note = f"; topology {topology.name} declares no compute {' or '.join(undeclared)}: consistency only" \
        if undeclared else ""
    expected += note
    seen: dict[str, dict[str, tuple[str, str]]] = {"compute": {}, "storage": {}}

    def judge_hca(hca: Hca, data: HcaFacts) -> Finding:
        pci = data.get("pci")
        if not isinstance(pci, str) or not pci:
            raise Unmeasurable(f"its PCI function is unknown (device link unreadable: {_quote(pci)})")
        if pci != hca.bus_id:
            return bad(hca.name, f"at {pci}, not at its bus id {hca.bus_id}", f"at {hca.bus_id}")
        fw, psid = _identity(data, "fw_ver"), _identity(data, "board_id")
        seen[hca.role][hca.name] = (fw, psid)
        wrong = []
        if hca.role == "compute" and want_fw is not None and fw != want_fw:
            wrong.append(f"firmware {fw}")
        if hca.role == "compute" and want_psid is not None and psid != want_psid:
            wrong.append(f"PSID {psid}")
        if wrong:
            return bad(hca.name, ", ".join(wrong), compute_expected)
        return ok(hca.name, f"firmware {fw}, PSID {psid}", compute_expected if hca.role == "compute" else "")

    findings = per_hca(facts, topology.hcas, judge_hca)
    for role, declared in (("compute", (want_fw, want_psid)), ("storage", (None, None))):
        for position, what in enumerate(("firmware", "PSID")):
            if declared[position] is not None:
                continue
            split = disagreement({name: values[position] for name, values in seen[role].items()})
            if split is not None:
                findings.append(bad(role, f"{what} differs: {split}", f"one {what} on every {role} HCA"))
    healthy = "; ".join(
        f"{len(names)} {role} HCAs on firmware {'/'.join(sorted({v[0] for v in names.values()}))}, "
        f"PSID {'/'.join(sorted({v[1] for v in names.values()}))}"
        for role, names in seen.items() if names) + note
    return roll_up("INV-09", facts.node, findings, expected=expected, healthy=healthy)


# ------------------------------------------------------------------ IB-06


def _speed(device: Mapping[str, Any], name: str, subject: str) -> float:
    text = device.get(name)
    speed = link_speed_gts(text if isinstance(text, str) else None)
    if speed is None:
        raise Unmeasurable(f"{name} unreadable: {_quote(text)}")
    return measured_number(speed, subject, name, PCIE_SPEED_GTS)


def _capable(device: Mapping[str, Any], subject: str) -> str:
    """`` (capable of 32 GT/s x16)`` from max_link_speed/width; empty when unreadable (not judged)."""
    try:
        speed = _speed(device, "max_link_speed", subject)
        width = measured_count(device.get("max_link_width"), subject, "max_link_width", PCIE_WIDTH)
    except Unmeasurable:
        return ""
    return f" (capable of {speed:g} GT/s x{width})"


@check("IB-06", "Compute HCA PCIe link speed and width", sources=("pci",),
       references=("hca_pcie_speed_gts", "hca_pcie_width"))
def hca_pcie_link(facts: Facts, topology: Topology) -> Verdict:
    speed_ref = reference(topology, "hca_pcie_speed_gts")
    width_ref = reference(topology, "hca_pcie_width")
    expected = f"{speed_ref.describe()}, {width_ref.describe()}"
    devices = facts.pci_devices()
    findings: list[Finding] = []
    for hca in topology.compute_hcas:
        device = devices.get(hca.bus_id)
        if not isinstance(device, dict):
            findings.append(unknown(hca.name, f"{hca.bus_id} absent from PCI", expected))
            continue
        try:
            # A ConnectX keeps its trained speed when idle (real HGX H100 lspci: every CX-7 at 32GT/s),
            # so the current speed is judged, not the capability (unlike a GPU's, GPU-08).
            speed = _speed(device, "current_link_speed", hca.name)
            width = measured_count(device.get("current_link_width"), hca.name, "current_link_width", PCIE_WIDTH)
        except Unmeasurable as exc:
            findings.append(unknown(hca.name, exc.reason.removeprefix(hca.name + " "), expected))
            continue
        text = f"{speed:g} GT/s x{width}"
        healthy = speed_ref.admits(speed) and width_ref.admits(width)
        findings.append(judge(hca.name, healthy, text if healthy else text + _capable(device, hca.name), expected))
    return roll_up("IB-06", facts.node, findings, expected=expected)


# ------------------------------------------------------------------ IB-09


def pkey_list(keys: frozenset[int]) -> str:
    """``0xffff``, ``0x7fff (limited)``: keys in order, limited members marked."""
    return ", ".join(pkey_text(k) + ("" if k & FULL_MEMBER else " (limited)") for k in sorted(keys, reverse=True))


def port_pkeys(table: object) -> frozenset[int]:
    """The non-zero keys of one port's table as the collector read it; Unmeasurable when it could not be read."""
    if not isinstance(table, dict):
        raise Unmeasurable("ports/1/pkeys not present")
    size, entries, unreadable = table.get("size"), table.get("pkeys"), table.get("unreadable")
    if not isinstance(size, int) or isinstance(size, bool) or size <= 0 or not isinstance(entries, dict):
        raise Unmeasurable(f"pkey table unreadable (size {_quote(size)})")
    if unreadable:
        raise Unmeasurable(f"pkeys/{', pkeys/'.join(map(str, list(unreadable)[:3]))} unreadable")
    keys: set[int] = set()
    for index, text in entries.items():
        value = pkey(text if isinstance(text, str) else None)
        if value is None:
            raise Unmeasurable(f"pkeys/{index} {_quote(text)} is not a partition key")
        if value & 0x7FFF:
            keys.add(value)
    return frozenset(keys)


def _devinfo_ports(facts: Facts) -> Callable[[str], Any]:
    """hca name -> its port 1 in ``ibv_devinfo``'s output (Unmeasurable when it could not be read)."""
    from burnin.errors import ParseError
    from burnin.parsers.ibv_devinfo import parse_ibv_devinfo

    try:
        report = parse_ibv_devinfo(facts.command("ibv-devinfo"))
    except ParseError as exc:
        raise Unmeasurable(f"ibv_devinfo output unreadable: {exc}") from None

    def port_of(name: str) -> Any:
        device = report.device(name)
        if device is None:
            raise Unmeasurable("not in ibv_devinfo's output")
        port = next((p for p in device.ports if p.port == 1), None)
        if port is None:
            raise Unmeasurable("ibv_devinfo shows no port 1")
        return port

    return port_of


@check("IB-09", "Compute port MTU and partition keys", sources=("infiniband", "ib-pkeys", "ibv-devinfo"),
       references=("ib_mtu_bytes",), fast=False)
def mtu_and_partitions(facts: Facts, topology: Topology) -> Verdict:
    mtu_ref = reference(topology, "ib_mtu_bytes")
    golden = topology.ib_partitions
    want = frozenset(int(k, 16) for k in golden.pkeys) if golden else None
    expected = f"active_mtu {mtu_ref.describe()}, " + (
        f"pkeys {pkey_list(want)}" if want else
        f"the same pkeys on every compute port; topology {topology.name} declares no ib_partitions: consistency only")
    port_of = _devinfo_ports(facts)
    tables = facts.require("ib-pkeys", "ib_pkeys").get("hcas")
    if not isinstance(tables, dict):
        raise Unmeasurable(f"pkey tables unreadable: {_quote(tables)}")
    seen: dict[str, str] = {}

    def judge_hca(hca: Hca, data: HcaFacts) -> Finding:
        port1 = data.port()
        state = port1.get("state") if port1 is not None else None
        if not isinstance(state, str) or not state.endswith("ACTIVE"):
            raise Unmeasurable(f"port {state}: the subnet manager sets MTU and partitions on an ACTIVE port "
                               "(see IB-01)")
        port = port_of(hca.name)
        if port.active_mtu is None:
            raise Unmeasurable("ibv_devinfo active_mtu unreadable")
        mtu = measured_count(port.active_mtu, hca.name, "active_mtu", IB_MTU_BYTES)
        hca_tables = tables.get(hca.name)
        keys = port_pkeys(hca_tables.get("1") if isinstance(hca_tables, dict) else None)
        seen[hca.name] = pkey_list(keys)
        problems = [] if mtu_ref.admits(mtu) else [f"active_mtu {mtu}"]
        if not keys:
            problems.append("no partition key (pkey table all 0x0000)")
        elif want is not None and keys != want:
            problems.append(f"pkeys {pkey_list(keys)}")
        if problems:
            return bad(hca.name, "; ".join(problems), expected)
        return ok(hca.name, f"active_mtu {mtu}, pkeys {pkey_list(keys)}", expected)

    findings = per_hca(facts, topology.compute_hcas, judge_hca)
    healthy = ""
    if want is None:
        split = disagreement({name: keys for name, keys in seen.items() if keys})
        if split is not None:
            findings.append(bad("compute", f"pkeys differ: {split}", "the same pkeys on every compute port"))
        healthy = "; ".join(sorted({f.measured for f in findings})) + \
            f"; topology {topology.name} declares no ib_partitions: consistency only"
    return roll_up("IB-09", facts.node, findings, expected=expected, healthy=healthy)
