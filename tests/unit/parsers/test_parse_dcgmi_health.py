"""``dcgmi health -c`` (GPU-12): DCGM's health tree, as its sources print it.

No real capture exists in ../shared; the texts below follow NVIDIA/DCGM's ``dcgmi/Health.cpp``
(``GenerateOutputFromResponse``), ``dcgmi/DcgmiOutput.cpp`` (``DcgmiOutputTree(28, 60)``) and the rows
``dcgmi/tests/HealthTests.cpp`` expects, e.g. ``| Overall Health            | Failure`` and
``|       -> Memory system    | Failure``.
"""

from __future__ import annotations

import pytest

from burnin.errors import ParseError
from burnin.parsers.dcgmi_health import DcgmiHealth, HealthIncident, parse_dcgmi_health

HLINE = "+---------------------------+----------------------------------------------------------+"
HEADER = [HLINE, f"| {'Health Monitor Report':<85}|", HLINE.replace("-", "=")]  # setw(28 + 60 - 3)


def row(label: str, value: str = "") -> str:
    return f"| {label:<25} | {value:<56} |"


def report(*rows: str, closed: bool = True) -> str:
    return "\n".join([*HEADER, *rows, *([HLINE] if closed else [])]) + "\n"


HEALTHY = report(row("Overall Health", "Healthy"))
# DCGM's own unit test (HealthTests.cpp GenerateOutputFromResponse): GPU 0 memory Warning; GPU 1 memory Failure
# and SM Warning. Its messages are DCGM's test strings, wrapped at 54 characters on word ends.
DCGM_TEST_CASE = report(
    row("Overall Health", "Failure"),
    row("GPU"),
    row("-> 0", "Warning"),
    row("   -> Errors"),
    row("      -> Memory system", "Warning"),
    row("", "The car is red? Are you sure because that doesn't seem"),
    row("", "like the color I ordered."),
    row("-> 1", "Failure"),
    row("   -> Errors"),
    row("      -> Memory system", "Failure"),
    row("", "Green can be emerald and beautiful, but there are"),
    row("", "shades of green which are sure to disappoint."),
    row("      -> SM system", "Warning"),
    row("", "The guards wear Kholin blue because otherwise they'd be"),
    row("", "lame."),
)


def test_rows_match_what_dcgms_own_test_expects() -> None:
    assert "| Overall Health            | Failure" in DCGM_TEST_CASE
    assert "| -> 0                      | Warning" in DCGM_TEST_CASE
    assert "|       -> Memory system    | Failure" in DCGM_TEST_CASE
    assert "| The car is red? Are you sure because that doesn't seem   |" in DCGM_TEST_CASE
    assert " | like the color I ordered.                                |" in DCGM_TEST_CASE
    assert all(len(line) == len(HLINE) for line in DCGM_TEST_CASE.splitlines())


def test_healthy() -> None:
    assert parse_dcgmi_health(HEALTHY) == DcgmiHealth("Healthy", {}, (), truncated=False)


def test_dcgm_test_case_entities_systems_and_joined_messages() -> None:
    health = parse_dcgmi_health(DCGM_TEST_CASE)
    assert health.overall == "Failure" and health.truncated is False
    assert health.entities == {"GPU 0": "Warning", "GPU 1": "Failure"}
    assert health.incidents == (
        HealthIncident("GPU", "0", "Memory system", "Warning",
                       "The car is red? Are you sure because that doesn't seem like the color I ordered."),
        HealthIncident("GPU", "1", "Memory system", "Failure",
                       "Green can be emerald and beautiful, but there are shades of green which are sure to "
                       "disappoint."),
        HealthIncident("GPU", "1", "SM system", "Warning",
                       "The guards wear Kholin blue because otherwise they'd be lame."),
    )


def test_switch_and_connectx_entities_and_chatter() -> None:
    text = "Some banner\n" + report(
        row("Overall Health", "Warning"),
        row("Switch"),
        row("-> 2", "Warning"),
        row("   -> Errors"),
        row("      -> Internal error", "Warning"),
        row("", "Detected nonfatal errors on NvSwitch 2 link 40"),
        row("ConnectX"),
        row("-> 0", "Failure"),
        row("   -> Errors"),
        row("      -> Internal error", "Failure"),
        row("", "ConnectX entity Id:0 uncorrectable fatal errors: 0x1010"),
    )
    health = parse_dcgmi_health(text)
    assert [(i.entity_group, i.entity_id, i.health) for i in health.incidents] == [
        ("Switch", "2", "Warning"), ("ConnectX", "0", "Failure")]
    assert health.incidents[1].message == "ConnectX entity Id:0 uncorrectable fatal errors: 0x1010"


def test_a_message_with_a_pipe_stays_whole() -> None:
    text = report(row("Overall Health", "Warning"), row("GPU"), row("-> 3", "Warning"), row("   -> Errors"),
                  row("      -> PCIe system", "Warning"), row("", "a | b"))
    assert parse_dcgmi_health(text).incidents[0].message == "a | b"


def test_a_report_cut_short_says_so() -> None:
    health = parse_dcgmi_health(report(row("Overall Health", "Healthy"), closed=False))
    assert health.truncated is True and health.overall == "Healthy"


def test_rows_outside_an_entity_are_not_incidents() -> None:
    text = report(row("Overall Health", "Warning"), row("      -> PCIe system", "Warning"), row("", "orphan"),
                  row("-> 7", "Warning"))
    health = parse_dcgmi_health(text)
    assert health.incidents == () and health.entities == {}


@pytest.mark.parametrize(("text", "message"), [
    ("Error: Health watches not enabled. Please enable watches. \n", "no 'Health Monitor Report' table"),
    ("Error: unable to establish a connection to the specified host: localhost\n", "no 'Health Monitor Report'"),
    ("\n".join(HEADER) + "\n" + row("GPU") + "\n" + HLINE + "\n", "no 'Overall Health' row"),
    ("| Overall Health            | Healthy |\n", "no 'Health Monitor Report' table"),
    ("complete garbage\n", "no 'Health Monitor Report' table"),
])
def test_garbage_is_a_parse_error_with_an_excerpt(text: str, message: str) -> None:
    with pytest.raises(ParseError, match=message) as caught:
        parse_dcgmi_health(text)
    assert caught.value.tool == "dcgmi-health"
    assert caught.value.excerpt.strip().splitlines()[0] == text.strip().splitlines()[0]


@pytest.mark.parametrize("text", ["", "   \n"])
def test_empty_input(text: str) -> None:
    with pytest.raises(ParseError, match="empty input"):
        parse_dcgmi_health(text)


def test_the_simulators_report_reads_back() -> None:
    from burnin.sim import dcgm
    from burnin.sim.faults import Fault
    from burnin.sim.state import healthy_state
    from burnin.topology.load import find_topology

    state = healthy_state(find_topology("hgx-h100-8gpu"), "sim01")
    assert parse_dcgmi_health(dcgm.health_report(state)[0]) == DcgmiHealth("Healthy", {}, (), truncated=False)
    dcgm.dcgm_health_warn(state, Fault("dcgm-health-warn", "gpu2"))
    dcgm.dcgm_health_fail(state, Fault("dcgm-health-fail", "gpu2"))
    text, status = dcgm.health_report(state)
    assert status == 0 and all(len(line) == len(HLINE) for line in text.splitlines())
    health = parse_dcgmi_health(text)
    assert health.overall == "Failure" and health.entities == {"GPU 2": "Failure"}
    assert [(i.system, i.health, i.message) for i in health.incidents] == [
        ("PCIe system", "Warning", "Detected more than 8 PCIe replays per minute for GPU 2 : 13"),
        ("Memory system", "Failure", "GPU had an uncontained error (XID 95)"),
    ]


def test_chatter_after_the_table_does_not_cut_it() -> None:
    health = parse_dcgmi_health(HEALTHY + "Done.\n---- end ----\n")
    assert health.truncated is False and health.overall == "Healthy"


def test_a_dash_line_is_not_a_border() -> None:
    text = report(row("Overall Health", "Healthy"), closed=False) + "-" * 88 + "\n"
    assert parse_dcgmi_health(text).truncated is True


def test_a_border_before_any_row_does_not_close_the_table() -> None:
    text = "\n".join([HLINE, HEADER[1], HLINE, row("Overall Health", "Healthy")]) + "\n"
    health = parse_dcgmi_health(text)
    assert health.overall == "Healthy" and health.truncated is True


def test_rows_without_padding_still_read() -> None:
    text = "\n".join([HLINE, "|Health Monitor Report|", "|Overall Health|Warning|", "|GPU||", "|-> 1|Warning|",
                      "|   -> Errors||", "|      -> Thermal system|Warning|", "||too hot|", HLINE]) + "\n"
    health = parse_dcgmi_health(text)
    assert health.overall == "Warning" and health.entities == {"GPU 1": "Warning"}
    assert health.incidents == (HealthIncident("GPU", "1", "Thermal system", "Warning", "too hot"),)


@pytest.mark.parametrize("line", [
    "| Overall Health            | Healthy",  # the closing pipe cut off
    "x | Overall Health            | Healthy |",  # not a row of the table
    "|" + " " * 86 + "|",  # one cell
])
def test_lines_that_are_not_rows_are_not_read(line: str) -> None:
    with pytest.raises(ParseError, match="no 'Overall Health' row"):
        parse_dcgmi_health("\n".join([*HEADER, line, HLINE]) + "\n")


def test_a_label_with_text_before_the_arrow_is_not_a_child() -> None:
    text = report(row("Overall Health", "Warning"), row("GPU"), row("x-> 3", "Warning"), row("   -> Errors"),
                  row("      -> PCIe system", "Warning"), row("", "m"))
    health = parse_dcgmi_health(text)
    assert health.incidents == () and health.entities == {}
