"""Fabric tools' real outputs from other machines (tests/field): the values a careful reader takes from each."""

from __future__ import annotations

import pytest
from field_samples import field_text

from burnin.errors import ParseError
from burnin.parsers._common import is_command_echo, is_elision, is_prompt
from burnin.parsers.ibdev2netdev import parse_ibdev2netdev
from burnin.parsers.ibstat import parse_ibstat, parse_ibstatus
from burnin.parsers.ibv_devinfo import parse_ibv_devinfo
from burnin.parsers.iproute import IpAddress, parse_ip_addr, parse_ip_link, parse_ip_route
from burnin.parsers.mlnx_qos import parse_mlnx_qos
from burnin.parsers.mlxconfig import parse_mlxconfig_query
from burnin.parsers.nccl_info import parse_nccl_info
from burnin.parsers.nccl_tests import NcclMeasure, parse_nccl_tests
from burnin.parsers.perftest import parse_perftest

# ------------------------------------------------------------------ mlnx_qos -i

DSCP_TWO_LINES = "mlnx-qos-dscp30-to-prio6-two-lines-roce-notes.txt"
NETARBITER = "mlnx-qos-trust-dscp-xtrace-att-netarbiter.txt"
DEFAULT_MAP = {p: tuple(range(8 * p + 7, 8 * p - 1, -1)) for p in range(8)}


def test_a_priority_continued_on_a_second_line_keeps_every_dscp() -> None:
    qos = parse_mlnx_qos(field_text(DSCP_TWO_LINES))
    assert qos.dscp_to_prio == {
        **DEFAULT_MAP,
        3: (31, 29, 28, 27, 26, 25, 24),
        6: (30, 55, 54, 53, 52, 51, 50, 49, 48),
    }
    assert sorted(d for values in qos.dscp_to_prio.values() for d in values) == list(range(64))
    assert (qos.dcbx_mode, qos.trust, qos.cable_len_m) == ("OS controlled", "dscp", 7)
    assert qos.pfc_enabled == (0, 0, 0, 1, 0, 0, 0, 0)
    assert qos.pfc_priorities == (3,)
    assert qos.pfc_buffer == (0, 2, 5, 7, 1, 2, 3, 6)
    assert qos.receive_buffer_bytes == (80256, 80256, 896, 80256, 896, 896, 896, 896)
    assert [(tc.tc, tc.tsa, tc.bw_percent, tc.priorities) for tc in qos.tcs][:2] == [
        (0, "vendor", None, (1,)), (1, "vendor", None, (0,))]


def test_older_ofed_without_buffer_rows_behind_a_trace_line() -> None:
    qos = parse_mlnx_qos(field_text(NETARBITER))
    assert qos.dscp_to_prio == DEFAULT_MAP
    assert qos.trust == "dscp" and qos.pfc_priorities == (3,)
    assert qos.pfc_buffer is None and qos.receive_buffer_bytes == ()
    assert len(qos.tcs) == 8 and all(tc.ratelimit == "unlimited" for tc in qos.tcs)


def test_two_reports_in_one_text_read_the_first_map_only() -> None:
    first, second = field_text(DSCP_TWO_LINES), field_text(NETARBITER)
    assert parse_mlnx_qos(first + second).dscp_to_prio == parse_mlnx_qos(first).dscp_to_prio


def test_two_reports_pasted_without_their_headers_are_refused_not_merged() -> None:
    body = [ln for ln in field_text(DSCP_TWO_LINES).splitlines() if "prio:" in ln and "dscp:" in ln]
    other = [ln for ln in field_text(NETARBITER).splitlines() if "prio:" in ln and "dscp:" in ln]
    text = "Priority trust state: dscp\n" + "\n".join(body + other) + "\n"
    with pytest.raises(ParseError, match=r"DSCP 7 is listed twice under priority 0"):
        parse_mlnx_qos(text)


def test_a_dscp_under_two_priorities_is_refused_not_guessed() -> None:
    text = "Priority trust state: dscp\ndscp2prio mapping:\n\tprio:3 dscp:30,26,\n\tprio:6 dscp:30,48,\n"
    with pytest.raises(ParseError, match="DSCP 30 is mapped to priorities 3 and 6"):
        parse_mlnx_qos(text)


def test_a_value_above_63_is_no_dscp() -> None:
    with pytest.raises(ParseError, match="DSCP 64 under priority 7"):
        parse_mlnx_qos("Priority trust state: dscp\ndscp2prio mapping:\n\tprio:7 dscp:64,\n")


def test_a_report_cut_before_its_pfc_table_keeps_its_trust_and_map() -> None:
    text = field_text(NETARBITER).split("PFC configuration:")[0]
    qos = parse_mlnx_qos(text)
    assert qos.trust == "dscp" and qos.dscp_to_prio == DEFAULT_MAP and qos.pfc_enabled is None


def test_one_pfc_flag_other_than_0_or_1_is_refused() -> None:
    text = field_text(NETARBITER).replace("enabled     0   0   0   1", "enabled     0   0   0   2")
    with pytest.raises(ParseError, match="PFC enabled row"):
        parse_mlnx_qos(text)


# ------------------------------------------------------------------ perftest

NEBIUS_SEND = "perftest-ib_send_bw-h100-nebius-ndr-spaces-skypilot.txt"


def test_settings_pasted_with_spaces_for_tabs_keep_both_columns() -> None:
    (report,) = parse_perftest(field_text(NEBIUS_SEND)).reports
    assert report.device == "mlx5_0"
    assert report.settings[:6] == (
        ("Dual-port", "OFF"), ("Device", "mlx5_0"), ("Number of qps", "1"), ("Transport type", "IB"),
        ("Connection type", "RC"), ("Using SRQ", "OFF"))
    assert report.setting("Link type") == "IB" and report.setting("Mtu") == "4096[B]"
    assert (report.test, report.kind, report.complete, report.cuda_device) == ("Send BW", "bw", True, None)
    (row,) = report.rows
    assert (row.size_bytes, row.iterations) == (65536, 1000)
    assert report.bw_unit == "Gb/sec"
    assert report.average_gbps(row) == pytest.approx(353.53)
    assert report.peak_gbps(row) == pytest.approx(357.12)


def test_settings_with_runs_of_spaces_collapsed_to_one_still_split() -> None:
    text = "\n".join(" " + " ".join(line.split()) for line in field_text(NEBIUS_SEND).splitlines())
    (report,) = parse_perftest(text).reports
    assert report.device == "mlx5_0"
    assert report.setting("Dual-port") == "OFF" and report.setting("Using SRQ") == "OFF"


def test_a_tos_after_the_exchange_method_is_its_own_setting() -> None:
    """perftest prints `` Data ex. method : rdma_cm \tTOS    : 106`` with -R -T (perftest_parameters.c)."""
    line = " Data ex. method : rdma_cm      TOS    : 106"
    text = field_text(NEBIUS_SEND).replace(" Data ex. method : Ethernet", line)
    (report,) = parse_perftest(text).reports
    assert report.setting("Data ex. method") == "rdma_cm" and report.setting("TOS") == "106"


# ------------------------------------------------------------------ nccl-tests

NEBIUS_NCCL = "nccl-tests-all_reduce-nebius-ib-vm-no-inplace-wrong-column-skypilot.txt"


def test_a_header_without_the_in_place_wrong_column_shifts_no_value() -> None:
    run = parse_nccl_tests(field_text(NEBIUS_NCCL))
    assert [r.size_bytes for r in run.rows] == [2**29, 2**30, 2**31, 2**32, 2**33]
    first, last = run.rows[0], run.rows[-1]
    assert (first.count, first.dtype, first.redop, first.root) == (134217728, "float", "sum", -1)
    assert first.out_of_place == NcclMeasure(2424.4, 221.45, 415.21, 0)
    assert first.in_place == NcclMeasure(2391.0, 224.53, 421.00, None)
    assert last.out_of_place == NcclMeasure(34430.0, 249.49, 467.79, 0)
    assert last.in_place == NcclMeasure(34443.0, 249.39, 467.61, None)
    assert (run.avg_busbw_gbps, run.max_busbw_gbps, run.out_of_bounds) == (450.146, 467.79, 0)
    assert run.truncated is False and run.nranks == 0 and run.collective is None


# ------------------------------------------------------------------ ibstatus, ibv_devinfo (ConnectX-3, FDR)


def test_ibstatus_of_a_dual_port_fdr_card() -> None:
    report = parse_ibstatus(field_text("ibstatus-cx3-fdr56-dual-port-heioy-books.txt"))
    assert [(p.device, p.port, p.state, p.state_code, p.physical_state, p.rate_gbps, p.rate_text, p.link_layer)
            for p in report.ports] == [
        ("mlx4_0", 1, "ACTIVE", 4, "LinkUp", 56.0, "4X FDR", "InfiniBand"),
        ("mlx4_0", 2, "ACTIVE", 4, "LinkUp", 56.0, "4X FDR", "InfiniBand")]
    assert [(p.base_lid, p.sm_lid) for p in report.ports] == [("0x3", "0x3"), ("0x2", "0x2")]
    assert report.ports[1].default_gid == "fe80:0000:0000:0000:0002:c903:00a4:e722"
    assert report.errors == ()  # the "#ibstatus" prompt above it is no error


def test_ibv_devinfo_of_two_dual_port_hcas() -> None:
    report = parse_ibv_devinfo(field_text("ibv-devinfo-cx3-fdr-2hca-2port-heioy-books.txt"))
    assert [d.name for d in report.devices] == ["mlx4_1", "mlx4_0"]
    mlx4_0 = report.device("mlx4_0")
    assert mlx4_0 is not None
    assert (mlx4_0.fw_ver, mlx4_0.vendor_id, mlx4_0.vendor_part_id, mlx4_0.board_id, mlx4_0.phys_port_cnt) == (
        "2.42.5000", 0x02C9, 4099, "MT_1090120019", 2)
    assert mlx4_0.node_guid == "e41d:2d03:00e0:c740"
    assert [(p.port, p.state, p.state_code, p.active_mtu, p.sm_lid, p.port_lid, p.link_layer)
            for p in mlx4_0.ports] == [
        (1, "PORT_ACTIVE", 4, 4096, 18, 32, "InfiniBand"), (2, "PORT_DOWN", 1, 4096, 0, 0, "InfiniBand")]
    assert report.errors == ()


def test_ibv_devinfo_verbose_attributes_stay_out_of_the_port() -> None:
    report = parse_ibv_devinfo(field_text("ibv-devinfo-v-cx3-port2-polling-heioy-books.txt"))
    (device,) = report.devices
    assert (device.name, device.phys_port_cnt, device.hw_ver) == ("mlx4_1", 2, "0x1")
    (port,) = device.ports
    assert (port.port, port.state, port.max_mtu, port.active_mtu, port.port_lmc) == (2, "PORT_DOWN", 4096, 4096, 0)
    assert report.errors == ()


@pytest.mark.parametrize("line", [
    "#ibstatus", "#ibv_devinfo -d mlx4_1 -i 2 -v",  # Heioy/Books
    "[root@cn3 ~]# ib_read_bw  cn2  -a -F -d mlx5_1",  # openucx/ucx#8851
    "root@lg-cmc-gpu-tf-prod-008:~# mlnx_qos -i ens4np0",
    "centos7@centos7:~$ ibdev2netdev",
    "# nvidia-smi -q", "```", "$nvidia-smi", "$ ip r s",
])
def test_prompts_seen_in_real_captures(line: str) -> None:
    assert is_prompt(line)


@pytest.mark.parametrize("line", ["CA 'mlx5_0'", "hca_id:\tmlx5_0", "Infiniband device 'mlx4_0' port 1 status:",
                                  "GPU0: Pass", "mlx5_0 port 1 ==> ibp12s0 (Up)"])
def test_tool_lines_are_no_prompt(line: str) -> None:
    assert not is_prompt(line)


def test_ibstat_of_one_ndr_port_under_its_bare_command() -> None:
    report = parse_ibstat(field_text("ibstat-h100-cx7-ndr400-elided-nccl-issue1591.txt"))
    (ca,) = report.cas
    assert (ca.name, ca.type, ca.firmware, ca.num_ports, ca.hardware_version) == (
        "mlx5_5", "MT4129", "28.41.1000", 1, "0")
    assert ca.node_guid == ca.system_image_guid == "0x9c63c003005548ae"
    (port,) = ca.ports
    assert (port.port, port.state, port.physical_state, port.rate_gbps, port.link_layer) == (
        1, "Active", "LinkUp", 400.0, "InfiniBand")
    assert (port.base_lid, port.sm_lid, port.lmc, port.capability_mask) == (987, 359, 0, "0xa751e848")
    assert report.errors == ()  # "ibstat" is the command, "..." the author's cut: neither is the tool's error


@pytest.mark.parametrize(("line", "echo"), [
    ("ibstat", True), ("sudo ibstat mlx5_0 1", True), ("ibstat -d mlx5_0", True),
    ("ibstat: port 1 is not active", False), ("ibstatus", False), ("ibpanic: [1234] main: stat of IB device", False),
    ("ibstat mlx5_0: no such device", False),
])
def test_a_bare_command_is_told_from_the_tools_messages(line: str, echo: bool) -> None:
    assert is_command_echo(line, "ibstat") is echo


def test_ibstat_of_another_vendors_roce_nic_with_empty_fields() -> None:
    """Intel E810 (irdma): ``CA type:`` and ``Hardware version:`` are printed empty, not missing."""
    report = parse_ibstat(field_text("ibstat-intel-e810-roce-down-nccl-issue622.txt"))
    (ca,) = report.cas
    assert (ca.name, ca.type, ca.firmware, ca.hardware_version, ca.num_ports) == ("rocep216s0f0", "", "1.50", "", 1)
    (port,) = ca.ports
    assert (port.state, port.physical_state, port.rate_gbps, port.base_lid, port.sm_lid) == (
        "Down", "Disabled", 100.0, 1, 0)
    assert port.link_layer == "" and port.port_guid is None  # cut from the copy: unknown, not guessed
    assert report.errors == ()


# ------------------------------------------------------------------ ibdev2netdev


def test_ibdev2netdev_with_ib_ports_down_and_a_roce_bond() -> None:
    report = parse_ibdev2netdev(field_text("ibdev2netdev-h20-cx7-ib-down-bf3-bond-stepmesh-issue15.txt"))
    assert [(e.device, e.port, e.netdev, e.state, e.up) for e in report.entries] == [
        ("mlx5_0", 1, "ibs108", "Down", False), ("mlx5_1", 1, "ens12f0np0", "Up", True),
        ("mlx5_2", 1, "ens12f1np1", "Up", True), ("mlx5_3", 1, "ibs110", "Down", False),
        ("mlx5_4", 1, "ibs112", "Down", False), ("mlx5_7", 1, "ibs114", "Down", False),
        ("mlx5_bond_0", 1, "bond0", "Up", True)]


# ------------------------------------------------------------------ NCCL_DEBUG=INFO


def test_nccl_info_of_two_dgx_h100_over_roce() -> None:
    report = parse_nccl_info(field_text("nccl-info-dgxh100-roce-2node-nccl2.19.3-nccl-tests-issue185.txt"))
    assert report.version == "2.19.3+cuda12.3"  # printed bare by rank 0, not on an INFO line
    assert [h.host for h in report.hosts] == ["dgxh100-4", "dgxh100-3"]
    for host, address in zip(report.hosts, ("11.1.128.136", "11.1.128.128"), strict=True):
        assert [(d.index, d.name, d.port, d.transport) for d in host.net_devices["IB"]] == [
            (0, "mlx5_10", 1, "RoCE"), (1, "mlx5_11", 1, "RoCE")]
        assert host.bootstrap == (f"enp220s0np0:{address}",) and host.oob == (f"enp220s0np0:{address}",)
        assert host.networks == ("IB",) and host.used == ()
    assert report.info_lines == 12


# ------------------------------------------------------------------ mlxconfig


def test_mlxconfig_query_with_the_authors_cut() -> None:
    report = parse_mlxconfig_query(field_text("mlxconfig-query-cx7-mcx715105as-elided-openshift-notes.txt"))
    (dev,) = report.devices
    assert (dev.device_type, dev.name, dev.device) == ("ConnectX7", "MCX715105AS-WEAT_Ax", "/dev/mst/mt4129_pciconf0")
    assert dev.description is not None and dev.description.startswith("NVIDIA ConnectX-7 HHHL Adapter Card; 400GbE")
    assert dev.columns == ("Next Boot",)
    assert [(p.name, p.values, p.modified) for p in dev.params] == [
        ("MODULE_SPLIT_M0", ("Array[0..15]",), False), ("MEMIC_BAR_SIZE", ("0",), False),
        ("MEMIC_SIZE_LIMIT", ("_256KB(1)",), False), ("ADVANCED_PCI_SETTINGS", ("False(0)",), False),
        ("SAFE_MODE_THRESHOLD", ("10",), False), ("SAFE_MODE_ENABLE", ("True(1)",), False)]
    assert report.errors == ()


@pytest.mark.parametrize(("line", "cut"), [
    ("       (...)", True), ("....", True), ("[ .... ]", True), ("> [...]", True), ("…", True),
    ("..", False), ("(x...)", False), ("Link 3: <inactive>", False),
])
def test_elision_marks_seen_in_real_captures(line: str, cut: bool) -> None:
    assert is_elision(line) is cut


# ------------------------------------------------------------------ ip addr / ip link

IPOIB = "ip-addr-ipoib-cx5-flattened-indent-spiderpool-docs.txt"


def test_ip_addr_block_pasted_at_one_indent_keeps_its_addresses() -> None:
    (ib,) = parse_ip_addr(field_text(IPOIB)).interfaces
    assert (ib.name, ib.ifindex, ib.mtu, ib.operstate, ib.link_type) == ("ibs5f0", 9, 2044, "UP", "infiniband")
    assert ib.flags == ("BROADCAST", "MULTICAST", "UP", "LOWER_UP")
    assert ib.address == "00:00:10:49:fe:80:00:00:00:00:00:00:e8:eb:d3:03:00:93:ae:10"
    assert ib.addresses == (IpAddress("inet", "172.91.0.10", 16, "global"),
                            IpAddress("inet6", "fd00:91::172:91:0:10", 64, "global"),
                            IpAddress("inet6", "fe80::eaeb:d303:93:ae10", 64, "link"))


def test_ip_link_reads_the_same_block() -> None:
    (link,) = parse_ip_link(field_text(IPOIB)).links
    assert (link.name, link.mtu, link.link_type, link.master) == ("ibs5f0", 2044, "infiniband", None)


def test_a_line_that_is_not_the_blocks_own_ends_it() -> None:
    text = field_text(IPOIB).replace("        altname ibp134s0f0\n", "        altname ibp134s0f0\n        ~# date\n")
    (ib,) = parse_ip_addr(text).interfaces
    assert ib.addresses == ()  # the addresses printed after the prompt belong to no block



def test_ip_route_with_an_ipoib_subnet() -> None:
    routes = parse_ip_route(field_text("ip-route-ipoib-ib0-metric150-hpc-networking-notes.txt")).routes
    assert [(r.dst, r.gateway, r.dev, r.protocol, r.scope, r.prefsrc, r.metric) for r in routes] == [
        ("default", "7.151.164.131", "eno1", "static", None, None, 100),
        ("7.0.0.0/8", "7.151.164.131", "eno1", "static", None, None, 65024000),
        ("7.151.164.128/25", None, "eno1", "kernel", "link", "7.151.164.166", 100),
        ("7.151.176.0/21", None, "ib0", "kernel", "link", "7.151.181.31", 150)]
