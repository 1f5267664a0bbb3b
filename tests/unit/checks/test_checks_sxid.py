"""INV-04 and NVSwitch SXids: a fatal SXid since boot fails its switch; non-fatal ones and continuation lines
do not. Line shapes as the nvidia-nvswitch driver prints them (see tests/unit/parsers/test_parse_formats.py)."""

from __future__ import annotations

from typing import Any

from checks_support import FAIL, INCOMPLETE, PASS, failing_subjects, judge

Facts = dict[str, Any]

FATAL = "[ 2317.531452] nvidia-nvswitch3: SXid (PCI:0000:8a:00.0): 24007, Fatal, Link 40 sourcetrack TCEN0 " \
        "crumbstore ECC DBE Error\n"
CONTINUATION = "[ 2317.531460] nvidia-nvswitch3: SXid (PCI:0000:8a:00.0): 24007, Severity 0 Engine instance 40 " \
               "Sub-engine instance 00\n"
NON_FATAL = "[ 2318.000001] nvidia-nvswitch1: SXid (PCI:0000:86:00.0): 12028, Non-fatal, Link 41 egress " \
            "non-posted PRIV error (First)\n"


def _log(facts: Facts, *lines: str) -> None:
    facts["commands"]["dmesg"]["stdout"] += "".join(lines)


def test_a_fatal_sxid_fails_naming_the_switch_the_code_and_the_text(facts: Facts) -> None:
    _log(facts, FATAL, CONTINUATION, FATAL)
    verdict = judge("INV-04", facts)
    assert verdict.status is FAIL and failing_subjects(verdict) == {"nvidia-nvswitch3"}
    assert "SXid 24007 Fatal: Link 40 sourcetrack TCEN0 crumbstore ECC DBE Error" in verdict.reason
    assert verdict.reason.count("SXid 24007") == 1  # the repeat and the continuation are one cause


def test_non_fatal_sxids_and_continuations_do_not_reject_but_are_counted(facts: Facts) -> None:
    _log(facts, NON_FATAL, NON_FATAL.replace("12028", "12029"), CONTINUATION)
    verdict = judge("INV-04", facts)
    assert verdict.status is PASS, verdict.reason
    assert "2 non-fatal SXid line(s)" in verdict.measured


def test_a_fatal_sxid_without_the_device_prefix_is_named_by_its_pci_address(facts: Facts) -> None:
    _log(facts, "[ 5.0] SXid (PCI:0000:8a:00.0): 20034, Fatal, Link 44 LTSSM Fault Up\n")
    verdict = judge("INV-04", facts)
    assert verdict.status is FAIL and failing_subjects(verdict) == {"NVSwitch PCI 0000:8a:00.0"}


def test_an_empty_kernel_log_leaves_inv04_incomplete(facts: Facts) -> None:
    facts["commands"]["dmesg"].update(stdout="", lines_total=0)
    verdict = judge("INV-04", facts)
    assert verdict.status is INCOMPLETE and "dmesg printed nothing" in verdict.reason


def test_a_healthy_node_passes_with_no_sxid(facts: Facts) -> None:
    verdict = judge("INV-04", facts)
    assert verdict.status is PASS and "non-fatal" not in verdict.measured
