"""TOP-01..TOP-08, table-driven: every GPU and HCA, each relation and setting at its bound."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from checks_support import (
    COMPUTE_HCAS,
    FAIL,
    GPU_INDEXES,
    INCOMPLETE,
    PASS,
    STORAGE_HCAS,
    TOPOLOGY,
    assert_status,
    failing_subjects,
    gpu_bus,
    hca_bus,
    judge,
    pci,
    unmeasured_subjects,
)

from burnin.evaluate.verdict import Status

Facts = dict[str, Any]
DEVICES = [(f"gpu{i}", gpu_bus(i), TOPOLOGY.gpus.devices[i].numa_node) for i in GPU_INDEXES]
DEVICES += [(name, hca_bus(name), next(h.numa_node for h in TOPOLOGY.hcas if h.name == name))
            for name in (*COMPUTE_HCAS, *STORAGE_HCAS)]
PAIRED = [(f"gpu{d.index}", d.bus_id, d.hca) for d in TOPOLOGY.gpus.devices if d.hca]


# ------------------------------------------------------------------ TOP-01


@pytest.mark.parametrize(("subject", "bus", "numa"), DEVICES, ids=[d[0] for d in DEVICES])
@pytest.mark.parametrize(("value", "status"), [(-1, FAIL), ("other", FAIL), ("same", PASS)])
def test_numa_node_of_every_device(facts: Facts, subject: str, bus: str, numa: int, value: object,
                                   status: Status) -> None:
    pci(facts, bus)["numa_node"] = {"other": 1 - numa, "same": numa}.get(value, value)
    verdict = judge("TOP-01", facts)
    assert verdict.status is status, verdict.reason
    if status is FAIL:
        assert failing_subjects(verdict) == {subject}


@pytest.mark.parametrize(("online", "status"), [("0-1", PASS), ("0", FAIL), ("0-2", FAIL), ("0,1", PASS)])
def test_numa_nodes_online(facts: Facts, online: str, status: Status) -> None:
    facts["numa"]["online"] = online
    assert judge("TOP-01", facts).status is status


@pytest.mark.parametrize(("subject", "bus", "numa"), DEVICES, ids=[d[0] for d in DEVICES])
def test_absent_device_is_not_measured_for_numa(facts: Facts, subject: str, bus: str, numa: int) -> None:
    del facts["pci"]["devices"][bus]
    verdict = judge("TOP-01", facts)
    assert verdict.status is INCOMPLETE and unmeasured_subjects(verdict) == {subject}
    assert f"{bus} absent from PCI" in verdict.reason


# ------------------------------------------------------------------ TOP-02


@pytest.mark.parametrize("index", GPU_INDEXES)
@pytest.mark.parametrize(("cpus", "status"), [("own", PASS), ("other", FAIL), ("half", FAIL), ("plus-one", FAIL)])
def test_cpu_affinity_of_every_gpu(facts: Facts, index: int, cpus: str, status: Status) -> None:
    numa = TOPOLOGY.gpus.devices[index].numa_node
    own = TOPOLOGY.numa.cpulists[numa]
    values = {"own": own, "other": TOPOLOGY.numa.cpulists[1 - numa], "half": own.split(",")[0],
              "plus-one": f"{own},{999}"}
    pci(facts, gpu_bus(index))["local_cpulist"] = values[cpus]
    verdict = judge("TOP-02", facts)
    assert verdict.status is status, verdict.reason
    if status is FAIL:
        assert failing_subjects(verdict) == {f"gpu{index}"}


@pytest.mark.parametrize("value", [None, "", "0-x"])
def test_unreadable_cpu_list_is_unmeasured(facts: Facts, value: object) -> None:
    pci(facts, gpu_bus(5))["local_cpulist"] = value
    verdict = judge("TOP-02", facts)
    assert verdict.status is INCOMPLETE and unmeasured_subjects(verdict) == {"gpu5"}, verdict.reason


# ------------------------------------------------------------------ TOP-03


def _path(facts: Facts, bus: str) -> str:
    path: str = pci(facts, bus)["path"]
    return path


@pytest.mark.parametrize(("subject", "gpu_bus_id", "hca"), PAIRED, ids=[p[0] for p in PAIRED])
def test_hca_behind_another_root_port_fails(facts: Facts, subject: str, gpu_bus_id: str, hca: str) -> None:
    bus = hca_bus(hca)
    host = _path(facts, bus).split("/")[3]
    pci(facts, bus)["path"] = f"/sys/devices/{host}/{bus[:5]}ff:01.0/{bus}"
    verdict = judge("TOP-03", facts)
    assert_status(verdict, FAIL, f"{subject} PHB to {hca}")
    assert failing_subjects(verdict) == {subject}


@pytest.mark.parametrize(("subject", "gpu_bus_id", "hca"), PAIRED, ids=[p[0] for p in PAIRED])
def test_gpu_one_bridge_deeper_is_pxb_not_pix(facts: Facts, subject: str, gpu_bus_id: str, hca: str) -> None:
    parent, _, leaf = _path(facts, gpu_bus_id).rpartition("/")
    pci(facts, gpu_bus_id)["path"] = f"{parent}/{gpu_bus_id[:5]}fe:00.0/{leaf}"
    assert_status(judge("TOP-03", facts), FAIL, f"{subject} PXB to {hca}")


def test_hca_on_the_other_socket_is_sys(facts: Facts) -> None:
    bus = hca_bus("mlx5_0")
    pci(facts, bus)["path"] = f"/sys/devices/pci0000:ff/0000:ff:01.0/{bus}"
    pci(facts, bus)["numa_node"] = 1
    assert_status(judge("TOP-03", facts), FAIL, "gpu0 SYS to mlx5_0")


def test_hca_under_another_root_port_of_the_same_socket_is_node(facts: Facts) -> None:
    bus = hca_bus("mlx5_0")
    pci(facts, bus)["path"] = f"/sys/devices/pci0000:ff/0000:ff:01.0/{bus}"
    assert_status(judge("TOP-03", facts), FAIL, "gpu0 NODE to mlx5_0")


@pytest.mark.parametrize(("subject", "gpu_bus_id", "hca"), PAIRED, ids=[p[0] for p in PAIRED])
def test_pairing_with_a_device_absent_is_not_measured(facts: Facts, subject: str, gpu_bus_id: str,
                                                       hca: str) -> None:
    del facts["pci"]["devices"][hca_bus(hca)]
    verdict = judge("TOP-03", facts)
    assert verdict.status is INCOMPLETE and unmeasured_subjects(verdict) == {subject}


# ------------------------------------------------------------------ TOP-04


def _stanza_edit(facts: Facts, bus: str, edit: Callable[[str], str]) -> None:
    """Apply ``edit`` to the lspci -vvv stanza of ``bus`` (printed without its 0000: domain)."""
    record = facts["commands"]["lspci"]
    stanzas = record["stdout"].split("\n\n")
    short = bus[5:]
    hits = [i for i, s in enumerate(stanzas) if s.lstrip("\n").startswith(short + " ")]
    assert len(hits) == 1, short
    stanzas[hits[0]] = edit(stanzas[hits[0]])
    record["stdout"] = "\n\n".join(stanzas)


def _upstream(facts: Facts, bus: str, level: int) -> str:
    """The bridge ``level`` steps above ``bus`` (0: its switch downstream port)."""
    parts = [p for p in _path(facts, bus).split("/") if p.count(":") == 2]
    return parts[-2 - level]


def _acs_on(stanza: str) -> str:
    return re.sub(r"(ACSCtl:\s+SrcValid)-(.*ReqRedir)-", r"\1+\2+", stanza)


PORTS = [(subject, bus) for subject, bus, _ in DEVICES if subject.startswith("gpu") or subject in COMPUTE_HCAS]


@pytest.mark.parametrize(("subject", "bus"), PORTS, ids=[p[0] for p in PORTS])
def test_acs_on_the_switch_port_of_every_gpu_and_hca(facts: Facts, subject: str, bus: str) -> None:
    port = _upstream(facts, bus, 0)
    _stanza_edit(facts, port, _acs_on)
    verdict = judge("TOP-04", facts)
    assert_status(verdict, FAIL, "SrcValid+", "ReqRedir+")
    assert failing_subjects(verdict) == {port}


def test_acs_on_the_root_port_fails(facts: Facts) -> None:
    root = _upstream(facts, gpu_bus(4), 2)
    _stanza_edit(facts, root, _acs_on)
    verdict = judge("TOP-04", facts)
    assert verdict.status is FAIL and failing_subjects(verdict) == {root}


def test_acs_on_a_port_outside_gpu_and_hca_paths_passes(facts: Facts) -> None:
    """17:00.0 leads to mlx5_0 and 17:01.0 to gpu0; a spare port on no path is not judged."""
    text = facts["commands"]["lspci"]["stdout"]
    spare = "0000:5d:02.0"
    first = text.index("\n5d:00.0 ")
    end = text.index("\n\n", first + 1)
    stanza = text[first:end].replace("5d:00.0 ", "5d:02.0 ", 1)
    facts["commands"]["lspci"]["stdout"] = text + stanza + "\n\n"
    _stanza_edit(facts, spare, _acs_on)
    assert judge("TOP-04", facts).status is PASS


@pytest.mark.parametrize(("subject", "bus"), PORTS, ids=[p[0] for p in PORTS])
def test_switch_port_without_acs_lines_is_not_measured(facts: Facts, subject: str, bus: str) -> None:
    """The TOP-04 fail-open: lspci showing no ACS control used to pass."""
    port = _upstream(facts, bus, 0)
    _stanza_edit(facts, port, lambda s: re.sub(r"\n\tCapabilities: \[\w+ v1\] Access Control Services\n"
                                               r"\t\tACSCap:[^\n]*\n\t\tACSCtl:[^\n]*", "", s))
    verdict = judge("TOP-04", facts)
    assert verdict.status is INCOMPLETE, verdict.reason
    assert unmeasured_subjects(verdict) == {port} and "no ACSCtl line" in verdict.reason


def test_capabilities_access_denied_is_not_measured(facts: Facts) -> None:
    """lspci run without root prints '<access denied>' instead of the capability list."""
    record = facts["commands"]["lspci"]
    record["stdout"] = re.sub(r"\tCapabilities: [^\n]*(\n\t\t[^\n]*)*", "\tCapabilities: <access denied>",
                              record["stdout"])
    verdict = judge("TOP-04", facts)
    assert_status(verdict, INCOMPLETE, "capabilities unreadable")


def test_switch_port_missing_from_lspci_is_not_measured(facts: Facts) -> None:
    port = _upstream(facts, gpu_bus(6), 0)
    _stanza_edit(facts, port, lambda s: "")
    verdict = judge("TOP-04", facts)
    assert verdict.status is INCOMPLETE and port in unmeasured_subjects(verdict)


def test_acs_not_required_by_the_topology(facts: Facts) -> None:
    from dataclasses import replace

    relaxed = replace(TOPOLOGY, host=replace(TOPOLOGY.host, acs_disabled=False))
    _stanza_edit(facts, _upstream(facts, gpu_bus(0), 0), _acs_on)
    assert judge("TOP-04", facts, relaxed).status is PASS


# ------------------------------------------------------------------ TOP-05, TOP-08


@pytest.mark.parametrize(("groups", "status"), [
    ({"identity": 20}, PASS),
    ({}, PASS),  # no IOMMU groups: IOMMU off
    ({"identity": 19, "DMA": 1}, FAIL),
    ({"DMA-FQ": 20}, FAIL),
    ({"identity": 19, "unknown": 1}, INCOMPLETE),  # a group whose type could not be read
    ({"blocked": 2, "identity": 18}, INCOMPLETE),
])
def test_iommu_group_types(facts: Facts, groups: dict[str, int], status: Status) -> None:
    facts["kernel"]["iommu_group_types"] = groups
    assert judge("TOP-05", facts).status is status


@pytest.mark.parametrize(("groups", "measured"), [({}, "IOMMU off (no groups)"),
                                                  ({"identity": 3}, "IOMMU passthrough (identity)")])
def test_iommu_off_and_passthrough_are_told_apart(facts: Facts, groups: dict[str, int], measured: str) -> None:
    facts["kernel"]["iommu_group_types"] = groups
    assert judge("TOP-05", facts).measured == measured


@pytest.mark.parametrize(("value", "status"), [(0, PASS), (1, FAIL), (2, FAIL)])
def test_numa_balancing_without_a_topology_reference_must_be_off(facts: Facts, value: int, status: Status) -> None:
    from dataclasses import replace

    bare = replace(TOPOLOGY, references={k: v for k, v in TOPOLOGY.references.items() if k != "numa_balancing"})
    facts["kernel"]["numa_balancing"] = value
    assert judge("TOP-08", facts, bare).status is status


@pytest.mark.parametrize(("value", "status"), [
    (0, PASS), (1, FAIL), (2, FAIL), (3, FAIL), (4, INCOMPLETE), (-1, INCOMPLETE), (None, INCOMPLETE),
    (0.5, INCOMPLETE), (float("nan"), INCOMPLETE), (True, INCOMPLETE), ("0", INCOMPLETE),
])
def test_numa_balancing(facts: Facts, value: object, status: Status) -> None:
    facts["kernel"]["numa_balancing"] = value
    verdict = judge("TOP-08", facts)
    assert verdict.status is status, verdict.reason
    if status is INCOMPLETE and value is not None:
        assert repr(value) in verdict.reason
