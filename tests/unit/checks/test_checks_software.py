"""INV-10 host software stack manifest: kernel, OFED, NCCL and DCGM against the topology's golden versions.

The healthy facts come from a simulated node read by the real collector. ``ofed_info -s`` and
``dcgmi --version`` are printed there in their documented shapes (``MLNX_OFED_LINUX-24.04-0.6.6.0:``,
``Version : 3.3.5``): ../shared holds no real capture of either tool.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from checks_support import FAIL, INCOMPLETE, NODE, PASS, TOPOLOGY, assert_status, failing_subjects, judge

from burnin.checks.base import not_applicable_reason
from burnin.checks.software import COMPONENTS, software_not_applicable
from burnin.topology.model import SOFTWARE_COMPONENTS, SoftwareManifest, Topology

Facts = dict[str, Any]
GOLDEN = {"kernel": "5.15.0-112-generic", "ofed": "MLNX_OFED_LINUX-24.04-0.6.6.0", "nccl": "2.21.5", "dcgm": "3.3.5"}
DCGMI = "Version : {client}\nBuild ID : 24\nBuild Type : Release\n"
HOSTENGINE = "\nHostengine build info:\nVersion : {engine}\nBuild ID : 24\n"


def naming(**components: str) -> Topology:
    """The shipped topology with a software manifest naming only ``components``."""
    return replace(TOPOLOGY, software=SoftwareManifest(source="test golden node", **components))


def software(facts: Facts) -> dict[str, Any]:
    section: dict[str, Any] = facts["software"]
    return section


def tool(facts: Facts, key: str, stdout: str = "", *, exit_status: int | None = 0, error: str | None = None,
         stderr: str = "") -> None:
    software(facts)[key] = {"argv": [key], "exit_status": exit_status, "stdout": stdout, "stderr": stderr,
                            "error": error}


def libraries(facts: Facts, *entries: tuple[str, str]) -> None:
    """NCCL libraries found: (real path, file name) each."""
    software(facts)["nccl"]["libraries"] = [{"path": path, "file": name, "real_path": f"{path}/{name}"}
                                            for path, name in entries]


def test_the_shipped_topology_names_the_simulators_stack() -> None:
    assert TOPOLOGY.software is not None
    assert {key: getattr(TOPOLOGY.software, key) for key in SOFTWARE_COMPONENTS} == GOLDEN
    assert tuple(c.key for c in COMPONENTS) == SOFTWARE_COMPONENTS


def test_a_healthy_node_passes_naming_every_version(facts: Facts) -> None:
    verdict = judge("INV-10", facts)
    assert verdict.status is PASS, verdict.reason
    assert verdict.reason == ("INV-10 ok: kernel 5.15.0-112-generic, OFED MLNX_OFED_LINUX-24.04-0.6.6.0, "
                              "NCCL 2.21.5, DCGM 3.3.5, DCGM hostengine 3.3.5 as topology hgx-h100-8gpu names")
    assert verdict.expected == ("kernel 5.15.0-112-generic, OFED MLNX_OFED_LINUX-24.04-0.6.6.0, NCCL 2.21.5, "
                                "DCGM 3.3.5 per topology hgx-h100-8gpu")
    assert verdict.node == NODE


def test_another_kernel_fails_with_measured_and_expected(facts: Facts) -> None:
    software(facts)["kernel_release"] = "5.15.0-91-generic"
    verdict = judge("INV-10", facts, naming(kernel="5.15.0-105-generic"))
    assert verdict.status is FAIL
    assert verdict.reason == "INV-10 kernel 5.15.0-91-generic (expected 5.15.0-105-generic)"


@pytest.mark.parametrize(("key", "stdout", "label", "shown"), [
    ("ofed_info", "MLNX_OFED_LINUX-23.10-1.1.9.0:\n", "OFED", "MLNX_OFED_LINUX-23.10-1.1.9.0"),
    ("ofed_info", "OFED-internal-24.04-0.6.6:\n", "OFED", "OFED-internal-24.04-0.6.6"),
    ("dcgmi", DCGMI.format(client="3.3.1"), "DCGM", "3.3.1"),
])
def test_each_tool_reported_component_fails_on_another_version(facts: Facts, key: str, stdout: str, label: str,
                                                              shown: str) -> None:
    tool(facts, key, stdout)
    verdict = judge("INV-10", facts)
    assert verdict.status is FAIL
    assert failing_subjects(verdict) == {label}
    assert verdict.reason.startswith(f"INV-10 {label} {shown} (expected ")


def test_a_stale_hostengine_fails_on_its_own(facts: Facts) -> None:
    tool(facts, "dcgmi", DCGMI.format(client="3.3.5") + HOSTENGINE.format(engine="3.2.6"))
    verdict = judge("INV-10", facts)
    assert verdict.reason == "INV-10 DCGM hostengine 3.2.6 (expected 3.3.5)"


def test_a_silent_hostengine_is_not_required(facts: Facts) -> None:
    tool(facts, "dcgmi", DCGMI.format(client="3.3.5"))
    verdict = judge("INV-10", facts)
    assert verdict.status is PASS
    assert "DCGM 3.3.5 as topology" in verdict.reason and "hostengine" not in verdict.reason


def test_another_nccl_fails(facts: Facts) -> None:
    libraries(facts, ("/usr/lib/x86_64-linux-gnu", "libnccl.so.2.18.5"))
    assert judge("INV-10", facts).reason == "INV-10 NCCL 2.18.5 (expected 2.21.5)"


def test_two_nccl_installs_of_one_version_pass(facts: Facts) -> None:
    libraries(facts, ("/usr/lib/x86_64-linux-gnu", "libnccl.so.2.21.5"), ("/usr/local/lib", "libnccl.so.2.21.5"))
    assert judge("INV-10", facts).status is PASS


def test_two_nccl_installs_of_different_versions_name_where(facts: Facts) -> None:
    libraries(facts, ("/usr/lib/x86_64-linux-gnu", "libnccl.so.2.21.5"), ("/usr/local/lib", "libnccl.so.2.18.5"))
    verdict = judge("INV-10", facts)
    assert verdict.status is FAIL
    assert verdict.reason == "INV-10 NCCL in /usr/local/lib 2.18.5 (expected 2.21.5)"
    assert {f.subject for f in verdict.findings} >= {"NCCL in /usr/lib/x86_64-linux-gnu", "NCCL in /usr/local/lib"}


def test_several_components_name_each_expectation(facts: Facts) -> None:
    software(facts)["kernel_release"] = "5.15.0-91-generic"
    libraries(facts, ("/usr/lib/x86_64-linux-gnu", "libnccl.so.2.18.5"))
    verdict = judge("INV-10", facts)
    assert verdict.reason == ("INV-10 kernel 5.15.0-91-generic; NCCL 2.18.5 "
                              "(expected kernel 5.15.0-112-generic; NCCL 2.21.5)")


def test_a_failure_does_not_hide_what_was_not_measured(facts: Facts) -> None:
    software(facts)["kernel_release"] = "5.15.0-91-generic"
    tool(facts, "ofed_info", error="ofed_info: command not found")
    verdict = judge("INV-10", facts)
    assert_status(verdict, FAIL, "INV-10 kernel 5.15.0-91-generic (expected 5.15.0-112-generic)",
                  "not measured: OFED ofed_info: command not found")


def test_a_component_the_topology_does_not_name_is_not_judged(facts: Facts) -> None:
    software(facts)["kernel_release"] = "garbage kernel"
    tool(facts, "dcgmi", error="dcgmi: command not found")
    libraries(facts)
    verdict = judge("INV-10", facts, naming(ofed="MLNX_OFED_LINUX-24.04-0.6.6.0"))
    assert verdict.status is PASS, verdict.reason
    assert verdict.reason == ("INV-10 ok: OFED MLNX_OFED_LINUX-24.04-0.6.6.0 as topology hgx-h100-8gpu names; "
                              "not judged (the topology names none): kernel, NCCL, DCGM")


@pytest.mark.parametrize(("change", "cause"), [
    (lambda f: software(f).update(kernel_release=None), "kernel: /proc/sys/kernel/osrelease unreadable (None)"),
    (lambda f: software(f).update(kernel_release="  "), "kernel: /proc/sys/kernel/osrelease unreadable ('  ')"),
    (lambda f: software(f).update(kernel_release=5), "kernel: /proc/sys/kernel/osrelease unreadable (5)"),
    (lambda f: tool(f, "ofed_info", error="ofed_info: command not found"), "OFED: ofed_info: command not found"),
    (lambda f: tool(f, "ofed_info", "", exit_status=1, stderr="ofed_info: no OFED installed\n"),
     "OFED: ofed_info -s exited 1: ofed_info: no OFED installed"),
    (lambda f: tool(f, "ofed_info", "", exit_status=127), "OFED: ofed_info -s exited 127"),
    (lambda f: tool(f, "ofed_info", "", exit_status=None, error="ofed_info timed out after 2.5 s"),
     "OFED: ofed_info timed out after 2.5 s"),
    (lambda f: tool(f, "ofed_info", "23.10-1.1.9.0\n"), "OFED: ofed_info -s output unreadable: ofed_info: no release"),
    (lambda f: tool(f, "ofed_info", None), "OFED: ofed_info -s exited 0"),  # type: ignore[arg-type]
    (lambda f: software(f).pop("ofed_info"), "OFED: ofed_info -s not run"),
    (lambda f: tool(f, "dcgmi", error="dcgmi: command not found"), "DCGM: dcgmi: command not found"),
    (lambda f: tool(f, "dcgmi", "Error: unable to establish a connection\n", exit_status=255),
     "DCGM: dcgmi --version exited 255: Error: unable to establish a connection"),
    (lambda f: tool(f, "dcgmi", "Build ID : 24\n"), "DCGM: dcgmi --version output unreadable: dcgmi-version: no "),
    (lambda f: libraries(f), "NCCL: no libnccl.so* in /usr/lib/x86_64-linux-gnu, /usr/lib/aarch64-linux-gnu, "),
    (lambda f: libraries(f, ("/opt/nccl/lib", "libnccl.so.2")),
     "NCCL: NCCL library 'libnccl.so.2' names no version (libnccl.so.X.Y.Z)"),
    (lambda f: libraries(f, ("/opt/nccl/lib", "libnccl.so.2.21")), "NCCL: NCCL library 'libnccl.so.2.21' names no"),
    (lambda f: software(f)["nccl"].update(libraries=[None]), "NCCL: NCCL library None names no version"),
    (lambda f: software(f).update(nccl=None), "NCCL: NCCL libraries not listed (None)"),
    (lambda f: software(f)["nccl"].update(libraries="libnccl.so.2.21.5"), "NCCL: NCCL libraries not listed"),
])
def test_a_named_component_the_node_cannot_report_is_incomplete(facts: Facts, change: Any, cause: str) -> None:
    change(facts)
    assert_status(judge("INV-10", facts), INCOMPLETE, f"INV-10 could not be measured: {cause}")


def test_no_library_folder_listed_says_so(facts: Facts) -> None:
    software(facts)["nccl"] = {"libraries": []}
    assert_status(judge("INV-10", facts), INCOMPLETE, "NCCL: no libnccl.so* in the library folders")


def test_a_failed_source_is_incomplete(facts: Facts) -> None:
    facts["sources"]["software"] = {"ok": False, "error": "timed out after 5 s"}
    assert_status(judge("INV-10", facts), INCOMPLETE, "INV-10 could not be measured: software: timed out after 5 s")


def test_facts_without_the_source_are_incomplete(facts: Facts) -> None:
    del facts["sources"]["software"]
    assert_status(judge("INV-10", facts), INCOMPLETE, "source 'software' was not collected")


def test_unreadable_facts_are_incomplete(facts: Facts) -> None:
    facts["software"] = ["not", "a", "mapping"]
    assert_status(judge("INV-10", facts), INCOMPLETE, "software facts unreadable: ['not', 'a', 'mapping']")


def test_a_node_reported_version_is_shown_printable_and_bounded(facts: Facts) -> None:
    software(facts)["kernel_release"] = "5.15.0-\x1b[31m" + "x" * 200
    verdict = judge("INV-10", facts)
    assert verdict.status is FAIL
    assert "\x1b" not in verdict.reason and len(verdict.reason) < 200


def test_a_topology_without_a_manifest_declares_inv10_not_applicable(facts: Facts) -> None:
    bare = replace(TOPOLOGY, software=None)
    assert not_applicable_reason("INV-10", bare) == \
        "topology hgx-h100-8gpu declares no software manifest (no software section)"
    assert software_not_applicable(TOPOLOGY) is None
    # called anyway, never a pass
    assert_status(judge("INV-10", facts, bare), INCOMPLETE, "declares no software manifest")


@pytest.mark.parametrize(("length", "whole"), [(64, True), (65, False)])
def test_a_version_is_shown_whole_up_to_64_characters(facts: Facts, length: int, whole: bool) -> None:
    release = "5.15.0-" + "9" * (length - 7)
    software(facts)["kernel_release"] = release
    reason = judge("INV-10", facts).reason
    assert (f"kernel {release} (" in reason) is whole, reason
    if not whole:
        assert f"kernel {release[:61]}... (" in reason


def test_only_the_last_line_a_tool_printed_is_quoted(facts: Facts) -> None:
    tool(facts, "ofed_info", "", exit_status=2, stderr="first line\nsecond line\nlast line\n")
    reason = judge("INV-10", facts).reason
    assert reason.endswith("OFED: ofed_info -s exited 2: last line"), reason
    assert "second line" not in reason


@pytest.mark.parametrize("searched", ["/usr/lib", [], None, {"/usr/lib": 1}])
def test_folders_searched_are_named_only_from_a_list(facts: Facts, searched: object) -> None:
    software(facts)["nccl"] = {"searched": searched, "libraries": []}
    assert_status(judge("INV-10", facts), INCOMPLETE, "NCCL: no libnccl.so* in the library folders")
