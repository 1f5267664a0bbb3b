"""GPU-14 in the soak: one SDC round judged across the soak's nodes (burnin.soak.sdc), pure."""

from __future__ import annotations

import json
from typing import Any

from burnin.facts import Facts
from burnin.soak.sdc import judge_round
from burnin.topology.model import Topology

GOOD, BAD = "c37cef16" + "0" * 24, "2d72534d" + "0" * 24


def _facts(topology: Topology, node: str, wrong: int | None = None, error: str | None = None,
           unstable: int | None = None, garbage: int | None = None) -> Facts:
    buses = [d.bus_id for d in sorted(topology.gpus.devices, key=lambda d: d.index)]
    nvml = {"driver_version": "535.183.01", "cuda_driver_version": 12020,
            "gpus": [{"index": i, "bus_id": bus, "name": "NVIDIA H100 80GB HBM3"} for i, bus in enumerate(buses)]}
    doc: dict[str, Any] = {"burnin_sdc": 1, "error": error} if error else {
        "burnin_sdc": 1, "torch": "2.13.0", "cuda": "12.4", "size": 64, "repeat": 2,
        "gpus": [{"index": i, "bus_id": bus,
                  "digests": {"matmul/bf16": BAD if i == wrong else GOOD,
                              "softmax/fp32": "x" if i == garbage else GOOD},
                  "unstable": ["softmax/fp32"] if i == unstable else []} for i, bus in enumerate(buses)]}
    record = {"argv": ["python3"], "exit_status": 2 if error else 0, "stdout": json.dumps(doc), "stderr": "",
              "error": None}
    return Facts(node, {"sources": {"nvml": {"ok": True, "error": None}, "sdc": {"ok": True, "error": None}},
                        "nvml": nvml, "sdc": record})


def test_the_wrong_gpu_is_a_fatal_event_of_its_node_alone_at_the_rounds_time(h100_topology: Topology) -> None:
    facts = {n: _facts(h100_topology, n, wrong=3 if n == "b" else None) for n in ("a", "b", "c")}
    records, fatal = judge_round(facts, h100_topology, 4500.0, {"a": 0, "b": 1, "c": 0})
    assert list(fatal) == ["b"]
    (event,) = fatal["b"]
    assert (event.check, event.subject, event.t, event.fatal) == ("GPU-14", "gpu3", 4500.0, True)
    assert event.reason.startswith("GPU-14 gpu3 matmul/bf16 digest 2d72534d differs from the fleet's c37cef16 "
                                   "(7 of 8 GPUs of b, 23 of 24 in the run) at +01:15:00")
    by_node = {r.node: r for r in records}
    assert by_node["b"].failures == (event.reason,) and by_node["b"].attempt == 1
    assert by_node["a"].failures == by_node["a"].errors == () and by_node["a"].stage == "sdc"


def test_a_node_whose_workload_did_not_run_is_an_error_record_and_blames_nobody(h100_topology: Topology) -> None:
    facts = {"a": _facts(h100_topology, "a"), "b": _facts(h100_topology, "b", error="torch not importable")}
    records, fatal = judge_round(facts, h100_topology, 600.0, {"a": 0, "b": 0})
    assert fatal == {}
    by_node = {r.node: r for r in records}
    assert by_node["a"].errors == ()
    assert "torch not importable" in by_node["b"].errors[0]
    assert not by_node["b"].errors[0].startswith("GPU-14")  # the soak's reason puts the id in front, once


def test_a_digest_that_changed_between_repeats_fails_the_gpu_even_on_the_majority(h100_topology: Topology) -> None:
    facts = {n: _facts(h100_topology, n, unstable=5 if n == "a" else None) for n in ("a", "b", "c")}
    _, fatal = judge_round(facts, h100_topology, 600.0, dict.fromkeys(facts, 0))
    assert [(e.node, e.subject) for e in fatal["a"]] == [("a", "gpu5")] and list(fatal) == ["a"]
    assert fatal["a"][0].measured == "softmax/fp32 digest changed between the workload's 2 repeats"


def test_one_unreadable_digest_makes_the_node_unmeasured(h100_topology: Topology) -> None:
    facts = {n: _facts(h100_topology, n, garbage=2 if n == "b" else None) for n in ("a", "b", "c")}
    records, fatal = judge_round(facts, h100_topology, 600.0, dict.fromkeys(facts, 0))
    assert fatal == {}
    assert "SDC workload output unreadable" in {r.node: r for r in records}["b"].errors[0]


def test_an_unreadable_fleet_section_is_unmeasured_never_a_pass(h100_topology: Topology) -> None:
    from burnin.checks.base import evaluate
    from burnin.checks.sdc import SECTION, group_of, read_run

    facts = _facts(h100_topology, "a")
    facts.data[SECTION] = {"group": group_of(facts, read_run(facts)), "digests": ["not", "counts"]}
    verdict = evaluate("GPU-14", facts, h100_topology)
    assert verdict.status.value == "incomplete" and "SDC fleet section unreadable" in verdict.reason
