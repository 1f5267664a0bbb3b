"""The simulator's shim outputs and the parsers round-trip: parsing what a shim
prints gives back the state it rendered (healthy and with faults)."""

from __future__ import annotations

from typing import Any

import pytest

from burnin.errors import ParseError
from burnin.parsers.dmesg import parse_xid_events
from burnin.parsers.ibstat import parse_ibstat
from burnin.parsers.lspci import parse_lspci
from burnin.parsers.nvidia_smi import parse_nvlink, parse_smi_query, parse_topo_matrix

sim_smi = pytest.importorskip("burnin.sim.formats.nvidia_smi")
sim_dmesg = pytest.importorskip("burnin.sim.formats.dmesg")
sim_ibstat = pytest.importorskip("burnin.sim.formats.ibstat")
sim_lspci = pytest.importorskip("burnin.sim.formats.lspci")


def _state(*faults: str) -> Any:
    from burnin.sim.faults import parse_fault_spec
    from burnin.sim.inject import apply_faults
    from burnin.sim.state import healthy_state
    from burnin.topology.load import find_topology

    topology = find_topology("hgx-h100-8gpu")
    state = healthy_state(topology, "sim01")
    apply_faults(state, [parse_fault_spec(f, topology) for f in faults])
    return state


def test_healthy_node_round_trips() -> None:
    state = _state()
    q = parse_smi_query(sim_smi.query(state))
    assert [g.uuid for g in q.gpus] == [g.uuid for g in state.visible_gpus]
    assert [g.serial for g in q.gpus] == [g.serial for g in state.visible_gpus]
    assert [g.pci_bus_id for g in q.gpus] == [sim_smi.nvml_bus_id(g.bus_id) for g in state.visible_gpus]
    for parsed, gpu in zip(q.gpus, state.visible_gpus, strict=True):
        assert parsed.pcie_gen_current == gpu.pcie_gen_current
        assert parsed.link_width_current == gpu.pcie_width_current
        assert parsed.power_limit_w == gpu.power_enforced_mw / 1000
        assert parsed.remapped_rows is not None and parsed.remapped_rows.pending is gpu.remap_pending
        assert parsed.fabric_state == "Completed"
    topo = parse_topo_matrix(sim_smi.topo_matrix(state))
    assert len(topo.gpus) == len(state.visible_gpus) and topo.truncated is False
    assert set(topo.nic_names.values()) == {h.name for h in state.hcas}
    for gpu in state.visible_gpus:
        assert topo.cpu_affinity[f"GPU{gpu.index}"] == gpu.cpulist
        assert topo.numa_affinity[f"GPU{gpu.index}"] == gpu.numa_node
    links = parse_nvlink(sim_smi.nvlink_status(state))
    assert all(len(g.links) == 18 and all(lk.active for lk in g.links) for g in links.gpus)
    ib = parse_ibstat(sim_ibstat.ibstat(state))
    assert {c.name for c in ib.cas} == {h.name for h in state.hcas} and ib.errors == ()
    lspci = parse_lspci(sim_lspci.vvv(state))
    addresses = {d.address for d in lspci.devices}
    assert {g.bus_id for g in state.visible_gpus} <= addresses
    assert parse_xid_events(sim_dmesg.dmesg(state)).events == ()


@pytest.mark.parametrize("fmt", ["plain", "ctime", "notime", "iso"])
def test_xid_fault_in_every_dmesg_format(fmt: str) -> None:
    state = _state("xid:79@gpu2")
    events = parse_xid_events(sim_dmesg.dmesg(state, fmt)).events
    assert [e.xid for e in events] == [79]
    assert state.gpu("gpu2").bus_id.startswith(events[0].pci)
    assert (events[0].timestamp is None) == (fmt == "notime")


def test_hardware_faults_are_read_back() -> None:
    state = _state("row-remap-pending@gpu1", "pcie-gen4@gpu3", "nvlink-down@gpu5", "ib-rate-200@mlx5_6")
    q = parse_smi_query(sim_smi.query(state))
    by_bus = {g.pci_bus_id: g for g in q.gpus}
    remap = by_bus[sim_smi.nvml_bus_id(state.gpu("gpu1").bus_id)].remapped_rows
    assert remap is not None and remap.pending is True
    assert by_bus[sim_smi.nvml_bus_id(state.gpu("gpu3").bus_id)].pcie_gen_current == 4
    gpu3 = next(d for d in parse_lspci(sim_lspci.vvv(state)).devices if d.address == state.gpu("gpu3").bus_id)
    assert gpu3.lnksta_speed_gts == 16.0 and gpu3.lnksta_downgraded is True
    limits = parse_xid_events(sim_dmesg.dmesg(state)).pcie_limits
    assert limits and limits[0].limited_speed_gts == 16.0
    nvlink = parse_nvlink(sim_smi.nvlink_status(state))
    down = [(g.index, lk.link) for g in nvlink.gpus for lk in g.links if lk.active is False]
    assert down == [(5, 7)]
    rates = {c.name: c.ports[0].rate_gbps for c in parse_ibstat(sim_ibstat.ibstat(state)).cas}
    assert rates["mlx5_6"] == 200.0 and rates["mlx5_0"] == 400.0


def test_lost_gpu_message_is_a_parse_error_that_quotes_it() -> None:
    # With a GPU off the bus nvidia-smi prints only this message (and exits 15).
    state = _state("gpu-lost@gpu4")
    lost = sim_smi.lost_message(state)
    assert lost is not None
    with pytest.raises(ParseError, match="GPU is lost"):
        parse_smi_query(lost)
    for parse in (parse_topo_matrix, parse_nvlink):
        with pytest.raises(ParseError):
            parse(lost)
    # Printed among other GPUs' sections, the line is kept in ``errors``.
    q = parse_smi_query(lost + sim_smi.query(state))
    assert len(q.gpus) == 8 and any("GPU is lost" in e for e in q.errors)
