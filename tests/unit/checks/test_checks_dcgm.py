"""GPU-12 (dcgmi health -c) and GPU-13 (dcgmi diag -r 1): pass, fail with DCGM's words, incomplete otherwise.

The facts are a healthy simulated node's (the collector ran the simulator's dcgmi); each test replaces the
one command record it is about with what DCGM prints in that case.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from checks_support import FAIL, INCOMPLETE, PASS, TOPOLOGY, assert_status, failing_subjects, judge, unmeasured_subjects

from burnin.checks.base import not_applicable_reason
from burnin.checks.dcgm import DCGM_CHECKS, dcgm_not_applicable
from burnin.topology.model import DcgmSpec

HLINE = "+---------------------------+----------------------------------------------------------+"
DIAG_BORDER = "+---------------------------+------------------------------------------------+"
DEPLOYMENT_SECTION = "|-----  Deployment  --------+------------------------------------------------|"
HOSTENGINE_DOWN = ("Error: unable to establish a connection to the specified host: localhost\n"
                   "Error: Unable to connect to host engine. Host engine connection invalid/disconnected.\n")
DEPLOYMENT = ("Denylist", "NVML Library", "CUDA Main Library", "Permissions and OS Blocks", "Persistence Mode",
              "Environment Variables", "Page Retirement/Row Remap", "Graphics Processes", "Inforom")
NO_DCGM = replace(TOPOLOGY, dcgm=DcgmSpec(required=False, source="this site runs no DCGM"))


def set_output(data: dict[str, Any], source: str, stdout: str = "", *, status: int | None = 0,
               error: str | None = None, stderr: str = "") -> None:
    data["commands"][source] = {"argv": ["dcgmi"], "exit_status": status, "stdout": stdout, "stderr": stderr,
                                "error": error}
    data["sources"][source] = {"ok": error is None, "error": error, "duration_s": 0.01}


def hrow(label: str, value: str = "") -> str:
    return f"| {label:<25} | {value:<56} |"


def health(overall: str, *rows: str, closed: bool = True) -> str:
    lines = [HLINE, f"| {'Health Monitor Report':<85}|", HLINE.replace("-", "="), hrow("Overall Health", overall),
             *rows, *([HLINE] if closed else [])]
    return "\n".join(lines) + "\n"


def incident(gpu: int, system: str, level: str, *message: str, group: str = "GPU") -> list[str]:
    return [hrow(group), hrow(f"-> {gpu}", level), hrow("   -> Errors"), hrow(f"      -> {system}", level),
            *(hrow("", chunk) for chunk in message)]


def drow(name: str, value: str) -> str:
    return f"| {name:<25} | {value:<46} |"


def diag(*rows: str, closed: bool = True, results: dict[str, str] | None = None) -> str:
    """A level-1 table: the deployment tests Pass unless ``results`` says otherwise; ``rows`` after them."""
    tests = [drow(name, (results or {}).get(name, "Pass")) for name in DEPLOYMENT]
    lines = ["Successfully ran diagnostic for group.", DIAG_BORDER, drow("Diagnostic", "Result"),
             DIAG_BORDER.replace("-", "="), DEPLOYMENT_SECTION, *tests, *rows, *([DIAG_BORDER] if closed else [])]
    return "\n".join(lines) + "\n"


def with_detail(text: str, test: str, *rows: str) -> str:
    """``text`` with ``rows`` right after the row of ``test``."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(f"| {test} "))
    return "\n".join([*lines[:at + 1], *rows, *lines[at + 1:]]) + "\n"


# ---------------------------------------------------------------- applicability


def test_healthy_simulated_node_passes_both(facts: dict[str, Any]) -> None:
    assert_status(judge("GPU-12", facts), PASS, "GPU-12 ok: Overall Health Healthy")
    assert_status(judge("GPU-13", facts), PASS, "GPU-13 ok: 9 deployment tests Pass")


def test_a_topology_that_declares_no_dcgm_makes_both_not_applicable() -> None:
    assert dcgm_not_applicable(TOPOLOGY) is None
    reason = "topology hgx-h100-8gpu declares no DCGM (dcgm: {required: false})"
    for check_id in DCGM_CHECKS:
        assert not_applicable_reason(check_id, TOPOLOGY) is None
        assert not_applicable_reason(check_id, NO_DCGM) == reason


@pytest.mark.parametrize("check_id", DCGM_CHECKS)
def test_judged_anyway_without_dcgm_it_is_incomplete_never_pass(facts: dict[str, Any], check_id: str) -> None:
    assert_status(judge(check_id, facts, NO_DCGM), INCOMPLETE, "declares no DCGM")


# ---------------------------------------------------------------- DCGM not answering (both checks)

SOURCES = {"GPU-12": ("dcgmi-health", "dcgmi health -c"), "GPU-13": ("dcgmi-diag", "dcgmi diag -r 1")}


@pytest.mark.parametrize("check_id", DCGM_CHECKS)
def test_dcgmi_missing_is_incomplete(facts: dict[str, Any], check_id: str) -> None:
    set_output(facts, SOURCES[check_id][0], status=None, error="dcgmi: command not found")
    assert_status(judge(check_id, facts), INCOMPLETE,
                  "dcgmi is not installed (dcgmi: command not found); the topology expects DCGM")


@pytest.mark.parametrize("check_id", DCGM_CHECKS)
def test_hostengine_down_is_incomplete(facts: dict[str, Any], check_id: str) -> None:
    source, command = SOURCES[check_id]
    set_output(facts, source, HOSTENGINE_DOWN, status=235)
    assert_status(judge(check_id, facts), INCOMPLETE, f"nv-hostengine is not answering ({command}: Error: unable to "
                  "establish a connection")


@pytest.mark.parametrize("check_id", DCGM_CHECKS)
def test_a_timeout_is_incomplete_with_the_cause(facts: dict[str, Any], check_id: str) -> None:
    source, command = SOURCES[check_id]
    set_output(facts, source, status=None, error="dcgmi timed out after 5 s")
    assert_status(judge(check_id, facts), INCOMPLETE, f"{command}: dcgmi timed out after 5 s")


@pytest.mark.parametrize("check_id", DCGM_CHECKS)
def test_nothing_printed_is_incomplete(facts: dict[str, Any], check_id: str) -> None:
    source, command = SOURCES[check_id]
    set_output(facts, source, "  \n", status=139, stderr="warming up\nSegmentation fault\n")
    assert_status(judge(check_id, facts), INCOMPLETE, f"{command} printed nothing (exit status 139): "
                  "Segmentation fault")
    set_output(facts, source, "", status=1)
    assert judge(check_id, facts).reason.endswith("printed nothing (exit status 1)")


@pytest.mark.parametrize("check_id", DCGM_CHECKS)
def test_source_not_collected_or_failed_is_incomplete(facts: dict[str, Any], check_id: str) -> None:
    source = SOURCES[check_id][0]
    del facts["commands"][source]
    facts["sources"][source] = {"ok": False, "error": "timed out after 20 s", "duration_s": 20.0}
    assert_status(judge(check_id, facts), INCOMPLETE, f"{source}: timed out after 20 s")
    del facts["sources"][source]
    assert_status(judge(check_id, facts), INCOMPLETE, f"source {source!r} was not collected")


@pytest.mark.parametrize("check_id", DCGM_CHECKS)
def test_no_stdout_recorded_or_unreachable_node(facts: dict[str, Any], check_id: str) -> None:
    source, command = SOURCES[check_id]
    facts["commands"][source]["stdout"] = None
    assert_status(judge(check_id, facts), INCOMPLETE, f"{command}: no output recorded")
    assert_status(judge(check_id, {"unreachable": "ssh: connection refused"}), INCOMPLETE, "connection refused")


# ---------------------------------------------------------------- GPU-12


def test_health_warning_fails_naming_gpu_system_and_message(facts: dict[str, Any]) -> None:
    set_output(facts, "dcgmi-health", health("Warning", *incident(
        3, "PCIe system", "Warning", "Detected more than 8 PCIe replays per minute for GPU 3 :", "13")))
    verdict = judge("GPU-12", facts)
    assert_status(verdict, FAIL, "GPU-12 gpu3 PCIe system Warning: Detected more than 8 PCIe replays per minute "
                  "for GPU 3 : 13 (expected DCGM Overall Health Healthy (dcgmi health -c))")
    assert failing_subjects(verdict) == {"gpu3"}


def test_health_failure_and_switch_entities(facts: dict[str, Any]) -> None:
    rows = [*incident(1, "Memory system", "Failure", "GPU had an uncontained error (XID 95)"),
            *incident(2, "Internal error", "Warning", "Detected nonfatal errors on NvSwitch 2 link 4",
                      group="Switch"),
            *incident(0, "Internal error", "Failure", "ConnectX entity Id:0 uncorrectable fatal errors",
                      group="ConnectX")]
    set_output(facts, "dcgmi-health", health("Failure", *rows))
    verdict = judge("GPU-12", facts)
    assert_status(verdict, FAIL, "gpu1 Memory system Failure: GPU had an uncontained error (XID 95)",
                  "nvswitch2 Internal error Warning", "connectx0 Internal error Failure")
    assert failing_subjects(verdict) == {"gpu1", "nvswitch2", "connectx0"}


def test_overall_warning_without_incident_still_fails(facts: dict[str, Any]) -> None:
    set_output(facts, "dcgmi-health", health("Warning"))
    assert_status(judge("GPU-12", facts), FAIL, "GPU-12 Overall Health Warning (no incident listed)")
    set_output(facts, "dcgmi-health", health("Failure"))
    assert_status(judge("GPU-12", facts), FAIL, "Overall Health Failure (no incident listed)")


def test_an_incident_under_a_healthy_overall_still_fails(facts: dict[str, Any]) -> None:
    set_output(facts, "dcgmi-health", health("Healthy", *incident(4, "Thermal system", "Warning", "hot")))
    assert_status(judge("GPU-12", facts), FAIL, "gpu4 Thermal system Warning: hot")


@pytest.mark.parametrize(("overall", "level", "needle"), [
    ("Internal error", "Internal error", "DCGM reports Thermal system Internal error: x"),
    ("Healthy", "Unknown", "DCGM reports Thermal system Unknown: x"),
])
def test_an_unknown_health_word_is_incomplete(facts: dict[str, Any], overall: str, level: str,
                                              needle: str) -> None:
    set_output(facts, "dcgmi-health", health(overall, *incident(4, "Thermal system", level, "x")))
    verdict = judge("GPU-12", facts)
    assert_status(verdict, INCOMPLETE, needle)
    assert unmeasured_subjects(verdict) >= {"gpu4"}


def test_an_unknown_overall_word_is_incomplete(facts: dict[str, Any]) -> None:
    set_output(facts, "dcgmi-health", health("Internal error"))
    assert_status(judge("GPU-12", facts), INCOMPLETE, "DCGM reports Overall Health 'Internal error'")


def test_an_incident_marked_healthy_passes(facts: dict[str, Any]) -> None:
    set_output(facts, "dcgmi-health", health("Healthy", *incident(4, "Thermal system", "Healthy")))
    assert_status(judge("GPU-12", facts), PASS, "Overall Health Healthy")


def test_healthy_but_cut_short_is_incomplete(facts: dict[str, Any]) -> None:
    set_output(facts, "dcgmi-health", health("Healthy", closed=False))
    assert_status(judge("GPU-12", facts), INCOMPLETE, "dcgmi health -c output cut short (no closing border)")


def test_a_failure_beats_a_cut_short_report(facts: dict[str, Any]) -> None:
    set_output(facts, "dcgmi-health", health("Failure", *incident(0, "Memory system", "Failure", "m"),
                                             closed=False))
    assert_status(judge("GPU-12", facts), FAIL, "gpu0 Memory system Failure: m", "not measured")


def test_watches_not_set_is_incomplete_with_what_to_do(facts: dict[str, Any]) -> None:
    set_output(facts, "dcgmi-health", "Error: Health watches not enabled. Please enable watches. \n", status=253)
    assert_status(judge("GPU-12", facts), INCOMPLETE, "DCGM health watches are not set (expected `dcgmi health -s "
                  "a` at boot; dcgmi health -c: Error: Health watches not enabled. Please enable watches.)")


def test_another_dcgmi_error_is_incomplete(facts: dict[str, Any]) -> None:
    set_output(facts, "dcgmi-health", "Error: Unable to check health watches. Return: The Group is not found\n",
               status=253)
    assert_status(judge("GPU-12", facts), INCOMPLETE, "dcgmi health -c failed: Error: Unable to check health "
                  "watches. Return: The Group is not found")


def test_unreadable_health_output_is_incomplete_with_an_excerpt(facts: dict[str, Any]) -> None:
    set_output(facts, "dcgmi-health", "Segmentation fault (core dumped)\n")
    assert_status(judge("GPU-12", facts), INCOMPLETE, "dcgmi health -c output unreadable: dcgmi-health: no 'Health "
                  "Monitor Report' table", "Segmentation fault")


@pytest.mark.parametrize(("status", "expected"), [(0, PASS), (None, PASS), (1, INCOMPLETE)])
def test_a_report_with_an_error_exit_is_not_a_pass(facts: dict[str, Any], status: int | None, expected: Any) -> None:
    set_output(facts, "dcgmi-health", health("Healthy"), status=status)
    verdict = judge("GPU-12", facts)
    assert verdict.status is expected, verdict
    if expected is INCOMPLETE:
        assert "dcgmi health -c exited 1 after its report" in verdict.reason


def test_node_text_in_reasons_is_escaped(facts: dict[str, Any]) -> None:
    set_output(facts, "dcgmi-health", health("Warning", *incident(3, "PCIe system", "Warning", "bad \x1b[31mred")))
    reason = judge("GPU-12", facts).reason
    assert "\x1b" not in reason and "\\x1b[31mred" in reason
    set_output(facts, "dcgmi-health", "Error: \x1b]0;owned\x07 watches\n", status=1)
    reason = judge("GPU-12", facts).reason
    assert "\x1b" not in reason and "\x07" not in reason and "\\x1b]0;owned\\x07" in reason


def test_an_incident_without_message(facts: dict[str, Any]) -> None:
    set_output(facts, "dcgmi-health", health("Warning", *incident(5, "Power system", "Warning")))
    assert_status(judge("GPU-12", facts), FAIL, "gpu5 Power system Warning: no message")


# ---------------------------------------------------------------- GPU-13


def test_deployment_fail_names_test_gpu_from_the_message_and_dcgms_words(facts: dict[str, Any]) -> None:
    text = with_detail(diag(results={"Inforom": "Fail"}), "Inforom",
                       drow("Error", "A corrupt InfoROM has been detected in GPU 5."))
    set_output(facts, "dcgmi-diag", text, status=1)
    verdict = judge("GPU-13", facts)
    assert_status(verdict, FAIL, "GPU-13 gpu5 Inforom Fail: A corrupt InfoROM has been detected in GPU 5. "
                  "(expected every DCGM deployment test Pass (dcgmi diag -r 1))")
    assert failing_subjects(verdict) == {"gpu5"}


def test_wrapped_error_text_is_joined_back(facts: dict[str, Any]) -> None:
    text = with_detail(diag(results={"Page Retirement/Row Remap": "Fail"}), "Page Retirement/Row Remap",
                       drow("Error", "GPU 3 has uncorrectable memory errors and row "), drow("", " remappings are "
                                                                                              "pending"))
    set_output(facts, "dcgmi-diag", text, status=1)
    assert_status(judge("GPU-13", facts), FAIL, "gpu3 Page Retirement/Row Remap Fail: GPU 3 has uncorrectable "
                  "memory errors and row remappings are pending")


def test_a_fail_naming_no_gpu_is_the_nodes(facts: dict[str, Any]) -> None:
    text = with_detail(diag(results={"Denylist": "Fail"}), "Denylist", drow("Error", "Found driver on the denylist: "
                                                                                      "nouveau"))
    set_output(facts, "dcgmi-diag", text, status=1)
    verdict = judge("GPU-13", facts)
    assert_status(verdict, FAIL, "GPU-13 Denylist Fail: Found driver on the denylist: nouveau")
    assert failing_subjects(verdict) == {"node"}
    set_output(facts, "dcgmi-diag", diag(results={"Denylist": "Fail"}), status=1)
    assert_status(judge("GPU-13", facts), FAIL, "Denylist Fail: no message")


def test_per_gpu_results_fail_only_the_failing_gpus_with_their_own_message(facts: dict[str, Any]) -> None:
    rows = [drow("memory", "Fail"), drow("", "GPU0: Pass"), drow("", "GPU1: Fail"), drow("", "GPU2: Fail"),
            drow("Warning: GPU1", "Uncorrectable ECC errors found on GPU 1"),
            drow("Warning: GPU2", "Uncorrectable ECC errors found on GPU 2")]
    set_output(facts, "dcgmi-diag", diag(*rows), status=1)
    verdict = judge("GPU-13", facts)
    assert failing_subjects(verdict) == {"gpu1", "gpu2"}
    assert_status(verdict, FAIL, "gpu1 memory Fail: Uncorrectable ECC errors found on GPU 1;",
                  "gpu2 memory Fail: Uncorrectable ECC errors found on GPU 2 ")


def test_a_header_fail_over_passing_gpus_still_fails(facts: dict[str, Any]) -> None:
    rows = [drow("software", "Fail"), drow("", "GPU0: Pass"), drow("", "GPU1: Pass"), drow("Error", "denied")]
    set_output(facts, "dcgmi-diag", diag(*rows), status=1)
    assert_status(judge("GPU-13", facts), FAIL, "GPU-13 software Fail: denied")


def test_a_deployment_warning_is_incomplete_not_a_hardware_fail(facts: dict[str, Any]) -> None:
    text = with_detail(diag(results={"CUDA Main Library": "Warn"}), "CUDA Main Library",
                       drow("Warning", "Cannot open library libcuda.so.1: 'not found'"))
    set_output(facts, "dcgmi-diag", text, status=1)
    assert_status(judge("GPU-13", facts), INCOMPLETE, "DCGM deployment test CUDA Main Library warned, not a hardware "
                  "verdict: Cannot open library libcuda.so.1: 'not found'")


def test_a_warning_naming_a_gpu_is_filed_under_it(facts: dict[str, Any]) -> None:
    text = with_detail(diag(results={"Persistence Mode": "Warn"}), "Persistence Mode",
                       drow("Warning", "Persistence mode for GPU 6 is disabled."))
    set_output(facts, "dcgmi-diag", text, status=1)
    verdict = judge("GPU-13", facts)
    assert verdict.status is INCOMPLETE and unmeasured_subjects(verdict) == {"gpu6"}


def test_inforom_skip_is_dcgms_not_applicable_and_passes(facts: dict[str, Any]) -> None:
    set_output(facts, "dcgmi-diag", diag(results={"Inforom": "Skip"}))
    verdict = judge("GPU-13", facts)
    assert_status(verdict, PASS, "9 deployment tests Pass")
    assert any(f.measured == "Inforom Skip (DCGM skips it where the GPU does not report InfoROM validity)"
               for f in verdict.findings)


def test_any_other_skip_is_incomplete(facts: dict[str, Any]) -> None:
    set_output(facts, "dcgmi-diag", diag(results={"Persistence Mode": "Skip"}))
    assert_status(judge("GPU-13", facts), INCOMPLETE, "DCGM skipped Persistence Mode: no message")
    rows = [drow("software", "Pass"), drow("", "GPU0: Pass"), drow("", "GPU1: Skip")]
    set_output(facts, "dcgmi-diag", diag(*rows))
    verdict = judge("GPU-13", facts)
    assert verdict.status is INCOMPLETE and unmeasured_subjects(verdict) == {"gpu1"}


def test_an_unknown_result_word_is_incomplete(facts: dict[str, Any]) -> None:
    set_output(facts, "dcgmi-diag", diag(results={"Denylist": "Running"}))
    assert_status(judge("GPU-13", facts), INCOMPLETE, "DCGM test Denylist result 'Running'")


def test_no_test_result_is_incomplete(facts: dict[str, Any]) -> None:
    text = "\n".join([DIAG_BORDER, drow("Diagnostic", "Result"), DIAG_BORDER.replace("-", "="),
                      "|-----  Metadata  ----------+------------------------------------------------|",
                      drow("DCGM Version", "3.3.5"), DIAG_BORDER]) + "\n"
    set_output(facts, "dcgmi-diag", text)
    assert_status(judge("GPU-13", facts), INCOMPLETE, "dcgmi diag -r 1 printed no test result")


def test_a_table_cut_short_is_incomplete(facts: dict[str, Any]) -> None:
    set_output(facts, "dcgmi-diag", diag(closed=False), status=None)
    assert_status(judge("GPU-13", facts), INCOMPLETE, "dcgmi diag -r 1 result table cut short (no closing border)")


def test_an_error_outside_any_test_is_incomplete(facts: dict[str, Any]) -> None:
    text = diag().replace("| Denylist ", drow("Error", "GPU 3 went away") + "\n| Denylist ", 1)
    set_output(facts, "dcgmi-diag", text)
    assert_status(judge("GPU-13", facts), INCOMPLETE, "DCGM error outside any test: GPU 3 went away")


def test_dcgmi_error_lines_beside_a_table(facts: dict[str, Any]) -> None:
    set_output(facts, "dcgmi-diag", diag() + "Error: Diagnostic was interrupted\n", status=1)
    assert_status(judge("GPU-13", facts), INCOMPLETE, "dcgmi diag -r 1: Error: Diagnostic was interrupted")


def test_dcgmi_error_without_a_table(facts: dict[str, Any]) -> None:
    set_output(facts, "dcgmi-diag", "Error: Unable to complete diagnostic for group 2147483647.\n", status=226)
    assert_status(judge("GPU-13", facts), INCOMPLETE, "dcgmi diag -r 1 failed: Error: Unable to complete diagnostic")


def test_unreadable_diag_output_is_incomplete(facts: dict[str, Any]) -> None:
    set_output(facts, "dcgmi-diag", "terminate called after throwing an instance of 'std::bad_alloc'\n", status=134)
    assert_status(judge("GPU-13", facts), INCOMPLETE, "dcgmi diag -r 1 output unreadable: dcgmi-diag: no dcgmi diag "
                  "result table found", "bad_alloc")


@pytest.mark.parametrize(("status", "expected"), [(0, PASS), (None, PASS), (226, INCOMPLETE)])
def test_all_pass_with_an_error_exit_is_not_a_pass(facts: dict[str, Any], status: int | None,
                                                   expected: Any) -> None:
    set_output(facts, "dcgmi-diag", diag(), status=status)
    verdict = judge("GPU-13", facts)
    assert verdict.status is expected, verdict
    if expected is INCOMPLETE:
        assert "dcgmi diag -r 1 exited 226 though every test passed" in verdict.reason


def test_a_fail_with_its_error_exit_is_a_fail_not_incomplete(facts: dict[str, Any]) -> None:
    set_output(facts, "dcgmi-diag", diag(results={"Inforom": "Fail"}), status=226)
    verdict = judge("GPU-13", facts)
    assert verdict.status is FAIL and unmeasured_subjects(verdict) == set()


def test_json_output_is_read_too(facts: dict[str, Any]) -> None:
    doc = ('{"DCGM GPU Diagnostic": {"test_categories": [{"category": "Deployment", "tests": ['
           '{"name": "Inforom", "results": [{"gpu_ids": "2", "status": "Fail", '
           '"warnings": [{"warning": "A corrupt InfoROM has been detected in GPU 2."}]}]}]}]}}')
    set_output(facts, "dcgmi-diag", doc, status=1)
    assert_status(judge("GPU-13", facts), FAIL, "gpu2 Inforom Fail: A corrupt InfoROM has been detected in GPU 2.")


def test_one_test_reads_in_the_singular(facts: dict[str, Any]) -> None:
    text = "\n".join([DIAG_BORDER, DEPLOYMENT_SECTION, drow("software", "Pass"), DIAG_BORDER]) + "\n"
    set_output(facts, "dcgmi-diag", text)
    assert_status(judge("GPU-13", facts), PASS, "GPU-13 ok: 1 deployment test Pass")


def test_diag_messages_are_escaped(facts: dict[str, Any]) -> None:
    text = with_detail(diag(results={"Inforom": "Fail"}), "Inforom", drow("Error", "GPU 1 \x1b[2J cleared"))
    set_output(facts, "dcgmi-diag", text, status=1)
    reason = judge("GPU-13", facts).reason
    assert "\x1b" not in reason and "GPU 1 \\x1b[2J cleared" in reason


def test_a_long_message_is_cut_at_300_characters(facts: dict[str, Any]) -> None:
    chunks = ["x" * 54] * 8  # 432 characters once joined with spaces
    set_output(facts, "dcgmi-health", health("Warning", *incident(3, "PCIe system", "Warning", *chunks)))
    finding = next(f for f in judge("GPU-12", facts).findings if f.subject == "gpu3")
    message = finding.measured.removeprefix("PCIe system Warning: ")
    assert len(message) == 300 and message.endswith("...") and message.startswith("x" * 54 + " " + "x" * 54)
