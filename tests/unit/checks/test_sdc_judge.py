"""GPU-14's judgement of one GPU's kernel against the run's digest counts, and its reading of the workload."""

from __future__ import annotations

from typing import Any

import pytest

from burnin.checks.sdc import judge_kernel, read_run, sdc_sections
from burnin.evaluate.verdict import Unmeasurable
from burnin.facts import Facts

GOOD, BAD, OTHER = "9c01aa" + "0" * 26, "3fa2bb" + "0" * 26, "77ee00" + "0" * 26


def test_a_gpu_off_the_majority_fails_with_its_digest_the_fleets_and_the_counts() -> None:
    status, text = judge_kernel("sim05", "matmul/bf16", BAD, {GOOD: 63, BAD: 1}, {GOOD: 7, BAD: 1}, 8)
    assert status == "fail"
    assert text == ("matmul/bf16 digest 3fa2bb00 differs from the fleet's 9c01aa00 "
                    "(7 of 8 GPUs of sim05, 63 of 64 in the run)")


def test_the_majority_digest_passes_even_beside_a_wrong_gpu() -> None:
    assert judge_kernel("sim01", "matmul/bf16", GOOD, {GOOD: 63, BAD: 1}, {GOOD: 8}, 8) == ("pass", "")


def test_every_gpu_agreeing_passes_even_alone() -> None:
    assert judge_kernel("sim01", "softmax/fp32", GOOD, {GOOD: 1}, {GOOD: 1}, 1) == ("pass", "")


@pytest.mark.parametrize("tally", [{GOOD: 1, BAD: 1}, {GOOD: 8, BAD: 8}, {GOOD: 3, BAD: 3, OTHER: 2}])
def test_no_strict_majority_is_incomplete_on_every_side(tally: dict[str, int]) -> None:
    for digest in tally:
        status, text = judge_kernel("sim01", "matmul/fp16", digest, tally, {digest: 1}, 8)
        assert status == "incomplete", tally
        assert "which GPU is wrong cannot be said" in text and f"{sum(tally.values())} GPUs" in text


def test_two_of_three_is_a_majority_but_one_of_two_is_not() -> None:
    assert judge_kernel("n1", "k", BAD, {GOOD: 2, BAD: 1}, {BAD: 1}, 1)[0] == "fail"
    assert judge_kernel("n1", "k", BAD, {GOOD: 1, BAD: 1}, {BAD: 1}, 1)[0] == "incomplete"


def test_a_digest_the_counts_never_saw_is_incomplete() -> None:
    assert judge_kernel("n1", "k", OTHER, {GOOD: 8}, {OTHER: 1}, 8)[0] == "incomplete"


def _facts(node: str, record: dict[str, Any] | None, *, ok: bool = True, error: str | None = None) -> Facts:
    data: dict[str, Any] = {"sources": {"sdc": {"ok": ok, "error": error}, "nvml": {"ok": True, "error": None}},
                            "nvml": {"driver_version": "535.183.01", "cuda_driver_version": 12020,
                                     "gpus": [{"name": "NVIDIA H100 80GB HBM3"}]}}
    if record is not None:
        data["sdc"] = record
    return Facts(node, data)


def _record(stdout: str, **extra: Any) -> dict[str, Any]:
    return {"argv": ["python3", "-c", "<burnin SDC workload>"], "exit_status": 0, "stdout": stdout, "stderr": "",
            "error": None, **extra}


def _doc(digest: str, gpus: int = 2) -> str:
    import json

    return json.dumps({"burnin_sdc": 1, "torch": "2.13.0", "cuda": "12.4", "size": 64, "repeat": 2, "gpus": [
        {"index": i, "bus_id": f"0000:{i:02x}:00.0", "name": "H100", "digests": {"matmul/bf16": digest},
         "unstable": []} for i in range(gpus)]})


@pytest.mark.parametrize(("facts", "cause"), [
    (_facts("n1", _record('{"burnin_sdc": 1, "error": "torch not importable by /usr/bin/python3: No module named '
                          '\'torch\'"}', exit_status=2)), "torch not importable"),
    (_facts("n1", _record("Segmentation fault", exit_status=139)), "not JSON (exit 139): Segmentation fault"),
    (_facts("n1", _record("", error="the SDC workload timed out after 60 s")), "timed out after 60 s"),
    (_facts("n1", None, ok=False, error="timed out after 60 s"), "sdc: timed out"),
    (_facts("n1", _record('{"burnin_sdc": 1, "gpus": [], "size": 64, "repeat": 2}')), "no GPU results"),
    (_facts("n1", _record('{"burnin_sdc": 1, "size": 64, "repeat": 2, "gpus": [{"bus_id": "x", "digests": '
                          '{"matmul/bf16": "NaN"}}]}')), "unreadable"),
])
def test_a_workload_that_measured_nothing_is_unmeasurable_with_its_cause(facts: Facts, cause: str) -> None:
    with pytest.raises(Unmeasurable) as caught:
        read_run(facts)
    assert cause in caught.value.reason


def test_sections_count_gpus_per_digest_over_the_group_and_skip_nodes_that_measured_nothing() -> None:
    facts = {"n1": _facts("n1", _record(_doc(GOOD))), "n2": _facts("n2", _record(_doc(GOOD))),
             "n3": _facts("n3", _record(_doc(BAD, gpus=1))),
             "n4": _facts("n4", _record('{"burnin_sdc": 1, "error": "no CUDA"}'))}
    sections = sdc_sections(facts)
    assert set(sections) == {"n1", "n2", "n3"}
    assert sections["n1"]["digests"] == {"matmul/bf16": {GOOD: 4, BAD: 1}}
    assert (sections["n1"]["nodes"], sections["n1"]["gpus"]) == (3, 5)


def test_another_torch_is_another_group() -> None:
    other = _doc(BAD).replace('"torch": "2.13.0"', '"torch": "2.4.0"')
    sections = sdc_sections({"n1": _facts("n1", _record(_doc(GOOD))), "n2": _facts("n2", _record(other))})
    assert sections["n1"]["digests"] == {"matmul/bf16": {GOOD: 2}}
    assert sections["n2"]["digests"] == {"matmul/bf16": {BAD: 2}}
