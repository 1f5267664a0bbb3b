"""Fabric tools' real outputs from other machines (tests/field): the values a careful reader takes from each."""

from __future__ import annotations

import pytest
from field_samples import field_text

from burnin.errors import ParseError
from burnin.parsers.mlnx_qos import parse_mlnx_qos
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
