"""perftest (ib_write_bw & co.): the real ConnectX-7 NDR sample, the simulator's format, broken outputs."""

from __future__ import annotations

import math

import pytest
from pending_reference import pending_files, pending_root, pending_tool

from burnin.errors import ParseError
from burnin.parsers import parse, to_jsonable
from burnin.parsers.perftest import PerftestReport, parse_perftest
from burnin.sim.formats import perftest as fmt

SAMPLE = "perftest/cx7-ndr400-b2b-ib_send_bw-send_lat-read_bw-write_bw-report_gbits-client.txt"


def _sample() -> str:
    path = pending_root() / SAMPLE
    if not path.is_file():
        pytest.fail(f"real perftest sample missing: {path} (../shared/reference-pending)")
    return path.read_text(encoding="utf-8")


def test_every_pending_perftest_file_parses() -> None:
    files = [p for p in pending_files() if pending_tool(p) == "perftest"]
    assert files, f"no perftest sample under {pending_root()}"
    for path in files:
        output = parse_perftest(path.read_text(encoding="utf-8"))
        assert output.reports and all(r.rows and r.complete for r in output.reports), path.name


def test_the_real_cx7_session_reads_every_report() -> None:
    reports = parse_perftest(_sample()).reports
    assert [(r.test, r.kind, r.device) for r in reports] == [
        ("Send BW", "bw", "mlx5_0"), ("Send Latency", "lat", "mlx5_0"),
        ("RDMA_Read BW", "bw", "mlx5_0"), ("RDMA_Write BW", "bw", "mlx5_0")]
    send, lat, read, write = reports
    assert send.bw_unit == "MiB/sec" and read.bw_unit == "Gb/sec" and lat.bw_unit is None
    assert write.columns == ("#bytes", "#iterations", "BW peak[Gb/sec]", "BW average[Gb/sec]", "MsgRate[Mpps]")
    row = write.rows[0]
    assert (row.size_bytes, row.iterations) == (65536, 5000)
    assert write.average_gbps(row) == 392.34 and write.peak_gbps(row) == 392.38
    assert write.value(row, "MsgRate") == 0.748336
    assert read.average_gbps(read.rows[0]) == 328.61
    # MiB/sec: 46557.03 x 2^20 bytes x 8 bits = 390.55 Gb/s
    assert send.average_gbps(send.rows[0]) == pytest.approx(390.549, abs=0.001)
    assert lat.columns[-2:] == ("99% percentile[usec]", "99.9% percentile[usec]")
    assert lat.value(lat.rows[0], "t_typical") == 1.27 and lat.average_gbps(lat.rows[0]) is None
    # the CPU-frequency warnings printed inside the tables are kept, never read as rows
    assert [len(r.warnings) for r in reports] == [1, 2, 1, 1]
    assert write.warnings[0].startswith("Conflicting CPU frequency values detected")
    assert write.setting("Number of qps") == "1" and write.setting("CQE Poll Batch") == "Dynamic"
    assert write.setting("rdma_cm QPs") == "OFF"  # its key sits before a tab
    assert (write.setting("local address") or "").startswith("LID 0x01 QPN 0x004a")
    assert all(r.cuda_device is None and r.complete for r in reports)


def test_registry_and_json() -> None:
    record = parse("perftest", _sample())
    data = to_jsonable(record)
    assert isinstance(data, dict) and len(data["reports"]) == 4
    assert data["reports"][3]["rows"][0] == {"size_bytes": 65536, "iterations": 5000,
                                              "values": [65536.0, 5000.0, 392.38, 392.34, 0.748336]}


def test_the_simulator_prints_what_the_parser_reads_with_use_cuda() -> None:
    text = (fmt.cuda_setup(2, ["0000:1b:00", "0000:43:00", "0000:52:00"], "NVIDIA H100 80GB HBM3", 4242, 1 << 21)
            + fmt.client_report("mlx5_2", qps=4, size=1 << 20, iterations=5000, peak_gbps=388.4,
                                average_gbps=388.12, lid=7, qpn=0x4a, psn=0xbe352e, vaddr=0x7E6F4ED11000)
            + "destroying current CUDA Ctx\n")
    (report,) = parse_perftest(text).reports
    assert report.cuda_device == 2 and report.device == "mlx5_2" and report.complete
    assert report.setting("Number of qps") == "4"
    assert [k for k, _ in report.settings].count("local address") == 4
    assert report.average_gbps(report.rows[0]) == 388.12 and report.rows[0].size_bytes == 1 << 20


def test_the_row_layout_matches_the_real_one() -> None:
    real = next(line for line in _sample().splitlines() if line.startswith(" 65536      5000"))
    ours = fmt.result_row(65536, 5000, 392.38, 392.34).rstrip("\n")
    assert ours[:-8] == real[:-8] and len(ours) == len(real)  # the message rate is computed from the rounded bw
    assert ours.endswith("0.748329") and real.endswith("0.748336")


def test_server_and_client_in_one_text() -> None:
    text = (fmt.server_report("mlx5_0", qps=1, lid=1, qpn=0x40, psn=1, vaddr=0x7E0000000000)
            + fmt.client_report("mlx5_0", qps=1, size=65536, iterations=5000, peak_gbps=392.4, average_gbps=392.1,
                                lid=1, qpn=0x4a, psn=2, vaddr=0x7E0000100000))
    server, client = parse_perftest(text).reports
    assert server.rows == () and server.complete and client.rows


def _write_report(rows: str, *, closed: bool = True) -> str:
    return (fmt.settings_block("mlx5_1", qps=1) + " local address: LID 0x01 QPN 0x004a PSN 0xbe352e\n"
            + fmt.RESULT_LINE + "\n" + fmt.RESULT_HEADER_G + "\n" + rows + (fmt.RESULT_LINE + "\n" if closed else ""))


def test_a_cut_table_is_not_complete() -> None:
    (report,) = parse_perftest(_write_report(fmt.result_row(65536, 5000, 392.4, 392.3), closed=False)).reports
    assert report.rows and not report.complete
    killed = _write_report(" 65536      5000             392.38", closed=False)  # a row cut mid-line
    (report,) = parse_perftest(killed).reports
    assert report.rows == () and report.warnings == ("65536      5000             392.38",)


def test_a_new_report_inside_a_table_closes_the_old_one_incomplete() -> None:
    first = _write_report(fmt.result_row(65536, 5000, 392.4, 392.3), closed=False)
    second = _write_report(fmt.result_row(65536, 5000, 200.0, 199.5)).split("\n", 1)[1]  # from its title line
    reports = parse_perftest(first + second).reports
    assert [r.complete for r in reports] == [False, True]


def test_non_numbers_are_kept_for_the_judge() -> None:
    (report,) = parse_perftest(_write_report(" 65536      5000             nan             -inf\t\t     0.1\n")).reports
    value = report.average_gbps(report.rows[0])
    assert value is not None and math.isinf(value) and value < 0  # the measurement, not the parser, refuses it
    with pytest.raises(ParseError):
        parse_perftest(" Port number 1 state is Down\n Couldn't get context for the device\n")


@pytest.mark.parametrize("text", ["", "  \n", "garbage\n", "#bytes #iterations\n 65536 5000 1 2 3\n",
                                  "RDMA_Write Test\n"])
def test_not_perftest_output(text: str) -> None:
    with pytest.raises(ParseError):
        parse_perftest(text)


def test_mib_and_old_mb_units_convert_to_gbits() -> None:
    header = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n"
    row = " 65536      1000          1000.00            1000.00\t\t 0.01\n"
    text = fmt.settings_block("mlx5_0", qps=1) + header + row
    (report,) = parse_perftest(text + fmt.RESULT_LINE + "\n").reports
    assert isinstance(report, PerftestReport) and report.bw_unit == "MB/sec"
    assert report.average_gbps(report.rows[0]) == pytest.approx(8.388608)


def test_pending_files_are_found() -> None:
    assert pending_tool(pending_root() / SAMPLE) == "perftest"
