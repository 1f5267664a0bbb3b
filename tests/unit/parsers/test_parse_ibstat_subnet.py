"""The subnet manager in real ``ibstat`` / ``ibstatus`` outputs (IB-05): ``SM lid`` and ``Base lid`` per port.

``ibstat`` prints both LIDs in decimal (``SM lid: 1``), ``ibstatus`` and sysfs in hex (``sm lid: 0x1``);
an InfiniBand port swept by a subnet manager shows non-zero values, a RoCE port 0 for both. IB-05 itself
reads sysfs; the last tests carry a real node's ibstat values into sysfs form and judge them.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from burnin.checks import load_all
from burnin.evaluate.verdict import Status
from burnin.facts import Facts
from burnin.parsers.ibstat import IbCa, parse_ibstat, parse_ibstatus
from burnin.topology.load import find_topology

H100_IB = "infiniband/ibstat-h100-cx7-ndr400-ib-8port-all-active.txt"
H100_ROCE = "infiniband/ibstat-h100-cx7-roce400-some-ports-down.txt"
A100_PANIC = "infiniband/ibstat-a100-cx6-ibpanic-exit255.txt"
A100_STATUS = "infiniband/ibstatus-a100-cx6-hdr200-azure.txt"


def _cas(reference_dir: Path, name: str) -> tuple[IbCa, ...]:
    return parse_ibstat((reference_dir / name).read_text(encoding="utf-8")).cas


def test_h100_infiniband_ports_name_one_subnet_manager(reference_dir: Path) -> None:
    cas = _cas(reference_dir, H100_IB)
    ib = [ca for ca in cas if ca.ports[0].link_layer == "InfiniBand"]
    assert [ca.name for ca in ib] == ["mlx5_0", "mlx5_1", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9"]
    assert {ca.ports[0].sm_lid for ca in ib} == {1}
    assert [ca.ports[0].base_lid for ca in ib] == [128, 534, 972, 1775, 1494, 717, 774, 2015]
    (bond,) = [ca for ca in cas if ca.ports[0].link_layer == "Ethernet"]
    assert (bond.name, bond.ports[0].base_lid, bond.ports[0].sm_lid) == ("mlx5_bond_0", 0, 0)


def test_roce_ports_have_no_subnet_manager(reference_dir: Path) -> None:
    cas = _cas(reference_dir, H100_ROCE)
    assert len(cas) == 12
    assert {(ca.ports[0].link_layer, ca.ports[0].base_lid, ca.ports[0].sm_lid) for ca in cas} == {("Ethernet", 0, 0)}


def test_a_panicked_run_still_reports_the_sm_of_the_ports_it_listed(reference_dir: Path) -> None:
    report = parse_ibstat((reference_dir / A100_PANIC).read_text(encoding="utf-8"))
    assert len(report.cas) == 8 and report.errors
    assert {ca.ports[0].sm_lid for ca in report.cas} == {1}
    assert all(ca.ports[0].base_lid for ca in report.cas)


def test_ibstatus_prints_the_lids_in_hex_as_sysfs_does(reference_dir: Path) -> None:
    ports = parse_ibstatus((reference_dir / A100_STATUS).read_text(encoding="utf-8")).ports
    ib = [p for p in ports if p.link_layer == "InfiniBand"]
    assert len(ib) == 8 and {p.sm_lid for p in ib} == {"0x1"}
    assert ib[0].base_lid == "0x33bf"
    (eth,) = [p for p in ports if p.link_layer == "Ethernet"]
    assert (eth.device, eth.base_lid, eth.sm_lid) == ("mlx5_8", "0x0", "0x0")


def _as_sysfs(cas: list[IbCa], names: list[str]) -> dict[str, Any]:
    """The facts IB-05 reads, with each real port's values as sysfs prints them, under the topology's names."""
    hcas = {name: {"ports": {"1": {"link_layer": ca.ports[0].link_layer, "phys_state": "5: LinkUp",
                                   "state": "4: ACTIVE", "lid": f"0x{ca.ports[0].base_lid:x}",
                                   "sm_lid": f"0x{ca.ports[0].sm_lid:x}"}}}
            for name, ca in zip(names, cas, strict=True)}
    return {"sources": {"infiniband": {"ok": True, "error": None}}, "infiniband": {"hcas": hcas, "present": True}}


def test_a_real_h100_nodes_subnet_manager_passes_ib05(reference_dir: Path) -> None:
    topology = find_topology("hgx-h100-8gpu")
    ib = [ca for ca in _cas(reference_dir, H100_IB) if ca.ports[0].link_layer == "InfiniBand"]
    data = _as_sysfs(ib, [h.name for h in topology.compute_hcas])
    verdict = load_all()["IB-05"].func(Facts("h100", data), topology)
    assert verdict.status is Status.PASS, verdict.reason
    assert verdict.measured == "8 compute ports with a LID, SM LID 0x1"


def test_a_real_roce_nodes_ports_are_not_judged_by_ib05(reference_dir: Path) -> None:
    topology = find_topology("hgx-h100-8gpu")
    roce = replace(topology, hcas=tuple(replace(h, link_layer="Ethernet") for h in topology.hcas))
    ports = _cas(reference_dir, H100_ROCE)[:8]
    data = _as_sysfs(list(ports), [h.name for h in roce.compute_hcas])
    verdict = load_all()["IB-05"].func(Facts("roce", data), roce)
    assert verdict.status is Status.INCOMPLETE  # never a pass: nothing was judged (the topology declares N/A)
    assert "no compute InfiniBand port to judge" in verdict.reason
