"""Edges of TOP-10 that planted bugs slipped through (bench/mutants on burnin/checks/pci_census.py).

Each test pins one decision: how many missing devices a reason lists before
"+N more" (four), and a function whose ids are not the three the collector writes.
"""

from __future__ import annotations

from typing import Any

from checks_support import FAIL, INCOMPLETE, TOPOLOGY, assert_status, judge
from test_checks_host_config import functions

GPUS = [(f"gpu{d.index}", d.bus_id) for d in TOPOLOGY.gpus.devices]


def test_four_missing_gpus_are_all_named(facts: dict[str, Any]) -> None:
    for _, bus in GPUS[:4]:
        del functions(facts)[bus]
    named = ", ".join(f"{name} {bus}" for name, bus in GPUS[:4])
    assert_status(judge("TOP-10", facts), FAIL, f"GPUs 4/8 on the bus (missing: {named}) (expected")


def test_a_fifth_missing_gpu_is_counted_not_named(facts: dict[str, Any]) -> None:
    for _, bus in GPUS[:5]:
        del functions(facts)[bus]
    named = ", ".join(f"{name} {bus}" for name, bus in GPUS[:4])
    verdict = judge("TOP-10", facts)
    assert_status(verdict, FAIL, f"GPUs 3/8 on the bus (missing: {named}, +1 more) (expected")
    assert GPUS[4][1] not in verdict.reason


def test_a_function_with_two_ids_is_unreadable(facts: dict[str, Any]) -> None:
    bus = GPUS[6][1]
    functions(facts)[bus] = ["0x10de", "0x2330"]
    assert_status(judge("TOP-10", facts), INCOMPLETE, f"GPUs: vendor/class unreadable at gpu6 {bus}",
                  f"node: vendor/class unreadable at {bus}")
