"""Draft a topology from a known-good node's facts (the "golden manifest").

An operator runs the collector on a node they trust, then reviews the YAML this
writes before using it to judge the rest of the fleet. Layout (bus ids, NUMA,
GPU/HCA pairing, link layers) and settings come from the node; thresholds are
taken from a base topology and adjusted to what the node measured, each with a
source that says so.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from burnin.checks.host import pcie_relation
from burnin.checks.inventory import FABRIC_STATE_COMPLETED
from burnin.errors import UsageError
from burnin.facts import Facts, HcaFacts
from burnin.text import printable
from burnin.topology.model import Topology


def _require(facts: Facts) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
    from burnin.evaluate.verdict import Unmeasurable

    try:
        return facts.nvml(), facts.pci_devices(), facts.hcas(), facts.numa()
    except Unmeasurable as exc:
        raise UsageError(f"{facts.node}: cannot draft a topology: {exc.reason}") from None


def _firmware(facts: Facts, gpus: list[dict[str, Any]], source: str) -> dict[str, Any] | None:
    """The golden node's VBIOS and InfoROM image (INV-02), when it reports them; its GPUs must agree."""
    found: dict[str, Any] = {"source": source}
    for key, label, read in (("vbios", "VBIOS", [g.get("vbios") for g in gpus]),
                             ("inforom_image", "InfoROM", [(g.get("inforom") or {}).get("image") for g in gpus])):
        versions = {printable(v) if isinstance(v, str) and v.strip() else "not reported" for v in read}
        if len(versions) > 1:
            raise UsageError(f"{facts.node}: its GPUs differ in {label} version ({', '.join(sorted(versions))}); "
                             "a golden node must run one firmware")
        if versions != {"not reported"}:
            found[key] = read[0]
    return found if len(found) > 1 else None


def _agreed(facts: Facts, label: str, values: list[Any], role: str = "compute") -> str | None:
    """The one value the golden node's ``role`` HCAs report; None when none does; UsageError when they differ."""
    seen = {printable(v.strip()) if isinstance(v, str) and v.strip() else "not reported" for v in values}
    if len(seen) > 1:
        raise UsageError(f"{facts.node}: its {role} HCAs differ in {label} ({', '.join(sorted(seen))}); "
                         "a golden node must run one")
    return None if seen in (set(), {"not reported"}) else seen.pop()


def _hca_firmware(facts: Facts, hcas: dict[str, Any], names: list[str], source: str,
                  role: str = "compute") -> dict[str, Any] | None:
    """The firmware and PSID these HCAs of the golden node agree on (a topology's ``hca_firmware`` for the compute
    HCAs, INV-09; ``storage_hca_firmware`` for the storage ones, INV-11), where it reports them."""
    from burnin.topology.model import check_firmware, check_psid

    firmware: dict[str, Any] = {"source": source}
    for key, label, field, valid in (("version", "firmware", "fw_ver", check_firmware),
                                     ("psid", "PSID", "board_id", check_psid)):
        value = _agreed(facts, label, [hcas[name].get(field) for name in names], role)
        try:
            valid(value)
        except ValueError:
            continue  # a form the topology cannot hold: left out, consistency is then judged alone
        if value is not None:
            firmware[key] = value
    return firmware if len(firmware) > 1 else None


def _hca_expectations(facts: Facts, hcas: dict[str, Any], compute: list[str],
                      source: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The golden node's compute-HCA firmware and PSID (INV-09) and partition keys (IB-09), where it reports them."""
    from burnin.checks.hca import port_pkeys
    from burnin.evaluate.verdict import Unmeasurable
    from burnin.topology.model import check_pkeys

    firmware = _hca_firmware(facts, hcas, compute, source)
    tables = ((facts.section("ib_pkeys") or {}).get("hcas") or {})
    try:
        keys = {name: port_pkeys((tables.get(name) or {}).get("1")) for name in compute}
    except Unmeasurable:
        keys = {}
    pkeys = _agreed(facts, "partition keys", [",".join(f"0x{k:04x}" for k in sorted(v, reverse=True)) or None
                                              for v in keys.values()])
    partitions = {"pkeys": pkeys.split(","), "source": source} if pkeys else None
    try:
        check_pkeys(tuple(pkeys.split(",")) if pkeys else None)
    except ValueError:
        partitions = None  # e.g. one partition as full and as limited member: left for the operator to write
    return firmware, partitions


def _software(facts: Facts, source: str) -> dict[str, Any] | None:
    """The golden node's software stack (INV-10): each component it reports one version of, in a form the
    topology holds; a component it cannot report, or reports twice over (two NCCL installs), is left out."""
    from burnin.checks.software import COMPONENTS
    from burnin.evaluate.verdict import Unmeasurable
    from burnin.topology.model import SoftwareManifest

    section = facts.section("software")
    if not isinstance(section, dict):
        return None
    found: dict[str, Any] = {"source": source}
    for component in COMPONENTS:
        try:
            versions = {version for _, version in component.read(section)}
        except Unmeasurable:
            continue
        if len(versions) != 1:
            continue
        value = versions.pop()
        try:
            SoftwareManifest(source=source, **{component.key: value})
        except ValueError:
            continue  # a form the topology cannot hold: left for the operator to write
        found[component.key] = value
    return found if len(found) > 1 else None


def draft_topology(facts: Facts, base: Topology, name: str) -> dict[str, Any]:
    """A topology document (plain data, ready for YAML) describing the node in ``facts``."""
    nvml, pci, hcas, numa = _require(facts)
    lost = [f"gpu{g.get('index')}" for g in nvml.get("gpus", []) if g.get("lost") or not g.get("bus_id")]
    if lost:
        raise UsageError(f"{facts.node}: {', '.join(lost)} did not answer NVML; a golden node must be healthy")
    gpus = list(nvml.get("gpus", []))
    if not gpus:
        raise UsageError(f"{facts.node}: NVML reported no usable GPU; a golden node must be healthy")
    source = f"measured on golden node {facts.node} ({facts.section('collected_at') or 'unknown time'})"

    hca_rows: list[dict[str, Any]] = []
    for hca_name, data in sorted(hcas.items()):
        bus = data.get("pci")
        port = (data.get("ports") or {}).get("1") or {}
        layer = port.get("link_layer")
        if not bus or layer not in ("InfiniBand", "Ethernet") or bus not in pci:
            continue
        hca_rows.append({"name": hca_name, "bus_id": bus, "numa_node": max(0, pci[bus].get("numa_node") or 0),
                         "link_layer": layer, "role": "compute" if layer == "InfiniBand" else "storage"})
    compute = [h for h in hca_rows if h["role"] == "compute"]

    devices = []
    for gpu in gpus:
        bus = gpu["bus_id"]
        paired = next((h["name"] for h in compute if bus in pci and pcie_relation(pci, bus, h["bus_id"]) == "PIX"),
                      None)
        devices.append({"index": gpu["index"], "bus_id": bus,
                        "numa_node": max(0, (pci.get(bus) or {}).get("numa_node") or 0), "hca": paired})

    first = gpus[0]
    # Links the golden node has up (a GPU without NVLink peers reports its links inactive).
    links = sum(1 for link in first.get("nvlink") or [] if link.get("active"))
    nodes = numa.get("nodes") or {}
    references = {key: asdict(ref) for key, ref in base.references.items()}

    def measured(key: str, value: float, *, exact: bool = False) -> None:
        ref = references.get(key, {"unit": ""})
        references[key] = {"value": value, "lower": value if key != "gpu_memory_mib" else round(value * 0.99),
                           "upper": value if exact else ref.get("upper"), "unit": ref.get("unit", ""),
                           "source": source}

    if first.get("memory_total_mib"):
        measured("gpu_memory_mib", first["memory_total_mib"])
    default_mw = (first.get("power") or {}).get("default_limit_mw")
    if default_mw:
        measured("power_limit_w", default_mw / 1000, exact=True)
    pcie = first.get("pcie") or {}
    if pcie.get("max_gen"):
        measured("gpu_pcie_gen", pcie["max_gen"])
    if pcie.get("max_width"):
        measured("gpu_pcie_width", pcie["max_width"], exact=True)
    measured("nvlink_links_active", links, exact=True)
    ports = [HcaFacts(h["name"], hcas[h["name"]]).port() for h in compute]
    rates = [rate for port in ports if port is not None and (rate := port.rate_gbps) is not None]
    if rates:
        measured("ib_rate_gbps", min(rates))
    groups = (facts.section("kernel") or {}).get("iommu_group_types") or {}
    hca_firmware, ib_partitions = _hca_expectations(facts, hcas, [h["name"] for h in compute], source)
    return {
        "name": name,
        "description": f"drafted from {facts.node}: {len(gpus)} x {first.get('name')}; review before use",
        "gpus": {
            "count": len(gpus), "model": first.get("name"),
            "nvlink": {"links_per_gpu": links, "pair_link": f"NV{links}"} if links else None,
            "devices": devices,
            "firmware": _firmware(facts, gpus, source),
        },
        "hcas": hca_rows,
        "hca_firmware": hca_firmware,
        "storage_hca_firmware": _hca_firmware(facts, hcas, [h["name"] for h in hca_rows if h["role"] == "storage"],
                                              source, "storage"),
        "ib_partitions": ib_partitions,
        "software": _software(facts, source),
        "numa": {"nodes": len(nodes), "cpulists": {int(k): v.get("cpulist") for k, v in sorted(nodes.items())}},
        "host": {
            "driver_version": nvml.get("driver_version"),
            "fabric_manager": any((g.get("fabric") or {}).get("state") == FABRIC_STATE_COMPLETED for g in gpus),
            "peermem": bool(((facts.section("kernel") or {}).get("modules") or {}).get("nvidia_peermem")),
            "persistence": bool(first.get("persistence_mode")),
            "mig": bool((first.get("mig_mode") or {}).get("current")),
            "ecc": bool((first.get("ecc_mode") or {}).get("current")),
            "acs_disabled": base.host.acs_disabled,
            "iommu": "passthrough" if not any(k.startswith("DMA") for k in groups) else "any",
        },
        "references": references,
    }
