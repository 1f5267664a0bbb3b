"""GPU tools' real outputs from other machines (tests/field): the values a careful reader takes from each."""

from __future__ import annotations

import pytest
from field_samples import field_text

from burnin.errors import ParseError
from burnin.parsers.dcgmi import DcgmiDetail, parse_dcgmi_diag
from burnin.parsers.dmesg import parse_xid_events
from burnin.parsers.dmon import parse_dmon
from burnin.parsers.nvbandwidth import parse_nvbandwidth, parse_p2p_bandwidth
from burnin.parsers.nvidia_smi import parse_nvlink, parse_query_csv, parse_smi_query, parse_topo_matrix

# ------------------------------------------------------------------ dcgmi diag (DCGM 4.x)

B200 = "dcgmi-diag-r2-dcgm4.4.1-b200-8gpu-pcie-fail-dcgm-issue253.txt"
L40S = "dcgmi-diag-r2-dcgm4.2.3-l40s-4gpu-pcie-fail-dcgm-issue253.txt"
CHILD_PARSE = ("There was an internal error during the test: 'Output of child process ({pid}) couldn't be "
               "parsed: '* Line 1, Column 1 Syntax error: value, object or array expected. '' Check DCGM and "
               "system logs for errors. Reset GPU. Restart DCGM. Rerun diagnostics.")
CHILD_EXIT = ("There was an internal error during the test: 'A child process ({pid}) exited with non-zero "
              "status 1' Check DCGM and system logs for errors. Reset GPU. Restart DCGM. Rerun diagnostics.")


def test_dcgm4_per_gpu_rows_after_a_warning_are_results_not_warning_text() -> None:
    diag = parse_dcgmi_diag(field_text(B200))
    assert [(t.name, t.category, t.result) for t in diag.tests] == [
        ("software", "Deployment", "Pass"), ("memory", "Hardware", "Pass"), ("pcie", "Integration", "Fail")]
    pcie = diag.tests[2]
    assert pcie.gpu_results == {"Pass": (0, 1, 2, 3, 4, 5, 6, 7)}
    assert pcie.details == (DcgmiDetail("Warning", CHILD_PARSE.format(pid=11167)),)
    assert diag.warnings == (CHILD_PARSE.format(pid=11167),)
    assert diag.tests[0].gpu_results == diag.tests[1].gpu_results == {"Pass": (0, 1, 2, 3, 4, 5, 6, 7)}
    assert diag.truncated is False


def test_a_cell_filled_to_its_border_keeps_its_last_character() -> None:
    diag = parse_dcgmi_diag(field_text(B200))
    assert diag.metadata == {
        "DCGM Version": "4.4.1",
        "Driver Version Detected": "570.172.08",
        "GPU Device IDs Detected": ", ".join(["2901"] * 8),
    }


def test_dcgm4_four_global_warnings_then_per_gpu_rows() -> None:
    diag = parse_dcgmi_diag(field_text(L40S))
    assert diag.metadata["GPU Device IDs Detected"] == "26b9, 26b9, 26b9, 26b9"
    assert diag.results == {"software": "Pass", "memory": "Pass", "pcie": "Fail"}
    pcie = diag.tests[2]
    assert pcie.gpu_results == {"Pass": (0, 1, 2, 3)}
    assert [d.text for d in pcie.details] == [
        CHILD_EXIT.format(pid=152), CHILD_EXIT.format(pid=153),
        CHILD_PARSE.format(pid=152), CHILD_PARSE.format(pid=153)]
    assert diag.truncated is True  # the paste ends before the closing border


# ------------------------------------------------------------------ nvbandwidth v0.10


def test_nvbandwidth_v0_10_with_coefficient_of_variation_lines() -> None:
    report = parse_nvbandwidth(field_text("nvbandwidth-v0.10-2gpu-ce-cov-azurehpc-health-checks.txt"))
    assert report.version is None
    h2d, d2h, d2d = report.testcases
    assert (h2d.name, h2d.rows, h2d.columns, h2d.matrix, h2d.sum, h2d.status) == (
        "host_to_device_memcpy_ce", (0,), (0, 1), ((26.03, 25.94),), 51.97, "ok")
    assert (d2h.name, d2h.matrix, d2h.sum) == ("device_to_host_memcpy_ce", ((25.97, 26.00),), 51.97)
    assert (d2d.name, d2d.rows, d2d.matrix, d2d.sum) == (
        "device_to_device_memcpy_read_ce", (0, 1), ((None, 276.07), (276.19, None)), 552.26)
    assert (d2d.row_kind, d2d.column_kind, d2d.unit) == ("GPU", "GPU", "GB/s")


# ------------------------------------------------------------------ nvidia-smi topo -m


def test_topo_with_tabs_lost_between_columns_is_refused_not_shifted() -> None:
    """``NIC8NIC9`` in the header: every cell right of it would land under the wrong device."""
    with pytest.raises(ParseError, match="'NIC8NIC9' is neither a device"):
        parse_topo_matrix(field_text("nvidia-smi-topo-dgx-h100-12nic-tabs-lost-vllm-issue13855.txt"))


def test_topo_rows_with_two_cells_glued_are_refused() -> None:
    """The same capture with its header mended: rows GPU4-GPU7 still hold ``NODENODE``."""
    text = field_text("nvidia-smi-topo-dgx-h100-12nic-tabs-lost-vllm-issue13855.txt").replace(
        "NIC8NIC9", "NIC8\tNIC9")
    with pytest.raises(ParseError, match="row GPU4: 'NODENODE' is not a link type"):
        parse_topo_matrix(text)


def test_topo_with_blank_affinity_cells_reads_no_affinity() -> None:
    """A VM printing no CPU/NUMA affinity, copied with spaces: ``N/A`` is the GPU NUMA ID, not a CPU list."""
    topo = parse_topo_matrix(field_text("nvidia-smi-topo-2gpu-nv12-8nic-blank-affinity-vllm-issue19607.txt"))
    assert topo.gpus == ("GPU0", "GPU1")
    assert topo.nics == tuple(f"NIC{i}" for i in range(8))
    assert topo.links["GPU0"] == {"GPU0": "X", "GPU1": "NV12", **{f"NIC{i}": "SYS" for i in range(6)},
                                  "NIC6": "PXB", "NIC7": "PXB"}
    assert topo.links["NIC7"]["NIC6"] == "PIX" and topo.links["NIC7"]["NIC7"] == "X"
    assert topo.cpu_affinity == {} and topo.numa_affinity == {} and topo.gpu_numa_id == {}
    assert topo.truncated is False


@pytest.mark.parametrize(("cells", "cpu", "numa"), [
    ("0-15,32-47     0               N/A", {"GPU0": "0-15,32-47"}, {"GPU0": 0}),  # what a node with NUMA prints
    ("0-15,32-47     x               N/A", {}, {}),  # a NUMA node that is no number: not guessed
    ("0-15,32-470               N/A", {}, {}),  # NUMA glued to the CPU list (vllm#17516): not guessed
])
def test_topo_affinity_cells_are_read_only_when_each_fits_its_column(
        cells: str, cpu: dict[str, str], numa: dict[str, int]) -> None:
    text = field_text("nvidia-smi-topo-2gpu-nv12-8nic-blank-affinity-vllm-issue19607.txt")
    row = "GPU0     X      NV12    SYS     SYS     SYS     SYS     SYS     SYS     PXB     PXB     "
    old = next(line for line in text.splitlines() if line.startswith("GPU0 "))
    topo = parse_topo_matrix(text.replace(old, row + cells))
    assert topo.cpu_affinity == cpu and topo.numa_affinity == numa


def test_topo_of_four_h100_each_on_its_own_numa_node() -> None:
    topo = parse_topo_matrix(field_text("nvidia-smi-topo-4x-h100-nv6-4nic-spaces-nccl-issue1617.txt"))
    assert topo.gpus == ("GPU0", "GPU1", "GPU2", "GPU3") and topo.nics == ("NIC0", "NIC1", "NIC2", "NIC3")
    assert topo.cpu_affinity == {"GPU0": "6,14,22,30", "GPU1": "4,12,20,28", "GPU2": "7,15,23,31",
                                 "GPU3": "5,13,21,29"}
    assert topo.numa_affinity == {"GPU0": 3, "GPU1": 1, "GPU2": 7, "GPU3": 5}
    assert topo.gpu_numa_id == {"GPU0": None, "GPU1": None, "GPU2": None, "GPU3": None}
    assert all(topo.links[f"GPU{i}"][f"NIC{i}"] == "PIX" for i in range(4))
    assert topo.links["GPU2"]["GPU3"] == "NV6" and topo.links["NIC3"]["NIC3"] == "X"
    assert topo.truncated is False


# ------------------------------------------------------------------ nvidia-smi nvlink -s


def test_nvlink_status_with_two_inactive_links_and_the_rest_cut() -> None:
    report = parse_nvlink(field_text("nvidia-smi-nvlink-s-v100-two-inactive-azhpc-diagnostics-issue73.txt"))
    (gpu,) = report.gpus
    assert (gpu.index, gpu.name, gpu.uuid) == (3, "Tesla V100-SXM2-32GB", None)  # "(UUID: ...)" hides it
    assert [(link.link, link.speed_gbps, link.active) for link in gpu.links] == [
        (0, 25.781, True), (1, 25.781, True), (2, 25.781, True), (3, None, False), (4, 25.781, True),
        (5, None, False)]
    assert report.elided is True  # "...." stood for GPUs 0-2
    assert gpu.all_links_inactive is False and gpu.message is None


# ------------------------------------------------------------------ nvidia-smi -q


def test_smi_query_of_a_pcie_a10_with_remapped_rows_pending() -> None:
    query = parse_smi_query(field_text("nvidia-smi-q-a10-driver535.129.03-rows-pending-gpud.txt"))
    assert (query.driver_version, query.cuda_version, query.attached_gpus) == ("535.129.03", "12.2", 1)
    (gpu,) = query.gpus
    assert (gpu.pci_bus_id, gpu.product_name, gpu.product_architecture) == ("00000000:07:00.0", "NVIDIA A10", "Ampere")
    assert (gpu.pcie_gen_current, gpu.pcie_gen_max, gpu.link_width_current, gpu.link_width_max) == (4, 4, 16, 16)
    assert gpu.pcie_gen_host_max is None and gpu.pcie_replays == 0
    rows = gpu.remapped_rows
    assert rows is not None
    assert (rows.correctable, rows.uncorrectable, rows.pending, rows.failure) == (0, 4, True, False)
    assert gpu.ecc_volatile is not None and gpu.ecc_volatile.uncorrectable_total == 0
    assert (gpu.power_draw_w, gpu.power_limit_w, gpu.temperature.gpu_c) == (43.89, 150.0, 33.0)
    assert gpu.mig_mode_current is None and gpu.fabric_state is None and gpu.reset_required is False
    assert query.errors == ()


# ------------------------------------------------------------------ kernel log: a GPU fallen off the bus, no Xid

FALLEN = "dmesg-fallen-off-bus-no-xid-l40-driver570-nvsentinel-issue155.txt"


def test_a_gpu_fallen_off_the_bus_without_an_xid_line_is_an_xid_79() -> None:
    report = parse_xid_events(field_text(FALLEN))
    (event,) = report.events
    assert (event.pci, event.xid, event.timestamp, event.line, event.pid) == ("0000:b3:00", 79, "1843.308145", 1, None)
    assert "no Xid number printed" in event.text


def test_the_xid_79_line_for_the_same_gpu_is_not_counted_twice() -> None:
    xid = ("[ 1843.308100] NVRM: Xid (PCI:0000:b3:00): 79, pid='<unknown>', name=<unknown>, "
           "GPU has fallen off the bus.\n")
    report = parse_xid_events(xid + field_text(FALLEN))
    (event,) = report.events
    assert (event.xid, event.line, event.text) == (79, 1, "GPU has fallen off the bus.")


def test_the_older_one_line_message_is_read_too() -> None:
    line = ("[  512.100000] NVRM: The NVIDIA GPU 0000:19:00.0 (PCI ID: 10de:2330) installed in this system has "
            "fallen off the bus and is not responding to commands.\n")
    (event,) = parse_xid_events(line).events
    assert (event.pci, event.xid, event.timestamp) == ("0000:19:00", 79, "512.100000")


def test_a_gpu_named_without_falling_off_the_bus_is_no_event() -> None:
    lines = ["[ 1.0] NVRM: The NVIDIA GPU 0000:19:00.0", "[ 1.1] NVRM: (PCI ID: 10de:2330) installed in this system",
             "[ 1.2] NVRM: is not supported", "[ 1.3] NVRM: loaded", "[ 9.0] NVRM: fallen off the bus"]
    assert parse_xid_events("\n".join(lines) + "\n").events == ()


# ------------------------------------------------------------------ nvidia-smi dmon, --query-gpu (Blackwell)

QUERY_COLUMNS = (
    "index", "uuid", "name", "pci.bus_id", "driver_version", "utilization.gpu", "utilization.memory",
    "memory.total", "memory.used", "memory.free", "temperature.gpu", "temperature.memory", "power.draw",
    "power.limit", "clocks.gr", "clocks.mem", "clocks.max.gr", "clocks.max.mem", "fan.speed", "pstate",
    "pcie.link.gen.current", "pcie.link.width.current", "encoder.stats.sessionCount",
)


def test_dmon_of_four_blackwell_gpus_with_trailing_spaces() -> None:
    dmon = parse_dmon(field_text("nvidia-smi-dmon-pucm-4x-rtx-pro-6000-blackwell-driver595-candy-top.txt"))
    assert dmon.columns[:4] == ("pwr", "gtemp", "mtemp", "sm") and dmon.units["fb"] == "MB"
    assert [s.gpu for s in dmon.samples] == [0, 1, 2, 3]
    first, last = dmon.samples[0], dmon.samples[-1]
    assert (first.values["pwr"], first.values["gtemp"], first.values["mtemp"], first.values["pclk"]) == (
        294.0, 81.0, None, 1897.0)
    assert (last.values["sm"], last.values["mem"], last.values["fb"], last.values["bar1"]) == (
        100.0, 58.0, 48209.0, 6.0)


def test_query_csv_without_header_reads_with_the_commands_columns() -> None:
    text = field_text("nvidia-smi-query-csv-noheader-nounits-4x-rtx-pro-6000-candy-top.txt")
    query = parse_query_csv(text, columns=QUERY_COLUMNS)
    assert [r["index"] for r in query.rows] == ["0", "1", "2", "3"]
    third = query.rows[2]
    assert (third["pci.bus_id"], third["driver_version"], third["memory.total"], third["power.draw"]) == (
        "00000000:81:00.0", "595.91.07", "97887", "299.95")
    assert (third["temperature.memory"], third["pcie.link.gen.current"], third["pcie.link.width.current"]) == (
        "N/A", "5", "16")
    assert third["name"] == "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition"


def test_query_csv_with_fewer_columns_than_values_is_refused() -> None:
    text = field_text("nvidia-smi-query-csv-noheader-nounits-4x-rtx-pro-6000-candy-top.txt")
    with pytest.raises(ParseError):
        parse_query_csv(text, columns=QUERY_COLUMNS[:3])


# ------------------------------------------------------------------ p2pBandwidthLatencyTest


def test_p2p_matrices_where_peer_to_peer_is_slower_than_disabled() -> None:
    report = parse_p2p_bandwidth(field_text("p2p-bandwidth-6gpu-p2p-writes-10gbs-sm-copy-off-nccl-issue814.txt"))
    assert report.devices == () and report.peer_access == ()
    disabled, writes, reads = report.matrices
    assert (disabled.p2p_enabled, disabled.bidirectional, disabled.unit) == (False, False, "GB/s")
    assert (writes.p2p_enabled, writes.transfer, reads.transfer) == (True, "writes", "reads")
    assert writes.columns == writes.rows == (0, 1, 2, 3, 4, 5)
    assert (disabled.cell(3, 4), writes.cell(0, 1), writes.cell(2, 0), reads.cell(5, 2)) == (20.46, 9.90, 10.01, 10.46)
    assert writes.cell(5, 5) == 922.37


def test_fallen_off_the_bus_three_lines_below_the_gpu_name_is_another_message() -> None:
    lines = ["[ 1.0] NVRM: The NVIDIA GPU 0000:19:00.0", "[ 1.1] NVRM: (PCI ID: 10de:2330) installed in this system",
             "[ 1.2] NVRM: is not supported", "[ 1.3] NVRM: fallen off the bus"]
    assert parse_xid_events("\n".join(lines) + "\n").events == ()


def test_an_xid_79_line_with_a_pci_function_is_the_same_gpu() -> None:
    xid = "[ 1843.3] NVRM: Xid (PCI:0000:b3:00.0): 79, pid=123, name=python, GPU has fallen off the bus.\n"
    (event,) = parse_xid_events(xid + field_text(FALLEN)).events
    assert (event.pci, event.line) == ("0000:b3:00.0", 1)
