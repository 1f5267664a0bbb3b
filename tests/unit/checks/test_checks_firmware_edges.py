"""Edges of INV-02 that planted bugs slipped through (bench/mutants on burnin/checks/firmware.py).

Each test pins one decision: how much of a node-reported version a reason shows
(40 characters), and how a GPU that carries no slot number is named (as itself:
it used to be folded into a GPU "gpu-1" that does not exist).
"""

from __future__ import annotations

from typing import Any

from checks_support import FAIL, assert_status, failing_subjects, gpu, judge
from test_checks_firmware import QUALIFIED_VBIOS, consistency_only, set_vbios

UNKNOWN_BUS = "0000:f1:00.0"  # an address the topology has no GPU at


def test_a_version_of_40_characters_is_shown_whole(facts: dict[str, Any]) -> None:
    version = "96.00.74.00.0D-" + "x" * 25
    assert len(version) == 40
    set_vbios(facts, [2], version)
    verdict = judge("INV-02", facts)
    assert_status(verdict, FAIL, f"gpu2 VBIOS {version} (expected")


def test_a_version_of_41_characters_is_cut_to_37_and_an_ellipsis(facts: dict[str, Any]) -> None:
    version = "96.00.74.00.0D-" + "x" * 26
    set_vbios(facts, [2], version)
    verdict = judge("INV-02", facts)
    assert_status(verdict, FAIL, f"gpu2 VBIOS {version[:37]}... (expected")
    assert version[:38] not in verdict.reason


def unnumbered(facts: dict[str, Any], index: int) -> None:
    """NVML listed the GPU at an address the topology does not know, and gave no index."""
    record = gpu(facts, index)
    record["bus_id"] = UNKNOWN_BUS
    record.pop("index")


def test_a_deviating_gpu_without_a_slot_number_is_named_as_itself(facts: dict[str, Any]) -> None:
    unnumbered(facts, 3)
    set_vbios(facts, [5], "96.00.99.00.01")
    next(g for g in facts["nvml"]["gpus"] if g.get("bus_id") == UNKNOWN_BUS)["vbios"] = "96.00.99.00.01"
    verdict = judge("INV-02", facts)
    assert verdict.reason == ("INV-02 gpu5,gpuNone VBIOS 96.00.99.00.01 (expected VBIOS "
                              f"{QUALIFIED_VBIOS} as on gpu0-2,4,6-7 and per topology hgx-h100-8gpu)")
    assert "gpu-1" not in verdict.reason


def test_a_gpu_without_a_slot_number_is_named_among_the_majority(facts: dict[str, Any]) -> None:
    unnumbered(facts, 3)
    set_vbios(facts, [6], "96.00.99.00.01")
    verdict = judge("INV-02", facts, consistency_only())
    assert_status(verdict, FAIL, f"gpu6 VBIOS 96.00.99.00.01 (expected VBIOS {QUALIFIED_VBIOS} "
                                 "as on gpu0-2,4-5,7,gpuNone;")
    assert failing_subjects(verdict) == {"gpu6"}
