"""Every real output under ../shared/reference parses, with asserted values.

``TOOL_RULES`` (conftest) picks the parser from the folder and file name, so a
file added later to a known folder is covered by
``test_every_reference_file_parses`` without editing this test; a file no rule
maps fails that test.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from burnin.errors import ParseError
from burnin.parsers import PARSERS, parse, to_jsonable
from burnin.parsers.cpu import parse_lscpu
from burnin.parsers.dcgmi import parse_dcgmi_diag
from burnin.parsers.dmesg import parse_xid_events
from burnin.parsers.ibstat import parse_ibstat, parse_ibstatus
from burnin.parsers.lspci import parse_lspci
from burnin.parsers.megatron import parse_megatron_log
from burnin.parsers.nccl_tests import parse_nccl_tests
from burnin.parsers.nvbandwidth import parse_nvbandwidth, parse_p2p_bandwidth
from burnin.parsers.nvidia_smi import (
    numeric,
    parse_nvlink,
    parse_query_csv,
    parse_smi_query,
    parse_topo_matrix,
)

# Files whose content is a failed tool run the parser must reject. (None today:
# the ibstat "ibpanic exit255" file still lists 8 complete adapters before the
# panic, so it parses, with the panic line in ``errors``; see its test below.)
EXPECTED_PARSE_ERRORS: frozenset[str] = frozenset()


def test_rules_name_registered_tools(tool_rules: list[tuple[str, str, str]]) -> None:
    assert {tool for _, _, tool in tool_rules} <= set(PARSERS)


def test_reference_dir_present(ref_dir: Path) -> None:
    assert any(p.is_file() for p in ref_dir.rglob("*"))


def test_every_reference_file_parses(
    reference_file: Path, ref_dir: Path, tool_of: Callable[[Path], str | None]
) -> None:
    rel = reference_file.relative_to(ref_dir).as_posix()
    tool = tool_of(reference_file)
    assert tool is not None, f"{rel}: no parser rule matches; add one to TOOL_RULES in conftest"
    text = reference_file.read_text(encoding="utf-8", errors="replace")
    if rel in EXPECTED_PARSE_ERRORS:
        with pytest.raises(ParseError):
            parse(tool, text)
        return
    record = parse(tool, text)
    data = to_jsonable(record)
    json.dumps(data, allow_nan=False)  # strict JSON: no NaN leaks
    assert isinstance(data, dict) and data


CHECKS: dict[str, Callable[[str], None]] = {}


def check(rel: str) -> Callable[[Callable[[str], None]], Callable[[str], None]]:
    def register(func: Callable[[str], None]) -> Callable[[str], None]:
        CHECKS[rel] = func
        return func

    return register


# ----------------------------------------------------------------------------- nccl-tests


@check("nccl-tests/all_reduce_perf-h100-dell-xe9680-2node-16gpu-ndr400.txt")
def _nccl_dell(text: str) -> None:
    run = parse_nccl_tests(text)
    assert run.collective == "all_reduce"
    assert run.nranks == 16
    assert {r.host for r in run.ranks} == {"bm-h100-01", "bm-h100-02"}
    assert run.ranks[15].bus_id == "0000:db:00" and run.ranks[15].device == 7
    assert len(run.rows) == 32
    assert run.rows[0].size_bytes == 8 and run.rows[-1].size_bytes == 17179869184
    assert run.rows[-1].redop == "sum" and run.rows[-1].root == -1 and run.rows[-1].dtype == "float"
    peak = max(r.out_of_place.busbw_gbps or 0.0 for r in run.rows)
    assert peak == 469.21
    assert run.max_busbw_gbps == 469.21
    assert run.rows[-1].in_place.busbw_gbps == 469.10
    assert run.rows[-1].out_of_place.time_us == 68652
    assert run.avg_busbw_gbps == 139.56
    assert run.out_of_bounds == 0
    assert run.nccl_version == "2.26.2+cuda12.8"
    assert run.warnings == ()  # the Open MPI help chatter is not a warning
    assert run.truncated is False
    assert all(r.out_of_place.wrong == 0 and r.in_place.wrong == 0 for r in run.rows)


@check("nccl-tests/all_reduce_perf-h100-8node-64gpu-underperforming.txt")
def _nccl_8node(text: str) -> None:
    run = parse_nccl_tests(text)
    assert run.collective == "all_reduce" and run.nranks == 64
    assert len({r.host for r in run.ranks}) == 8
    assert {r.bus_id for r in run.ranks if r.device == 4} == {"0001:1b:00"}
    assert len(run.rows) == 14
    eight_mib = next(r for r in run.rows if r.size_bytes == 8388608)
    assert eight_mib.out_of_place.time_us == 1272.4  # the outlier row
    assert eight_mib.in_place.time_us == 321.4
    assert run.rows[-1].out_of_place.busbw_gbps == 320.70
    assert run.avg_busbw_gbps == 183.055
    assert run.truncated is False


@check("nccl-tests/all_reduce_perf-h100-gcp-a3mega-2node-16gpu.txt")
def _nccl_gcp(text: str) -> None:
    run = parse_nccl_tests(text)
    assert run.collective == "all_reduce" and run.nranks == 16
    assert run.ranks[8].host == "ztan-mig-gq73"
    assert run.rows[-1].size_bytes == 8589934592
    assert run.rows[-1].out_of_place.busbw_gbps == 338.82
    assert run.avg_busbw_gbps == 70.742
    assert run.params["maxBytes"] == "8589934592" and run.params["iters"] == "20"


# ----------------------------------------------------------------------------- nvidia-smi topo


@check("nvidia-smi/topo-m-dgx-h200-8gpu-12nic-tabs.txt")
def _topo_h200(text: str) -> None:
    topo = parse_topo_matrix(text)
    assert topo.gpus == tuple(f"GPU{i}" for i in range(8))
    assert topo.nics == tuple(f"NIC{i}" for i in range(12))
    assert topo.links["GPU0"]["GPU1"] == "NV18" and topo.links["GPU3"]["GPU3"] == "X"
    assert topo.links["GPU0"]["NIC0"] == "PXB" and topo.links["GPU1"]["NIC3"] == "PXB"
    assert topo.links["NIC1"]["NIC2"] == "PIX"
    assert topo.links["NIC11"]["GPU7"] == "PXB"
    assert topo.cpu_affinity["GPU0"] == "0-55,112-167"
    assert topo.cpu_affinity["GPU7"] == "56-111,168-223"
    assert topo.numa_affinity == {f"GPU{i}": (0 if i < 4 else 1) for i in range(8)}
    assert topo.gpu_numa_id["GPU0"] is None  # "N/A", after an empty tab cell
    assert topo.nic_names["NIC11"] == "mlx5_11"
    assert topo.truncated is False
    assert set(topo.links) == set(topo.gpus) | set(topo.nics)


@check("nvidia-smi/topo-m-a100-sxm4-40g-8gpu-10nic-epyc7742-tabs.txt")
def _topo_a100_tabs(text: str) -> None:
    topo = parse_topo_matrix(text)
    assert len(topo.gpus) == 8 and len(topo.nics) == 10
    assert topo.links["GPU0"]["GPU7"] == "NV12"
    assert topo.links["GPU6"]["NIC6"] == "PXB" and topo.links["NIC8"]["NIC9"] == "PIX"
    assert topo.numa_affinity["GPU0"] == 3 and topo.numa_affinity["GPU4"] == 7
    assert topo.cpu_affinity["GPU4"] == "112-127,240-255"
    assert "NIC0" not in topo.cpu_affinity  # NIC rows end with empty tab cells
    assert topo.nic_names["NIC9"] == "mlx5_9"
    assert topo.truncated is False


@check("nvidia-smi/topo-m-h100-8gpu-8nic-sglang-issue30401.txt")
def _topo_sglang(text: str) -> None:
    topo = parse_topo_matrix(text)
    assert len(topo.gpus) == 8 and len(topo.nics) == 8
    for i in range(8):
        assert topo.links[f"GPU{i}"][f"NIC{i}"] == "PIX"
    assert topo.cpu_affinity["GPU5"] == "48-95,144-191"
    assert topo.numa_affinity["GPU5"] == 1
    assert topo.nic_names == {f"NIC{i}": f"mlx5_{i}" for i in range(8)}


@check("nvidia-smi/topo-m-h100-8gpu-no-nics-mlengineering.txt")
def _topo_h100_nonic(text: str) -> None:
    topo = parse_topo_matrix(text)
    assert topo.nics == () and topo.nic_names == {}
    assert topo.links["GPU7"]["GPU0"] == "NV18"
    assert topo.cpu_affinity["GPU4"] == "52-103" and topo.numa_affinity["GPU4"] == 1
    assert topo.truncated is False


@check("nvidia-smi/topo-m-a100-8gpu-no-nics-mlengineering.txt")
def _topo_a100_nonic(text: str) -> None:
    topo = parse_topo_matrix(text)
    # The published excerpt stops after the GPU6 row: 8 columns, 7 rows.
    assert len(topo.gpus) == 8
    assert "GPU7" not in topo.links and topo.links["GPU6"]["GPU7"] == "NV12"
    assert topo.truncated is True
    assert topo.cpu_affinity["GPU6"] == "24-47"


# ----------------------------------------------------------------------------- nvidia-smi -q


@check("nvidia-smi/q-full-h100-8gpu-driver535.161.08.txt")
def _q_161(text: str) -> None:
    q = parse_smi_query(text)
    assert q.driver_version == "535.161.08" and q.cuda_version == "12.2"
    assert q.attached_gpus == 8 and len(q.gpus) == 8
    g = q.gpus[0]
    assert g.pci_bus_id == "00000000:19:00.0"
    assert g.product_name == "NVIDIA H100 80GB HBM3"
    assert g.serial == "1650124031592"
    assert g.uuid == "GPU-ee7954ec-da95-fd7a-ddfd-c6b32cc2f8aa"
    assert g.vbios_version == "96.00.74.00.0D"
    assert (g.pcie_gen_current, g.pcie_gen_max, g.link_width_current, g.link_width_max) == (
        5,
        5,
        16,
        16,
    )
    assert g.pcie_replays == 67
    assert g.clock_event_reasons is not None
    assert g.clock_event_reasons["HW Power Brake Slowdown"] is True
    assert g.clock_event_reasons["HW Slowdown"] is True
    assert g.clock_event_reasons["HW Thermal Slowdown"] is False
    assert g.ecc_mode_current == "Enabled"
    assert g.ecc_aggregate is not None and g.ecc_aggregate.uncorrectable_total == 0
    assert g.ecc_aggregate.sram_uncorrectable_parity == 0
    assert g.ecc_aggregate.sram_threshold_exceeded is False
    assert g.retired_pages is not None and g.retired_pages.single_bit_ecc is None  # N/A
    assert g.remapped_rows is not None
    assert g.remapped_rows.pending is False and g.remapped_rows.histogram["Max"] == 2560
    assert g.temperature is not None and g.temperature.gpu_c == 29
    assert g.temperature.slowdown_tlimit_c == -2 and g.temperature.shutdown_tlimit_c == -8
    assert g.power_limit_w == 700.0 and g.power_draw_w == 67.74
    assert (g.fabric_state, g.fabric_status) == ("Completed", "Success")
    assert g.persistence_mode == "Enabled" and g.mig_mode_current == "Disabled"
    # Every GPU of this node reports the power brake (SOURCES.md says only GPU0).
    assert all((x.clock_event_reasons or {}).get("HW Power Brake Slowdown") for x in q.gpus)
    assert len({x.serial for x in q.gpus}) == 8


@check("nvidia-smi/q-full-h100-8gpu-driver535.183.01.txt")
def _q_183(text: str) -> None:
    q = parse_smi_query(text)
    assert q.driver_version == "535.183.01" and len(q.gpus) == 8
    g = q.gpus[0]
    assert g.pci_bus_id == "00000000:53:00.0" and g.module_id == 7
    assert g.pcie_gen_host_max is None  # "N/A" in this driver
    assert g.clock_event_reasons is not None and g.clock_event_reasons["Idle"] is True
    assert g.pcie_replays == 120
    capped = [x for x in q.gpus if (x.clock_event_reasons or {}).get("SW Power Cap")]
    assert [x.pci_bus_id for x in capped] == [q.gpus[2].pci_bus_id]
    reasons = capped[0].clock_event_reasons or {}
    assert reasons["SW Thermal Slowdown"] and reasons["HW Power Brake Slowdown"]
    assert all(x.fabric_state == "Completed" for x in q.gpus)
    assert all(x.ecc_volatile is not None and x.ecc_volatile.uncorrectable_total == 0 for x in q.gpus)


@check("nvidia-smi/q-d-page_retirement-8gpu-bad-azure-nhc.txt")
def _q_pr_bad(text: str) -> None:
    q = parse_smi_query(text)
    assert q.driver_version == "535.86.10" and len(q.gpus) == 8
    pages = [g.retired_pages for g in q.gpus]
    assert all(p is not None for p in pages)
    assert [(p.single_bit_ecc, p.double_bit_ecc, p.pending) for p in pages if p] == [
        (60, 5, False),
        (2, 61, True),
        (0, 0, False),
        (6, 0, True),
        (0, 0, False),
        (20, 45, True),
        (0, 0, False),
        (8, 56, True),
    ]
    assert q.gpus[0].ecc_volatile is None and q.gpus[0].temperature is None  # not printed


@check("nvidia-smi/q-d-page_retirement-8gpu-good-azure-nhc.txt")
def _q_pr_good(text: str) -> None:
    q = parse_smi_query(text)
    assert [g.pci_bus_id for g in q.gpus] == [f"0000000{i}:00:00.0" for i in range(1, 9)]
    assert all(
        g.retired_pages is not None
        and g.retired_pages.single_bit_ecc == 0
        and g.retired_pages.double_bit_ecc == 0
        and g.retired_pages.pending is False
        for g in q.gpus
    )


@check("nvidia-smi/q-ecc-remapped-rows-a100-xid63-snippet.txt")
def _q_remap(text: str) -> None:
    q = parse_smi_query(text)
    assert q.driver_version == "510.73.08" and q.attached_gpus == 8 and len(q.gpus) == 1
    g = q.gpus[0]
    assert g.pci_bus_id == "00000000:10:1C.0" and g.product_name == "NVIDIA A100-SXM4-80GB"
    assert g.ecc_volatile is not None and g.ecc_volatile.dram_correctable == 177
    assert g.ecc_volatile.sram_uncorrectable == 0
    assert g.remapped_rows is not None
    assert g.remapped_rows.correctable == 1 and g.remapped_rows.uncorrectable == 0
    assert g.remapped_rows.pending is True and g.remapped_rows.failure is False
    assert g.remapped_rows.histogram == {"Max": 639, "High": 1, "Partial": 0, "Low": 0, "None": 0}
    assert g.retired_pages is not None and g.retired_pages.pending is None


@check("nvidia-smi/q-ecc-sram-uncorrectable-snippet.txt")
def _q_sram(text: str) -> None:
    q = parse_smi_query(text)
    assert len(q.gpus) == 1 and q.gpus[0].pci_bus_id is None and q.driver_version is None
    g = q.gpus[0]
    assert g.ecc_volatile is not None and g.ecc_aggregate is not None
    assert g.ecc_volatile.sram_uncorrectable == 1 and g.ecc_aggregate.sram_uncorrectable == 5
    assert g.ecc_aggregate.uncorrectable_total == 5 and g.ecc_aggregate.correctable_total == 0


# ----------------------------------------------------------------------------- nvlink / csv


@check("nvidia-smi/nvlink-status-h100-snippet.txt")
def _nvlink_h100(text: str) -> None:
    rep = parse_nvlink(text)
    assert len(rep.gpus) == 1 and rep.elided is True
    g = rep.gpus[0]
    assert g.index == 0 and g.name == "NVIDIA H100 80GB HBM3"
    assert g.uuid == "GPU-abcdefab-cdef-abdc-abcd-abababababab"
    assert [(lk.link, lk.speed_gbps, lk.active) for lk in g.links] == [
        (0, 26.562, True),
        (17, 26.562, True),
    ]


@check("nvidia-smi/nvlink-status-a100-good-azure-nhc.txt")
def _nvlink_a100_good(text: str) -> None:
    g = parse_nvlink(text).gpus[0]
    assert g.index == 7 and len(g.links) == 12
    assert all(lk.speed_gbps == 25.0 and lk.active for lk in g.links)
    assert g.all_links_inactive is False and g.message is None


@check("nvidia-smi/nvlink-status-a100-all-links-inactive-azure-nhc.txt")
def _nvlink_a100_bad(text: str) -> None:
    g = parse_nvlink(text).gpus[0]
    assert g.index == 6 and g.links == () and g.all_links_inactive is True
    assert g.message is not None and "all links are inactive" in g.message


@check("nvidia-smi/nvlink-e-errors-h100-snippet.txt")
def _nvlink_e(text: str) -> None:
    rep = parse_nvlink(text)
    g = rep.gpus[0]
    assert [lk.link for lk in g.links] == [0, 1, 17] and rep.elided is True
    for lk in g.links:
        assert lk.errors == {"Replay Errors": 0, "Recovery Errors": 0, "CRC Errors": 0}
        assert lk.active is None and lk.speed_gbps is None


@check("nvidia-smi/query-gpu-pcie-gen-width-max-h200-csv.txt")
def _csv_h200(text: str) -> None:
    q = parse_query_csv(text)
    assert q.columns == ("name", "memory.total", "pcie.link.gen.max", "pcie.link.width.max")
    assert q.units["memory.total"] == "MiB" and q.units["name"] is None
    assert len(q.rows) == 8
    assert q.rows[0] == {
        "name": "NVIDIA H200",
        "memory.total": "143771 MiB",
        "pcie.link.gen.max": "5",
        "pcie.link.width.max": "16",
    }
    assert numeric(q.rows[7]["memory.total"]) == 143771.0


@check("nvidia-smi/query-gpu-vbios-h100-csv-snippet.txt")
def _csv_vbios(text: str) -> None:
    q = parse_query_csv(text)
    assert q.columns == ("name", "pci.bus_id", "vbios_version")
    assert [r["pci.bus_id"] for r in q.rows] == ["00000000:04:00.0", "00000000:8B:00.0"]
    assert {r["vbios_version"] for r in q.rows} == {"96.00.89.00.01"}


# ----------------------------------------------------------------------------- infiniband


@check("infiniband/ibstat-h100-cx7-ndr400-ib-8port-all-active.txt")
def _ibstat_ndr(text: str) -> None:
    rep = parse_ibstat(text)
    assert [c.name for c in rep.cas] == [
        "mlx5_0",
        "mlx5_1",
        "mlx5_4",
        "mlx5_5",
        "mlx5_6",
        "mlx5_7",
        "mlx5_8",
        "mlx5_9",
        "mlx5_bond_0",
    ]
    ib = [c for c in rep.cas if c.type == "MT4129"]
    assert len(ib) == 8 and {c.firmware for c in ib} == {"28.41.1000"}
    for ca in ib:
        (port,) = ca.ports
        assert (port.port, port.state, port.physical_state) == (1, "Active", "LinkUp")
        assert port.rate_gbps == 400.0 and port.link_layer == "InfiniBand"
    bond = rep.cas[-1]
    assert bond.type == "MT41692" and bond.ports[0].rate_gbps == 200.0
    assert bond.ports[0].link_layer == "Ethernet"
    assert rep.errors == ()


@check("infiniband/ibstat-h100-cx7-roce400-some-ports-down.txt")
def _ibstat_roce(text: str) -> None:
    rep = parse_ibstat(text)
    assert len(rep.cas) == 12
    down = {c.name: c.ports[0] for c in rep.cas if c.ports[0].state != "Active"}
    assert set(down) == {"mlx5_5", "mlx5_11"}
    assert down["mlx5_11"].physical_state == "Polling" and down["mlx5_11"].rate_gbps == 40.0
    assert down["mlx5_5"].physical_state == "Disabled"
    assert {c.ports[0].link_layer for c in rep.cas} == {"Ethernet"}
    assert sum(1 for c in rep.cas if c.type == "MT4125") == 4


@check("infiniband/ibstat-a100-cx6-ibpanic-exit255.txt")
def _ibstat_panic(text: str) -> None:
    # ibstat died (exit 255) when it reached mlx5_8; the 8 adapters before it are
    # complete, so they are kept, and the panic is reported in ``errors`` so a
    # check can call the inventory incomplete instead of trusting it.
    rep = parse_ibstat(text)
    assert [c.name for c in rep.cas] == [f"mlx5_{i}" for i in range(8)]
    assert all(c.type == "MT4124" and c.ports[0].rate_gbps == 200.0 for c in rep.cas)
    assert len(rep.errors) == 1 and rep.errors[0].startswith("ibpanic:")
    assert "mlx5_8" in rep.errors[0]


@check("infiniband/ibstatus-a100-cx6-hdr200-azure.txt")
def _ibstatus(text: str) -> None:
    rep = parse_ibstatus(text)
    assert len(rep.ports) == 9
    first = rep.ports[0]
    assert (first.device, first.port, first.state, first.state_code) == ("mlx5_0", 1, "ACTIVE", 4)
    assert first.physical_state == "LinkUp" and first.physical_state_code == 5
    assert first.rate_gbps == 200.0 and first.rate_text == "4X HDR"
    assert first.link_layer == "InfiniBand" and first.base_lid == "0x33bf"
    last = rep.ports[-1]
    assert last.device == "mlx5_8" and last.rate_gbps == 40.0 and last.link_layer == "Ethernet"


# ----------------------------------------------------------------------------- lspci


@check("lspci/lspci-vvv-full-hgx-h100-8gpu-cx7-pex890xx.txt")
def _lspci_full(text: str) -> None:
    rep = parse_lspci(text)
    assert len(rep.devices) == 517
    gpus = [d for d in rep.devices if d.name == "NVIDIA Corporation Device 2330"]
    assert [d.address for d in gpus] == [
        "0000:19:00.0",
        "0000:3b:00.0",
        "0000:4c:00.0",
        "0000:5d:00.0",
        "0000:9b:00.0",
        "0000:bb:00.0",
        "0000:cb:00.0",
        "0000:db:00.0",
    ]
    for d in gpus:
        assert (d.lnksta_speed_gts, d.lnksta_width, d.lnksta_downgraded) == (32.0, 16, False)
        assert d.device_class == "3D controller" and d.kernel_driver == "nvidia"
    assert [d.numa_node for d in gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    cx7 = [d for d in rep.devices if "ConnectX-7" in d.name]
    assert len(cx7) == 8 and all(d.lnksta_speed_gts == 32.0 for d in cx7)
    assert sum(d.lnksta_downgraded for d in rep.devices) == 16
    assert not any(d.lnksta_downgraded for d in gpus + cx7)
    acs_off = [d for d in rep.devices if d.acs_ctl and not any(d.acs_ctl.values())]
    assert len(acs_off) == 49
    acs_on = [d for d in rep.devices if d.acs_ctl and d.acs_ctl.get("ReqRedir")]
    assert len(acs_on) == 4
    assert all(d.acs_ctl and d.acs_ctl["CmpltRedir"] and d.acs_ctl["UpstreamFwd"] for d in acs_on)
    nvswitch = [d for d in rep.devices if d.name == "NVIDIA Corporation Device 22a3"]
    assert len(nvswitch) == 4


@check("lspci/lspci-vvv-h100-sxm5-gpu-19_00.0.txt")
def _lspci_gpu(text: str) -> None:
    (d,) = parse_lspci(text).devices
    assert d.address == "0000:19:00.0" and d.revision == "a1" and d.numa_node == 0
    assert (d.lnkcap_speed_gts, d.lnkcap_width) == (32.0, 16)
    assert (d.lnksta_speed_gts, d.lnksta_width, d.lnksta_downgraded) == (32.0, 16, False)
    assert d.port_type == "Endpoint" and d.acs_cap is None and d.acs_ctl is None


@check("lspci/lspci-vvv-connectx7-1a_00.0.txt")
def _lspci_cx7(text: str) -> None:
    (d,) = parse_lspci(text).devices
    assert d.address == "0000:1a:00.0" and d.device_class == "Ethernet controller"
    assert d.name == "Mellanox Technologies MT2910 Family [ConnectX-7]"
    assert (d.lnksta_speed_gts, d.lnksta_width) == (32.0, 16) and d.kernel_driver == "mlx5_core"


@check("lspci/lspci-vvv-pex890xx-switch-downstream-port-acs-disabled.txt")
def _lspci_switch(text: str) -> None:
    (d,) = parse_lspci(text).devices
    assert d.address == "0000:17:01.0" and d.port_type == "Downstream Port"
    assert d.acs_cap is not None and d.acs_cap["SrcValid"] and not d.acs_cap["EgressCtrl"]
    assert d.acs_ctl == dict.fromkeys(
        (
            "SrcValid",
            "TransBlk",
            "ReqRedir",
            "CmpltRedir",
            "UpstreamFwd",
            "EgressCtrl",
            "DirectTrans",
        ),
        False,
    )
    assert (d.secondary_bus, d.subordinate_bus) == (0x19, 0x19) and d.physical_slot == "28"


# ----------------------------------------------------------------------------- dmesg


@check("dmesg/dmesg-T-xid119-gsp-rpc-timeout-h100.txt")
def _dmesg_119(text: str) -> None:
    rep = parse_xid_events(text)
    assert [e.xid for e in rep.events] == [119] * 5
    first = rep.events[0]
    assert first.pci == "0000:9b:00" and first.pid == 2024380 and first.process == "nvidia-smi"
    assert first.timestamp == "Sun Feb 23 16:24:18 2025"
    assert first.text.startswith("Timeout after 6s of waiting for RPC response from GPU4 GSP!")
    assert rep.events[-1].pid == 1240590 and rep.events[-1].process == "gpud"
    assert rep.gpu_uuids == {"0000:9b:00": "GPU-509665ad-b600-ac93-3616-d754b23d636d"}
    assert rep.sxid_events == ()


@check("dmesg/dmesg-decode-time-format-iso-xid13-and-misc.txt")
def _dmesg_iso(text: str) -> None:
    rep = parse_xid_events(text)
    assert len(rep.events) == 636
    assert sum(e.xid == 13 for e in rep.events) == 629
    assert sum(e.xid == 43 for e in rep.events) == 7
    assert {e.pci for e in rep.events} == {"0000:38:00"}
    first = rep.events[0]
    assert first.timestamp == "2025-01-21T02:21:33,498559+00:00" and first.pid is None
    assert first.text == ("Graphics SM Warp Exception on (GPC 8, TPC 5, SM 0): Out Of Range Address")
    xid43 = next(e for e in rep.events if e.xid == 43)
    assert xid43.pid == 2815167 and xid43.process == "pt_main_thread"
    assert xid43.text == "Ch 00000008"


@check("dmesg/xid63-row-remapper-a100.txt")
def _dmesg_63(text: str) -> None:
    (e,) = parse_xid_events(text).events
    assert (e.pci, e.xid, e.pid, e.timestamp) == ("0000:10:1c", 63, 1896, None)
    assert e.text == "Row Remapper: New row marked for remapping, reset gpu to activate."


@check("dmesg/pcie-limited-by-h100-gen4-switch.txt")
def _dmesg_pcie(text: str) -> None:
    rep = parse_xid_events(text)
    assert rep.events == ()
    assert [p.device for p in rep.pcie_limits] == ["0000:04:00.0", "0000:8b:00.0"]
    lim = rep.pcie_limits[0]
    assert (lim.available_gbps, lim.limited_speed_gts, lim.limited_width) == (252.048, 16.0, 16)
    assert (lim.capable_gbps, lim.capable_speed_gts, lim.limited_at) == (
        504.112,
        32.0,
        "0000:01:00.0",
    )
    assert lim.timestamp == "10.735323"


@check("dmesg/syslog-ib-link-flap-ndv4-azure-nhc.txt")
def _dmesg_flap(text: str) -> None:
    rep = parse_xid_events(text)
    assert rep.events == ()
    assert [e.up for e in rep.link_events] == [False] * 6 + [True] * 6
    assert {e.interface for e in rep.link_events} == {"ib6"}
    assert rep.link_events[0].timestamp == "Aug 17 06:18:01"


# ----------------------------------------------------------------------------- megatron


@check("megatron/mixtral-8x7b-16xh100-iterations-43-45-issue756.txt")
def _megatron_new(text: str) -> None:
    log = parse_megatron_log(text)
    assert [i.iteration for i in log.iterations] == [43, 44, 45]
    first = log.iterations[0]
    assert first.total == 100 and first.elapsed_ms == 5444.9 and first.tflops_per_gpu == 239.8
    assert first.lm_loss == pytest.approx(1.825991) and first.lr == pytest.approx(8.6e-6)
    assert first.loss_scale == 1.0 and first.grad_norm == 1.426
    assert first.skipped == 0 and first.nan == 0
    assert first.timestamp == "2024-04-06 02:59:36"
    assert first.extra["load_balancing_loss"] == "1.019746E+00"
    assert [i.tflops_per_gpu for i in log.iterations] == [239.8, 236.0, 228.4]
    assert log.truncated is False and log.skipped_total == 0 and log.nan_total == 0


@check("megatron/megatron-llm-iterations-122-125-no-throughput-field-issue11.txt")
def _megatron_old(text: str) -> None:
    log = parse_megatron_log(text)
    assert [i.iteration for i in log.iterations] == [122, 123, 124, 125]
    assert all(i.tflops_per_gpu is None and i.timestamp is None for i in log.iterations)
    last = log.iterations[-1]
    assert last.total == 250000 and last.elapsed_ms == 89075.2
    assert last.lr == pytest.approx(9.375e-6) and last.grad_norm == 0.356
    assert last.global_batch_size == 1024 and last.consumed_samples == 128000


# ----------------------------------------------------------------------------- cpu


@check("numa-lscpu/lscpu-hgx-h100-xeon-8462Y-2s-112cpu-truncated.txt")
def _lscpu(text: str) -> None:
    cpu = parse_lscpu(text)
    assert cpu.style == "tree"
    assert cpu.cpus == 112 and cpu.online_cpus == "0-111"
    assert (cpu.sockets, cpu.cores_per_socket, cpu.threads_per_core) == (2, 28, 2)
    assert cpu.model_name == "Intel(R) Xeon(R) Platinum 8462Y+"
    assert cpu.vendor_id == "GenuineIntel" and cpu.architecture == "x86_64"
    assert cpu.numa_nodes == {} and cpu.numa_node_count is None  # cut before the NUMA section


# ----------------------------------------------------------------------------- bandwidth


@check("nvbandwidth/d2d-memcpy-read-ce-a6000-6gpu-pcie-issue50.txt")
def _nvb_a6000(text: str) -> None:
    rep = parse_nvbandwidth(text)
    assert rep.version == "v0.8" and rep.driver_version == "580.95.05"
    (case,) = rep.testcases
    assert case.name == "device_to_device_memcpy_read_ce" and case.sum == 715.53
    assert case.columns == tuple(range(6)) and case.rows == tuple(range(6))
    assert all(case.matrix[i][i] is None for i in range(6))
    assert case.matrix[0][1] == 26.34 and case.matrix[5][4] == 26.35
    assert (case.row_kind, case.column_kind, case.unit) == ("GPU", "GPU", "GB/s")


@check("nvbandwidth/gb300-dgx-station-h2d-d2h-ce-mlengineering.txt")
def _nvb_gb300(text: str) -> None:
    rep = parse_nvbandwidth(text)
    assert [c.name for c in rep.testcases] == [
        "host_to_device_memcpy_ce",
        "device_to_host_memcpy_ce",
        "host_to_device_bidirectional_memcpy_ce",
        "device_to_host_bidirectional_memcpy_ce",
    ]
    assert [c.sum for c in rep.testcases] == [359.05, 377.15, 175.38, None]
    assert rep.testcases[1].matrix == ((377.15,),)


@check("nvbandwidth/h2d-d2h-memcpy-sm-h100-8gpu-issue24.txt")
def _nvb_h100(text: str) -> None:
    rep = parse_nvbandwidth(text)
    h2d, d2h = rep.testcases
    assert h2d.name == "host_to_device_memcpy_sm" and d2h.name == "device_to_host_memcpy_sm"
    assert h2d.columns == tuple(range(8)) and h2d.rows == (0,)
    assert min(v for v in h2d.matrix[0] if v) == 35.03 and max(v for v in h2d.matrix[0] if v) == 35.39
    assert d2h.matrix[0][3] == 52.78


@check("p2pBandwidthLatencyTest/p2p-unidir-writes-matrix-h100-8gpu.txt")
def _p2p_h100(text: str) -> None:
    (m,) = parse_p2p_bandwidth(text).matrices
    assert m.kind == "bandwidth" and m.p2p_enabled is True and m.bidirectional is False
    assert m.unit == "GB/s" and m.axis == "D\\D"
    assert m.matrix[0][0] == 2494.51 and m.matrix[7][7] == 2519.78
    off = [v for i, row in enumerate(m.matrix) for j, v in enumerate(row) if i != j and v]
    assert len(off) == 56 and min(off) == 363.43 and max(off) == 393.63


@check("p2pBandwidthLatencyTest/p2p-unidir-writes-matrix-a100-8gpu.txt")
def _p2p_a100(text: str) -> None:
    (m,) = parse_p2p_bandwidth(text).matrices
    assert m.columns == tuple(range(8)) and m.rows == tuple(range(8))
    assert m.matrix[2][2] == 1594.39 and m.matrix[5][3] == 270.84


# ----------------------------------------------------------------------------- dcgmi


@check("dcgmi/diag-r2-fragment-gpu-memory-fail-thermal.txt")
def _dcgmi_memory(text: str) -> None:
    diag = parse_dcgmi_diag(text)
    (test,) = diag.tests
    assert test.name == "GPU Memory" and test.result == "Fail"
    assert test.gpu_results == {"Pass": (1, 2, 3, 4, 5, 6, 7), "Fail": (0,)}
    (warning,) = diag.warnings
    # DCGM wraps at a fixed width mid-word; the chunks are joined back exactly.
    assert warning.startswith("GPU 0 Thermal violations totaling 13.3 seconds started at 9.7")
    assert "for GPU 0 Verify" in warning and warning.endswith("any other components.")
    assert diag.truncated is True


@check("dcgmi/diag-r3-fragment-row-remap-pending.txt")
def _dcgmi_remap(text: str) -> None:
    diag = parse_dcgmi_diag(text)
    assert diag.tests == ()  # the fragment starts at the Error row of an unnamed test
    assert diag.errors == ("GPU 3 has uncorrectable memory errors and row remappings are pending",)


@check("dcgmi/diag-r2-metadata-deployment-dcgm331-go-dcgm-issue52.txt")
def _dcgmi_meta(text: str) -> None:
    diag = parse_dcgmi_diag(text)
    assert diag.metadata == {
        "DCGM Version": "3.3.1",
        "Driver Version Detected": "535.129.03",
        "GPU Device IDs Detected": "1eb8",
    }
    assert len(diag.tests) == 7 and set(diag.results.values()) == {"Pass"}
    assert diag.results["Page Retirement/Row Remap"] == "Pass"
    assert {t.category for t in diag.tests} == {"Deployment"}
    assert diag.truncated is True  # cut after the Page Retirement row


@check("dcgmi/diag-r3-deployment-section-dcgm304-issue55.txt")
def _dcgmi_r3(text: str) -> None:
    diag = parse_dcgmi_diag(text)
    assert len(diag.tests) == 9 and diag.results["Inforom"] == "Pass"
    assert diag.errors == () and diag.warnings == ()
    assert diag.truncated is True  # ends at the Integration separator


# Defined last: CHECKS is filled by the @check functions above.
@pytest.mark.parametrize("rel", sorted(CHECKS), ids=str)
def test_asserted_values(rel: str, ref: Callable[[str], str]) -> None:
    CHECKS[rel](ref(rel))


def test_every_known_reference_file_has_checks(ref_dir: Path) -> None:
    """The asserted-values table names only files that exist (renames are caught)."""
    missing = [rel for rel in CHECKS if not (ref_dir / rel).is_file()]
    assert missing == []
