"""INV-09 (HCA firmware / PSID), IB-06 (HCA PCIe link), IB-09 (MTU, partition keys): pass, fail, incomplete.

The healthy facts come from a simulated node read by the real collector; the
real reference outputs (ibstat of H100 nodes, lspci -vvv of an HGX H100) supply
values measured on real hardware for the judgements.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from checks_support import (
    COMPUTE_HCAS,
    FAIL,
    INCOMPLETE,
    PASS,
    STORAGE_HCAS,
    TOPOLOGY,
    assert_status,
    failing_subjects,
    hca_bus,
    judge,
    pci,
    port,
    unmeasured_subjects,
)

from burnin.checks.hca import disagreement
from burnin.parsers.ibstat import parse_ibstat
from burnin.parsers.lspci import parse_lspci
from burnin.topology.model import HcaFirmware, IbPartitions, Topology

Facts = dict[str, Any]
FW = "28.41.1000"  # the shipped topology's compute firmware
NO_FIRMWARE = replace(TOPOLOGY, hca_firmware=None)
NO_PARTITIONS = replace(TOPOLOGY, ib_partitions=None)


def hca(facts: Facts, name: str) -> dict[str, Any]:
    found: dict[str, Any] = facts["infiniband"]["hcas"][name]
    return found


def pkey_table(facts: Facts, name: str) -> dict[str, Any]:
    found: dict[str, Any] = facts["ib_pkeys"]["hcas"][name]["1"]
    return found


def set_devinfo(facts: Facts, name: str, key: str, value: str) -> None:
    """Change one port attribute of one device in the collected ``ibv_devinfo`` output."""
    record = facts["commands"]["ibv-devinfo"]
    blocks = re.split(r"(?m)^(?=hca_id:)", record["stdout"])
    changed = [re.sub(rf"(?m)^(\t*{key}:\t+).*$", lambda m: m.group(1) + value, b)
               if b.startswith(f"hca_id:\t{name}\n") else b for b in blocks]
    assert changed != blocks, (name, key)
    record["stdout"] = "".join(changed)


# ---------------------------------------------------------------- INV-09


def test_inv09_healthy_node_passes_and_says_the_psid_is_judged_for_consistency_only(facts: Facts) -> None:
    verdict = judge("INV-09", facts)
    assert_status(verdict, PASS, f"8 compute HCAs on firmware {FW}", "2 storage HCAs",
                  "declares no compute PSID: consistency only")


@pytest.mark.parametrize("name", COMPUTE_HCAS)
def test_inv09_one_compute_hca_on_other_firmware_fails_naming_it(facts: Facts, name: str) -> None:
    hca(facts, name)["fw_ver"] = "28.39.4082"
    verdict = judge("INV-09", facts)
    assert_status(verdict, FAIL, f"{name} firmware 28.39.4082", f"expected compute HCAs on firmware {FW}")
    assert failing_subjects(verdict) == {name}


def test_inv09_a_different_psid_fails_on_consistency_when_none_is_declared(facts: Facts) -> None:
    hca(facts, "mlx5_5")["board_id"] = "DEL0000000036"
    verdict = judge("INV-09", facts)
    assert_status(verdict, FAIL, "compute PSID differs: DEL0000000036 on mlx5_5 vs MT_0000000838 on the other 7")
    assert failing_subjects(verdict) == {"compute"}


def test_inv09_a_declared_psid_is_judged_per_hca(facts: Facts) -> None:
    declared = replace(TOPOLOGY, hca_firmware=HcaFirmware(source="golden node", version=FW, psid="MT_0000000838"))
    verdict = judge("INV-09", facts, declared)
    assert verdict.status is PASS and "consistency only" not in verdict.reason
    hca(facts, "mlx5_0")["board_id"] = "MT_0000000839"
    verdict = judge("INV-09", facts, declared)
    assert_status(verdict, FAIL, "mlx5_0 PSID MT_0000000839", "PSID MT_0000000838")
    assert failing_subjects(verdict) == {"mlx5_0"}


def test_inv09_without_declared_firmware_judges_consistency_and_says_so(facts: Facts) -> None:
    assert_status(judge("INV-09", facts, NO_FIRMWARE), PASS,
                  "declares no compute firmware or PSID: consistency only")
    hca(facts, "mlx5_3")["fw_ver"] = "28.39.4082"
    verdict = judge("INV-09", facts, NO_FIRMWARE)
    assert_status(verdict, FAIL, f"compute firmware differs: 28.39.4082 on mlx5_3 vs {FW} on the other 7",
                  "consistency only")


def test_inv09_a_tie_names_both_groups(facts: Facts) -> None:
    for name in COMPUTE_HCAS[:4]:
        hca(facts, name)["fw_ver"] = "28.39.4082"
    verdict = judge("INV-09", facts, NO_FIRMWARE)
    assert_status(verdict, FAIL, "28.39.4082 on mlx5_0, mlx5_1 and 2 more", f"{FW} on mlx5_4, mlx5_5 and 2 more")


def test_inv09_storage_hcas_must_agree_with_each_other(facts: Facts) -> None:
    hca(facts, STORAGE_HCAS[1])["fw_ver"] = "32.41.1000"
    verdict = judge("INV-09", facts)
    assert_status(verdict, FAIL, "storage firmware differs")
    assert failing_subjects(verdict) == {"storage"}


def test_inv09_an_hca_at_another_bus_id_fails(facts: Facts) -> None:
    """Names shift when an HCA does not enumerate: mlx5_3 now at mlx5_4's address."""
    hca(facts, "mlx5_3")["pci"] = hca_bus("mlx5_4")
    verdict = judge("INV-09", facts)
    assert_status(verdict, FAIL, f"mlx5_3 at {hca_bus('mlx5_4')}, not at its bus id {hca_bus('mlx5_3')}")


def test_inv09_an_absent_hca_fails(facts: Facts) -> None:
    del facts["infiniband"]["hcas"]["mlx5_6"]
    assert_status(judge("INV-09", facts), FAIL, "mlx5_6 absent")


@pytest.mark.parametrize(("key", "value"), [("fw_ver", None), ("fw_ver", ""), ("board_id", None), ("fw_ver", 28)])
def test_inv09_unreadable_identity_is_incomplete(facts: Facts, key: str, value: object) -> None:
    hca(facts, "mlx5_7")[key] = value
    verdict = judge("INV-09", facts)
    assert_status(verdict, INCOMPLETE, "mlx5_7", key)
    assert unmeasured_subjects(verdict) == {"mlx5_7"}


def test_inv09_unreadable_pci_link_is_incomplete(facts: Facts) -> None:
    hca(facts, "mlx5_2")["pci"] = None
    assert_status(judge("INV-09", facts), INCOMPLETE, "mlx5_2", "PCI function is unknown")


def test_inv09_a_failed_source_is_incomplete(facts: Facts) -> None:
    facts["sources"]["infiniband"] = {"ok": False, "error": "timed out after 20 s"}
    assert_status(judge("INV-09", facts), INCOMPLETE, "timed out")


def test_disagreement() -> None:
    assert disagreement({}) is None
    assert disagreement({"a": "1", "b": "1"}) is None
    assert disagreement({"a": "1", "b": "2", "c": "1"}) == "2 on b vs 1 on the other 2"
    assert disagreement({"a": "1", "b": "2"}) == "1 on a; 2 on b"


def _cas(path: Path, ca_type: str) -> list[tuple[str, str]]:
    report = parse_ibstat(path.read_text(encoding="utf-8"))
    return [(ca.name, ca.firmware) for ca in report.cas if ca.type == ca_type]


def test_inv09_on_the_firmware_of_a_real_h100_node(facts: Facts, reference_dir: Path) -> None:
    """The eight CX-7 (MT4129) of a real H100 node run 28.41.1000, the shipped topology's version."""
    real = _cas(reference_dir / "infiniband" / "ibstat-h100-cx7-ndr400-ib-8port-all-active.txt", "MT4129")
    assert len(real) == len(COMPUTE_HCAS) == 8
    for name, (_, firmware) in zip(COMPUTE_HCAS, real, strict=True):
        hca(facts, name)["fw_ver"] = firmware
    bf3 = _cas(reference_dir / "infiniband" / "ibstat-h100-cx7-ndr400-ib-8port-all-active.txt", "MT41692")
    for name in STORAGE_HCAS:
        hca(facts, name)["fw_ver"] = bf3[0][1]  # 32.38.3056 on both BlueField-3
    assert_status(judge("INV-09", facts), PASS, "8 compute HCAs on firmware 28.41.1000", "on firmware 32.38.3056")


def test_inv09_on_another_real_nodes_firmware(facts: Facts, reference_dir: Path) -> None:
    """A real node on CX-7 28.39.1002: consistent (passes without a golden version), not the qualified one."""
    real = _cas(reference_dir / "infiniband" / "ibstat-h100-cx7-roce400-some-ports-down.txt", "MT4129")
    for name, (_, firmware) in zip(COMPUTE_HCAS, real, strict=True):
        hca(facts, name)["fw_ver"] = firmware
    assert judge("INV-09", facts, NO_FIRMWARE).status is PASS
    verdict = judge("INV-09", facts)
    assert_status(verdict, FAIL, "firmware 28.39.1002")
    assert failing_subjects(verdict) == set(COMPUTE_HCAS)
    # that node's ConnectX-6 Dx (MT4125, 22.39.1002) in place of one CX-7: the odd one out
    cx6 = _cas(reference_dir / "infiniband" / "ibstat-h100-cx7-roce400-some-ports-down.txt", "MT4125")
    hca(facts, "mlx5_4")["fw_ver"] = cx6[0][1]
    assert_status(judge("INV-09", facts, NO_FIRMWARE), FAIL, "22.39.1002 on mlx5_4 vs 28.39.1002 on the other 7")


# ---------------------------------------------------------------- IB-06


def test_ib06_healthy_node_passes(facts: Facts) -> None:
    assert_status(judge("IB-06", facts), PASS, "32 GT/s x16")


@pytest.mark.parametrize("name", COMPUTE_HCAS)
@pytest.mark.parametrize(("speed", "width", "status"), [
    ("32.0 GT/s PCIe", 16, PASS),
    ("64.0 GT/s PCIe", 16, PASS),
    ("16.0 GT/s PCIe", 16, FAIL),
    ("32.0 GT/s PCIe", 8, FAIL),
    ("32 GT/s", 16, PASS),  # kernels before 4.19 print no ".0 ... PCIe"
    ("Unknown", 16, INCOMPLETE),
    ("32.0 GT/s PCIe", None, INCOMPLETE),
    ("32.0 GT/s PCIe", 0, INCOMPLETE),  # width 0: the link is not trained, nothing to judge
    (None, 16, INCOMPLETE),
])
def test_ib06_speed_and_width_on_every_compute_hca(facts: Facts, name: str, speed: str | None, width: int | None,
                                                   status: object) -> None:
    pci(facts, hca_bus(name)).update(current_link_speed=speed, current_link_width=width)
    verdict = judge("IB-06", facts)
    assert verdict.status is status, verdict.reason
    if status is FAIL:
        assert failing_subjects(verdict) == {name}
        assert "capable of 32 GT/s x16" in verdict.reason and "expected >= 32 GT/s, 16 lanes" in verdict.reason
    if status is INCOMPLETE:
        assert unmeasured_subjects(verdict) == {name}


def test_ib06_storage_hcas_are_not_judged(facts: Facts) -> None:
    pci(facts, hca_bus(STORAGE_HCAS[0])).update(current_link_width=8)
    assert judge("IB-06", facts).status is PASS


def test_ib06_an_hca_absent_from_pci_is_not_measured(facts: Facts) -> None:
    del facts["pci"]["devices"][hca_bus("mlx5_1")]
    assert_status(judge("IB-06", facts), INCOMPLETE, "mlx5_1", "absent from PCI")


def test_ib06_a_topology_without_its_references_is_incomplete(facts: Facts) -> None:
    partial = replace(TOPOLOGY, references={k: v for k, v in TOPOLOGY.references.items() if k != "hca_pcie_width"})
    assert_status(judge("IB-06", facts, partial), INCOMPLETE, "defines no hca_pcie_width")


def test_ib06_on_the_links_of_a_real_hgx_h100(facts: Facts, reference_dir: Path) -> None:
    """Each real ConnectX-7's LnkSta (32GT/s x16) passes; a real ConnectX-6 Dx (16GT/s) in one slot fails."""
    report = parse_lspci((reference_dir / "lspci" / "lspci-vvv-full-hgx-h100-8gpu-cx7-pex890xx.txt")
                         .read_text(encoding="utf-8"))
    cx7 = [d for d in report.devices if "ConnectX-7" in d.name]
    cx6 = [d for d in report.devices if "ConnectX-6 Dx" in d.name]
    assert len(cx7) == 8 and cx6
    for name, device in zip(COMPUTE_HCAS, cx7, strict=True):
        assert device.lnksta_speed_gts is not None and device.lnksta_width is not None
        pci(facts, hca_bus(name)).update(current_link_speed=f"{device.lnksta_speed_gts:.1f} GT/s PCIe",
                                         current_link_width=device.lnksta_width)
    assert_status(judge("IB-06", facts), PASS, "32 GT/s x16")
    pci(facts, hca_bus("mlx5_6")).update(current_link_speed=f"{cx6[0].lnksta_speed_gts:.1f} GT/s PCIe",
                                         max_link_speed=f"{cx6[0].lnkcap_speed_gts:.1f} GT/s PCIe")
    verdict = judge("IB-06", facts)
    assert_status(verdict, FAIL, "mlx5_6 16 GT/s x16 (capable of 16 GT/s x16)")


# ---------------------------------------------------------------- IB-09


def test_ib09_healthy_node_passes(facts: Facts) -> None:
    assert_status(judge("IB-09", facts), PASS, "active_mtu 4096, pkeys 0xffff")


@pytest.mark.parametrize("name", COMPUTE_HCAS)
def test_ib09_mtu_2048_on_any_compute_port_fails(facts: Facts, name: str) -> None:
    set_devinfo(facts, name, "active_mtu", "2048 (4)")
    verdict = judge("IB-09", facts)
    assert_status(verdict, FAIL, f"{name} active_mtu 2048", "expected active_mtu 4096 bytes")
    assert failing_subjects(verdict) == {name}


@pytest.mark.parametrize(("entries", "status", "needle"), [
    ({"0": "0xffff"}, PASS, "pkeys 0xffff"),
    ({"0": "0x7fff"}, FAIL, "pkeys 0x7fff (limited)"),
    ({"0": "0xffff", "1": "0x8002"}, FAIL, "pkeys 0xffff, 0x8002"),
    ({}, FAIL, "no partition key"),
    ({"0": "0x8000"}, FAIL, "no partition key"),  # partition 0 is no partition
    ({"0": "ffff"}, INCOMPLETE, "pkeys/0 'ffff' is not a partition key"),
])
def test_ib09_partition_keys(facts: Facts, entries: dict[str, str], status: object, needle: str) -> None:
    pkey_table(facts, "mlx5_1")["pkeys"] = entries
    verdict = judge("IB-09", facts)
    assert_status(verdict, status, needle)  # type: ignore[arg-type]
    if status is not PASS:
        assert {f.subject for f in verdict.findings if f.status is not PASS} == {"mlx5_1"}


def test_ib09_declared_site_partitions(facts: Facts) -> None:
    site = replace(TOPOLOGY, ib_partitions=IbPartitions(pkeys=("0xffff", "0x8002"), source="site"))
    verdict = judge("IB-09", facts, site)
    assert_status(verdict, FAIL, "mlx5_0 pkeys 0xffff;", "(expected active_mtu 4096 bytes, pkeys 0xffff, 0x8002)")
    for name in COMPUTE_HCAS:
        pkey_table(facts, name)["pkeys"] = {"0": "0xffff", "5": "0x8002"}
    assert judge("IB-09", facts, site).status is PASS


def test_ib09_without_declared_partitions_judges_consistency_and_says_so(facts: Facts) -> None:
    assert_status(judge("IB-09", facts, NO_PARTITIONS), PASS, "declares no ib_partitions: consistency only")
    pkey_table(facts, "mlx5_7")["pkeys"] = {"0": "0x7fff"}
    verdict = judge("IB-09", facts, NO_PARTITIONS)
    assert_status(verdict, FAIL, "pkeys differ: 0x7fff (limited) on mlx5_7 vs 0xffff on the other 7")


@pytest.mark.parametrize(("change", "needle"), [
    (lambda f: pkey_table(f, "mlx5_2").update(unreadable=["3"]), "pkeys/3 unreadable"),
    (lambda f: pkey_table(f, "mlx5_2").update(size=0, pkeys={}), "pkey table unreadable"),
    (lambda f: f["ib_pkeys"]["hcas"]["mlx5_2"].update({"1": None}), "ports/1/pkeys not present"),
    (lambda f: set_devinfo(f, "mlx5_2", "active_mtu", "invalid MTU (7)"), "active_mtu unreadable"),
    (lambda f: set_devinfo(f, "mlx5_2", "active_mtu", "2048 (5)"), "active_mtu unreadable"),
    (lambda f: set_devinfo(f, "mlx5_2", "hca_id", "mlx5_22"), "not in ibv_devinfo's output"),
])
def test_ib09_unreadable_values_are_incomplete(facts: Facts, change: Any, needle: str) -> None:
    change(facts)
    verdict = judge("IB-09", facts)
    assert_status(verdict, INCOMPLETE, "mlx5_2", needle)
    assert unmeasured_subjects(verdict) == {"mlx5_2"}


def test_ib09_a_port_that_is_not_active_is_not_judged(facts: Facts) -> None:
    port(facts, "mlx5_0").update(state="1: DOWN")
    set_devinfo(facts, "mlx5_0", "active_mtu", "1024 (3)")
    assert_status(judge("IB-09", facts), INCOMPLETE, "mlx5_0", "port 1: DOWN", "see IB-01")


@pytest.mark.parametrize(("record", "needle"), [
    ({"argv": ["ibv_devinfo"], "exit_status": None, "stdout": "", "stderr": "",
      "error": "ibv_devinfo: command not found"}, "command not found"),
    ({"argv": ["ibv_devinfo"], "exit_status": 255, "stdout": "", "stderr": "No IB devices found\n", "error": None},
     "No IB devices found"),
    ({"argv": ["ibv_devinfo"], "exit_status": 0, "stdout": "2 HCAs found:\n", "stderr": "", "error": None},
     "no 'hca_id:' block"),
])
def test_ib09_ibv_devinfo_that_did_not_run_is_incomplete(facts: Facts, record: dict[str, Any], needle: str) -> None:
    facts["commands"]["ibv-devinfo"] = record
    assert_status(judge("IB-09", facts), INCOMPLETE, needle)


def test_ib09_a_topology_without_the_mtu_reference_is_incomplete(facts: Facts) -> None:
    partial: Topology = replace(TOPOLOGY, references={k: v for k, v in TOPOLOGY.references.items()
                                                      if k != "ib_mtu_bytes"})
    assert_status(judge("IB-09", facts, partial), INCOMPLETE, "defines no ib_mtu_bytes")


# ---------------------------------------------------------------- golden drafts


def test_a_golden_node_drafts_its_hca_firmware_and_partitions(facts: Facts) -> None:
    from pydantic import TypeAdapter

    from burnin.facts import Facts as NodeFacts
    from burnin.golden import draft_topology

    doc = draft_topology(NodeFacts("sim01", facts), TOPOLOGY, "site")
    assert {k: v for k, v in doc["hca_firmware"].items() if k != "source"} == {"version": FW, "psid": "MT_0000000838"}
    assert doc["ib_partitions"]["pkeys"] == ["0xffff"] and "golden node sim01" in doc["ib_partitions"]["source"]
    assert {k: v for k, v in doc["storage_hca_firmware"].items() if k != "source"} == {
        "version": "32.38.3056", "psid": "MT_0000000884"}  # the storage HCAs' own, for INV-11
    drafted = TypeAdapter(Topology).validate_python(doc)  # as the YAML loader would
    assert drafted.storage_hca_firmware is not None and drafted.storage_hca_firmware.version == "32.38.3056"
    for check_id in ("INV-09", "IB-06", "IB-09"):
        verdict = judge(check_id, facts, drafted)
        assert verdict.status is PASS and "consistency only" not in verdict.reason, verdict.reason


def test_a_golden_node_whose_hcas_disagree_is_refused(facts: Facts) -> None:
    from burnin.errors import UsageError
    from burnin.facts import Facts as NodeFacts
    from burnin.golden import draft_topology

    hca(facts, "mlx5_2")["fw_ver"] = "28.39.4082"
    with pytest.raises(UsageError, match="compute HCAs differ in firmware"):
        draft_topology(NodeFacts("sim01", facts), TOPOLOGY, "site")
    hca(facts, "mlx5_2")["fw_ver"] = FW
    hca(facts, STORAGE_HCAS[1])["fw_ver"] = "32.41.1000"
    with pytest.raises(UsageError, match="storage HCAs differ in firmware"):
        draft_topology(NodeFacts("sim01", facts), TOPOLOGY, "site")


def test_a_golden_node_without_pkey_tables_drafts_no_partitions(facts: Facts) -> None:
    from burnin.facts import Facts as NodeFacts
    from burnin.golden import draft_topology

    del facts["ib_pkeys"]
    doc = draft_topology(NodeFacts("sim01", facts), TOPOLOGY, "site")
    assert doc["ib_partitions"] is None and doc["hca_firmware"]["version"] == FW
