"""Edges of INV-09, IB-06 and IB-09 that planted bugs slipped through (bench/mutants on burnin/checks/hca.py).

Each test pins one decision: how long a node-reported value is quoted before it
is cut, how many HCAs a disagreement names before it says "and N more", a PCI
link that is not text, the smallest pkey table, and a port-1 record that is not
a record.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from checks_support import COMPUTE_HCAS, FAIL, INCOMPLETE, PASS, TOPOLOGY, assert_status, hca_bus, judge, pci
from test_checks_hca import FW, hca, pkey_table

NO_FIRMWARE = replace(TOPOLOGY, hca_firmware=None)


def test_an_unreadable_value_of_40_characters_is_quoted_whole(facts: dict[str, Any]) -> None:
    speed = "Unknown (link training did not finish)"  # its repr is 40 characters: the longest shown whole
    assert len(repr(speed)) == 40
    pci(facts, hca_bus("mlx5_4"))["current_link_speed"] = speed
    verdict = judge("IB-06", facts)
    assert_status(verdict, INCOMPLETE, f"mlx5_4: current_link_speed unreadable: {speed!r}")
    assert "..." not in verdict.reason


def test_an_unreadable_value_of_41_characters_is_cut_to_37_and_an_ellipsis(facts: dict[str, Any]) -> None:
    speed = "Unknown (link training did not finish)!"
    pci(facts, hca_bus("mlx5_4"))["current_link_speed"] = speed
    verdict = judge("IB-06", facts)
    shown = repr(speed)[:37] + "..."
    assert_status(verdict, INCOMPLETE, f"mlx5_4: current_link_speed unreadable: {shown}")
    assert repr(speed)[:38] not in verdict.reason


def test_a_firmware_split_names_three_hcas_in_full(facts: dict[str, Any]) -> None:
    for name in COMPUTE_HCAS[:3]:
        hca(facts, name)["fw_ver"] = "28.39.4082"
    verdict = judge("INV-09", facts, NO_FIRMWARE)
    assert_status(verdict, FAIL, f"28.39.4082 on mlx5_0, mlx5_1, mlx5_2 vs {FW} on the other 5")


@pytest.mark.parametrize("link", [42, ["0000:18:00.0"]])
def test_a_pci_link_that_is_not_text_is_incomplete_not_a_wrong_address(facts: dict[str, Any], link: object) -> None:
    hca(facts, "mlx5_1")["pci"] = link
    verdict = judge("INV-09", facts)
    assert_status(verdict, INCOMPLETE, "mlx5_1", "PCI function is unknown", f"device link unreadable: {link!r}")
    assert "not at its bus id" not in verdict.reason


def test_a_pkey_table_of_one_entry_is_read(facts: dict[str, Any]) -> None:
    table = pkey_table(facts, "mlx5_3")
    table.update(size=1, pkeys={"0": "0xffff"})
    assert_status(judge("IB-09", facts), PASS, "active_mtu 4096, pkeys 0xffff")
    table.update(pkeys={"0": "0x7fff"})
    assert_status(judge("IB-09", facts), FAIL, "mlx5_3 pkeys 0x7fff (limited)")


@pytest.mark.parametrize("ports", [None, "1: ACTIVE", {"1": None}, {"1": "4: ACTIVE"}])
def test_a_port_record_that_is_not_a_record_is_incomplete(facts: dict[str, Any], ports: object) -> None:
    hca(facts, "mlx5_6")["ports"] = ports
    verdict = judge("IB-09", facts)
    assert_status(verdict, INCOMPLETE, "mlx5_6: port None: the subnet manager sets MTU and partitions")


def test_a_storage_hcas_finding_does_not_claim_the_compute_firmware(facts: dict[str, Any]) -> None:
    """The per-HCA findings a verdict carries: storage HCAs are held to consistency, not to the compute golden."""
    verdict = judge("INV-09", facts)
    assert verdict.status is PASS
    expected = {f.subject: f.expected for f in verdict.findings}
    assert all(expected[name] == f"firmware {FW}, one PSID" for name in COMPUTE_HCAS), expected
    storage = [f for f in verdict.findings if f.subject not in COMPUTE_HCAS]
    assert len(storage) == 2 and all(f.expected == "" for f in storage), storage
