"""INV-11 fleet consistency: each node's inventory against the mode of the run's nodes of its type.

A node can pass every per-node check and still differ from its peers: all
eight GPUs on one VBIOS that the topology does not name, a node left on the
old driver after the fleet moved on. The run sees every node, so it compares.

Two steps, split at the seam every measurement phase uses: the node suite's
phase (:mod:`burnin.phases.fleet`) reads each reachable node's inventory
(:func:`read_inventory`) and records, into every node's facts, how many nodes
of its type run each value (:func:`fleet_sections`); the check reads its own
node's inventory again and judges it against those counts.

Judgement, per field, over the nodes of the type that reported it:

- every node agrees: pass;
- a value on a strict majority of at least :data:`MIN_FLEET` nodes is the
  fleet's mode: a node on another value fails, naming the field, its value and
  the mode's (``driver 550.54.15 (fleet: 550.90.07 on 7 of 8 nodes)``), unless
  its value is the one the topology names as golden (the driver, VBIOS,
  InfoROM, compute HCA firmware and PSID, the software manifest's components):
  then the majority is what is wrong (their own INV-02, -03, -09 or -10 fails
  them), and the node on the golden value passes;
- a field no per-node check holds to its golden value (the storage HCAs'
  firmware and PSID, ``storage_hca_firmware``) is judged against it here, before
  the fleet: a node off it fails, however many nodes run its value (a drifted
  majority fails, the node left on the golden value passes);
- two nodes that differ, or no strict majority: nobody can say which node is
  wrong, so each node's field is incomplete with the split;
- a field the node did not report is incomplete with the collector's cause.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from burnin.checks.base import (
    PhysicalRange,
    bad,
    check,
    gpu_field,
    iter_gpus,
    measured_count,
    ok,
    unknown,
    unlisted_gpus,
)
from burnin.evaluate.verdict import Finding, Status, Unmeasurable, Verdict, roll_up
from burnin.facts import Facts
from burnin.nodes import fold
from burnin.text import printable
from burnin.topology.model import Topology

SECTION = "fleet"
"""The facts key the node suite's phase records the fleet's counts under."""
MIN_FLEET = 3
"""Fewer nodes than this that differ have no mode: two nodes that disagree cannot say which one is wrong."""
NAMED_NODES = 3
"""A value run by at most this many nodes keeps their names in the fleet section (for the reason)."""
VALUE_SHOWN = 48
"""Characters of a node-reported value shown in a reason."""
CUDA_VERSION = PhysicalRange(1000, 99_999)
"""``nvmlSystemGetCudaDriverVersion``: 1000 x major + 10 x minor (CUDA 1.0 .. 99.9)."""


@dataclass(frozen=True, slots=True)
class Reading:
    """One inventory field of one node: its value, or why there is none."""

    value: str | None
    why: str = ""


@dataclass(frozen=True, slots=True)
class InventoryField:
    key: str
    """Its name in the fleet section (stable: it is written into the facts)."""
    label: str
    """How a reason names it."""
    read: Callable[[Facts, Topology], str | None]
    """The node's value; None when the node type has nothing of the kind; Unmeasurable when it was not read."""
    golden: Callable[[Topology], frozenset[str]] = lambda topology: frozenset()
    """The values the topology names as golden for the field, written as ``read`` writes them (none: the mode
    alone judges)."""
    golden_here: bool = False
    """No per-node check holds the field to its golden value: INV-11 does, whatever most nodes run."""


def _text(value: object, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise Unmeasurable(f"{what} {'not reported' if value is None else printable(repr(value), limit=40)}")
    return value.strip()


def _driver(facts: Facts, topology: Topology) -> str:
    return _text(facts.nvml().get("driver_version"), "NVML driver version")


def _cuda(facts: Facts, topology: Topology) -> str:
    nvml = facts.nvml()
    value = nvml.get("cuda_driver_version")
    if value is None:
        raise Unmeasurable(f"CUDA driver version: {nvml.get('cuda_driver_version_error') or 'not reported'}")
    number = measured_count(value, "NVML", "CUDA driver version", CUDA_VERSION)
    return f"{number // 1000}.{number % 1000 // 10}"


def _module(facts: Facts, topology: Topology) -> str:
    return _text(facts.kernel().get("nvidia_module_version"), "/sys/module/nvidia/version")


def _per_gpu(label: str, *path: str) -> Callable[[Facts, Topology], str | None]:
    """The values the node's GPUs report for ``path``, joined; every GPU of the topology must report one."""

    def read(facts: Facts, topology: Topology) -> str | None:
        values: set[str] = set()
        for subject, gpu, why in iter_gpus(facts, topology):
            if gpu is None:
                raise Unmeasurable(f"{subject} {why}")
            try:
                values.add(_text(gpu_field(gpu, *path), label))
            except Unmeasurable as exc:
                raise Unmeasurable(f"{subject} {exc.reason}") from None
        unlisted = unlisted_gpus(facts, topology)
        if unlisted:
            raise Unmeasurable(f"{unlisted[0].subject} {unlisted[0].note}")
        if not values:
            raise Unmeasurable("NVML listed no GPU")
        return " + ".join(sorted(values))

    return read


def _per_hca(role: str, key: str, label: str) -> Callable[[Facts, Topology], str | None]:
    """The values the node type's ``role`` HCAs show in sysfs ``key``, joined; None when the type has none."""

    def read(facts: Facts, topology: Topology) -> str | None:
        hcas = [hca for hca in topology.hcas if hca.role == role]
        if not hcas:
            return None
        present = facts.hcas()
        values: set[str] = set()
        for hca in hcas:
            data = present.get(hca.name)
            if not isinstance(data, dict):
                raise Unmeasurable(f"{hca.name} absent: its {label} is not known")
            values.add(_text(data.get(key), f"{hca.name} {key}"))
        return " + ".join(sorted(values))

    return read


NOT_INSTALLED = "not installed"
"""The value of a software component the node does not have (its tool not on PATH, no libnccl.so found): a node
without it differs from a fleet with it, and a fleet without it agrees."""


_SOFTWARE_RECORD = {"ofed": "ofed_info", "dcgm": "dcgmi"}
"""Where the collector's software source keeps a component's tool record, where it is not under its own key."""


def _software(key: str) -> Callable[[Facts, Topology], str | None]:
    """A component of the host software stack as INV-10 reads it (burnin.checks.software), its readings joined."""

    def read(facts: Facts, topology: Topology) -> str | None:
        from burnin.checks.software import COMPONENTS

        component = next(c for c in COMPONENTS if c.key == key)
        section = facts._require("software")
        if not isinstance(section, dict):
            raise Unmeasurable(f"software facts unreadable: {printable(repr(section), limit=40)}")
        record = section.get(_SOFTWARE_RECORD.get(key, key))
        if isinstance(record, dict) and (str(record.get("error") or "").endswith("command not found")
                                         or (key == "nccl" and record.get("libraries") == [])):
            return NOT_INSTALLED
        return " + ".join(version if label == component.label else f"{label.removeprefix(component.label + ' ')} "
                          f"{version}" for label, version in component.read(section))

    return read


def _named(value: str | None) -> frozenset[str]:
    return frozenset() if value is None else frozenset({value})


def _driver_golden(topology: Topology) -> frozenset[str]:
    return _named(topology.host.driver_version)


def _firmware_golden(key: str) -> Callable[[Topology], frozenset[str]]:
    def golden(topology: Topology) -> frozenset[str]:
        firmware = topology.gpus.firmware
        return frozenset() if firmware is None else _named(getattr(firmware, key))

    return golden


def _hca_golden(key: str) -> Callable[[Topology], frozenset[str]]:
    def golden(topology: Topology) -> frozenset[str]:
        firmware = topology.hca_firmware
        return frozenset() if firmware is None else _named(getattr(firmware, key))

    return golden


def _storage_hca_golden(key: str) -> Callable[[Topology], frozenset[str]]:
    def golden(topology: Topology) -> frozenset[str]:
        firmware = topology.storage_hca_firmware
        return frozenset() if firmware is None else _named(getattr(firmware, key))

    return golden


def _software_golden(key: str) -> Callable[[Topology], frozenset[str]]:
    """The manifest's version of the component; DCGM's with its host engine's too, as :func:`_software` joins it."""

    def golden(topology: Topology) -> frozenset[str]:
        version = None if topology.software is None else getattr(topology.software, key)
        if version is None:
            return frozenset()
        return frozenset({version, f"{version} + hostengine {version}"} if key == "dcgm" else {version})

    return golden


FIELDS: tuple[InventoryField, ...] = (
    InventoryField("driver", "driver", _driver, _driver_golden),
    InventoryField("cuda", "CUDA", _cuda),
    InventoryField("nvidia_module", "kernel module", _module, _driver_golden),
    InventoryField("gpu_model", "GPU model", _per_gpu("model", "name")),
    InventoryField("vbios", "VBIOS", _per_gpu("VBIOS", "vbios"), _firmware_golden("vbios")),
    InventoryField("inforom", "InfoROM", _per_gpu("InfoROM", "inforom", "image"), _firmware_golden("inforom_image")),
    InventoryField("compute_hca_firmware", "compute HCA firmware", _per_hca("compute", "fw_ver", "firmware"),
                   _hca_golden("version")),
    InventoryField("compute_hca_psid", "compute HCA PSID", _per_hca("compute", "board_id", "PSID"),
                   _hca_golden("psid")),
    InventoryField("storage_hca_firmware", "storage HCA firmware", _per_hca("storage", "fw_ver", "firmware"),
                   _storage_hca_golden("version"), golden_here=True),
    InventoryField("storage_hca_psid", "storage HCA PSID", _per_hca("storage", "board_id", "PSID"),
                   _storage_hca_golden("psid"), golden_here=True),
    InventoryField("kernel", "kernel", _software("kernel"), _software_golden("kernel")),
    InventoryField("ofed", "OFED", _software("ofed"), _software_golden("ofed")),
    InventoryField("nccl", "NCCL", _software("nccl"), _software_golden("nccl")),
    InventoryField("dcgm", "DCGM", _software("dcgm"), _software_golden("dcgm")),
)


def read_inventory(facts: Facts, topology: Topology) -> dict[str, Reading]:
    """The node's inventory, field key -> reading (fields the node type has nothing of are left out)."""
    if facts.unreachable:
        raise Unmeasurable(facts.unreachable)
    readings: dict[str, Reading] = {}
    for field in FIELDS:
        try:
            value = field.read(facts, topology)
        except Unmeasurable as exc:
            readings[field.key] = Reading(None, exc.reason)
            continue
        if value is not None:
            readings[field.key] = Reading(value)
    return readings


def fleet_sections(facts: Mapping[str, Facts], topologies: Mapping[str, Topology]) -> dict[str, dict[str, Any]]:
    """Node -> its fleet section: for each field, how many reachable nodes of its type run each value.

    ``topologies``: each node's type. Unreachable nodes get no section and count for nobody.
    """
    members: dict[str, list[tuple[str, dict[str, Reading]]]] = {}
    for node, node_facts in facts.items():
        if node_facts.unreachable:
            continue
        topology = topologies[node]
        members.setdefault(topology.name, []).append((node, read_inventory(node_facts, topology)))
    sections: dict[str, dict[str, Any]] = {}
    for type_name, group in members.items():
        on: dict[str, dict[str, list[str]]] = {}  # field -> value -> nodes
        for node, readings in group:
            for key, reading in readings.items():
                if reading.value is not None:
                    on.setdefault(key, {}).setdefault(reading.value, []).append(node)
        values = {key: {value: {"count": len(nodes), **({"nodes": fold(nodes)} if len(nodes) <= NAMED_NODES else {})}
                        for value, nodes in by_value.items()}
                  for key, by_value in on.items()}
        section = {"node_type": type_name, "nodes": len(group), "values": values}
        for node, _ in group:
            sections[node] = section
    return sections


# ------------------------------------------------------------------ the check


@dataclass(frozen=True, slots=True)
class _Tally:
    count: int
    nodes: str


def _section(facts: Facts, topology: Topology) -> tuple[int, dict[str, Any]]:
    """(nodes of the type in the run, field -> value -> tally doc) from the node's fleet section."""
    doc = facts.data.get(SECTION)
    if doc is None:
        raise Unmeasurable("fleet comparison not collected: the node suite's fleet phase did not run "
                           "(burnin run --suite node)")
    if not isinstance(doc, dict) or not isinstance(doc.get("values"), dict):
        raise Unmeasurable(f"fleet section unreadable: {printable(repr(doc), limit=60)}")
    if doc.get("node_type") != topology.name:
        raise Unmeasurable(f"fleet section counts {printable(str(doc.get('node_type')), limit=40)} nodes, "
                           f"not {topology.name}")
    nodes = measured_count(doc.get("nodes"), "fleet", "node count", PhysicalRange(1, 10**7))
    return nodes, doc["values"]


def _tallies(table: object, label: str) -> dict[str, _Tally]:
    if not isinstance(table, dict) or not table:
        raise Unmeasurable(f"the fleet section has no {label} counts")
    tallies: dict[str, _Tally] = {}
    for value, doc in table.items():
        entry = doc if isinstance(doc, dict) else {}
        count = measured_count(entry.get("count"), "fleet", f"count of {label} {_shown(value)}",
                               PhysicalRange(1, 10**7))
        nodes = entry.get("nodes")
        tallies[value] = _Tally(count, nodes if isinstance(nodes, str) else "")
    return tallies


def _shown(value: str) -> str:
    return printable(value, limit=VALUE_SHOWN)


def _where(tally: _Tally) -> str:
    return printable(tally.nodes, limit=60) if tally.nodes else f"{tally.count} nodes"


def judge_field(label: str, reading: Reading, table: object, type_name: str,
                golden: frozenset[str] = frozenset(), golden_here: bool = False) -> Finding:
    """One field of one node against the counts of its type's nodes (module docstring: the rules)."""
    if reading.value is None:
        return unknown(label, reading.why)
    value = reading.value
    if golden_here and golden:
        if value in golden:
            return ok(label, _shown(value), "")
        return bad(label, f"{_shown(value)} (not the topology's)", "")
    try:
        tallies = _tallies(table, label)
    except Unmeasurable as exc:
        return unknown(label, exc.reason)
    if value not in tallies:
        return unknown(label, f"{_shown(value)} is not among the fleet's counts (facts changed after the count?)")
    if len(tallies) == 1:
        return ok(label, _shown(value), "")
    total = sum(t.count for t in tallies.values())
    ranked = sorted(tallies.items(), key=lambda item: (-item[1].count, item[0]))
    top, top_tally = ranked[0]
    if total < MIN_FLEET:
        others = "; ".join(f"{_shown(v)} on {_where(t)}" for v, t in ranked if v != value)
        return unknown(label, f"{_shown(value)} here, {others}: {total} {type_name} nodes differ and no majority "
                              "says which is wrong")
    if 2 * top_tally.count > total:
        if value == top or value in golden:
            return ok(label, _shown(value), "")
        return bad(label, f"{_shown(value)} (fleet: {_shown(top)} on {top_tally.count} of {total} nodes)",
                   "")
    split = ", ".join(f"{_shown(v)} on {t.count}" for v, t in ranked)
    return unknown(label, f"{_shown(value)} here; no {label} runs on most of the {total} {type_name} nodes "
                          f"({split})")


@check("INV-11", "Fleet consistency: the node's inventory as on most of the run's nodes of its type",
       sources=(SECTION, "nvml", "kernel", "infiniband"), fast=False)
def fleet_consistency(facts: Facts, topology: Topology) -> Verdict:
    readings = read_inventory(facts, topology)
    nodes, values = _section(facts, topology)
    expected = f"as on most of the run's {nodes} {topology.name} nodes"
    findings = []
    for field in FIELDS:
        if field.key not in readings:
            continue
        golden = field.golden(topology)
        found = judge_field(field.label, readings[field.key], values.get(field.key), topology.name, golden,
                            field.golden_here)
        wanted = (f"{field.label} {' or '.join(sorted(map(_shown, golden)))} as topology {topology.name} names it"
                  if golden and field.golden_here else expected)
        findings.append(Finding(found.subject, found.status, found.measured, wanted, found.note))
    failed = [f for f in findings if f.status is Status.FAIL]
    held = sorted({f.expected for f in failed if f.expected != expected})
    if held:  # what the failed fields were held to: the topology's value, and the fleet's where one failed on it
        on_fleet = [expected] if any(f.expected == expected for f in failed) else []
        expected = "; ".join(on_fleet + held)
    inventory = ", ".join(f"{field.label} {_shown(str(readings[field.key].value))}"
                          for field in FIELDS if field.key in readings)
    alone = f"the only {topology.name} node of the run: nothing to compare with" if nodes == 1 else \
        f"the fleet's on every field ({nodes} {topology.name} nodes in the run)"
    return roll_up("INV-11", facts.node, findings, expected=expected, healthy=f"{inventory}; {alone}")
