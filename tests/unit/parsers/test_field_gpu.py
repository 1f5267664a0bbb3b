"""GPU tools' real outputs from other machines (tests/field): the values a careful reader takes from each."""

from __future__ import annotations

from field_samples import field_text

from burnin.parsers.dcgmi import DcgmiDetail, parse_dcgmi_diag
from burnin.parsers.nvbandwidth import parse_nvbandwidth

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
