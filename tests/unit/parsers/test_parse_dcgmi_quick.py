"""``dcgmi diag -r 1`` (GPU-13) through the diag parser, and dcgmi's own ``Error:`` lines.

Level 1 runs DCGM's deployment tests only, so it prints the same table as the real level-2/3 samples in
``../shared/reference/dcgmi``, ending after the ``Deployment`` section. Every real sample is read here and
judged the way GPU-13 judges it: a sample cut short is never a pass.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from burnin.checks.dcgm import diag_findings
from burnin.errors import ParseError
from burnin.evaluate.verdict import Status, roll_up
from burnin.parsers.dcgmi import command_errors, parse_dcgmi_diag

SAMPLES = {
    # file -> (status GPU-13 gives, subjects it fails)
    "dcgmi/diag-r2-fragment-gpu-memory-fail-thermal.txt": (Status.FAIL, {"gpu0"}),
    "dcgmi/diag-r3-fragment-row-remap-pending.txt": (Status.INCOMPLETE, set()),
    "dcgmi/diag-r2-metadata-deployment-dcgm331-go-dcgm-issue52.txt": (Status.INCOMPLETE, set()),
    "dcgmi/diag-r3-deployment-section-dcgm304-issue55.txt": (Status.INCOMPLETE, set()),
}
BORDER = "+---------------------------+------------------------------------------------+"


def _judge(text: str) -> tuple[Status, set[str], str]:
    verdict = roll_up("GPU-13", "n1", diag_findings(parse_dcgmi_diag(text)), expected="all Pass")
    failed = {f.subject for f in verdict.findings if f.status is Status.FAIL}
    return verdict.status, failed, verdict.reason


def test_every_real_sample_is_listed(ref_dir: Path) -> None:
    found = {f"dcgmi/{p.name}" for p in (ref_dir / "dcgmi").iterdir() if p.is_file()}
    assert found == set(SAMPLES)


@pytest.mark.parametrize("rel", sorted(SAMPLES))
def test_every_real_sample_is_judged_never_passed_when_cut(ref: Callable[[str], str], rel: str) -> None:
    status, failed, reason = _judge(ref(rel))
    assert (status, failed) == SAMPLES[rel], reason


def test_real_remap_fragment_keeps_dcgms_message(ref: Callable[[str], str]) -> None:
    status, _, reason = _judge(ref("dcgmi/diag-r3-fragment-row-remap-pending.txt"))
    assert status is Status.INCOMPLETE
    assert "GPU 3 has uncorrectable memory errors and row remappings are pending" in reason
    assert "no test result" in reason and "cut short" in reason


def test_real_memory_fragment_names_gpu_and_message(ref: Callable[[str], str]) -> None:
    _, _, reason = _judge(ref("dcgmi/diag-r2-fragment-gpu-memory-fail-thermal.txt"))
    assert reason.startswith("GPU-13 gpu0 GPU Memory Fail: GPU 0 Thermal violations totaling 13.3 seconds")


def level_one(ref: Callable[[str], str]) -> str:
    """The real DCGM 3.0.4 deployment section, closed where level 1 ends (before Integration)."""
    text = ref("dcgmi/diag-r3-deployment-section-dcgm304-issue55.txt")
    head, sep, _ = text.partition("+-----  Integration")
    assert sep
    return head + BORDER + "\n"


def test_level_one_table_from_the_real_section_passes(ref: Callable[[str], str]) -> None:
    diag = parse_dcgmi_diag(level_one(ref))
    assert diag.truncated is False and len(diag.tests) == 9
    assert {t.category for t in diag.tests} == {"Deployment"}
    status, failed, reason = _judge(level_one(ref))
    assert (status, failed) == (Status.PASS, set()), reason


def test_level_one_with_the_real_metadata_section(ref: Callable[[str], str]) -> None:
    text = ref("dcgmi/diag-r2-metadata-deployment-dcgm331-go-dcgm-issue52.txt").rstrip("\n") + "\n" + BORDER + "\n"
    diag = parse_dcgmi_diag(text)
    assert diag.metadata["DCGM Version"] == "3.3.1" and diag.truncated is False
    assert _judge(text)[0] is Status.PASS


def test_garbage_is_a_parse_error_with_an_excerpt() -> None:
    with pytest.raises(ParseError, match="no dcgmi diag result table found") as caught:
        parse_dcgmi_diag("dcgmi: something else entirely\nand more\n")
    assert caught.value.tool == "dcgmi-diag" and "something else" in caught.value.excerpt


# ----------------------------------------------------------------------------- command_errors

HOSTENGINE_DOWN = ("Error: unable to establish a connection to the specified host: localhost\n"
                   "Error: Unable to connect to host engine. Host engine connection invalid/disconnected.\n")


def test_command_errors_are_dcgmis_error_lines_in_order() -> None:
    assert command_errors(HOSTENGINE_DOWN) == (
        "unable to establish a connection to the specified host: localhost",
        "Unable to connect to host engine. Host engine connection invalid/disconnected.",
    )
    assert command_errors("Error: Health watches not enabled. Please enable watches. \n") == (
        "Health watches not enabled. Please enable watches.",)


def test_command_errors_ignore_table_rows_and_other_text() -> None:
    text = ("| Error                     | GPU 3 has uncorrectable memory errors and row  |\n"
            "Successfully ran diagnostic for group.\nNo Error: here\nError:\nError:  \n")
    assert command_errors(text) == ()
    assert command_errors("  Error: indented\n") == ("indented",)
    assert command_errors("         Error: too far in\n") == ()
