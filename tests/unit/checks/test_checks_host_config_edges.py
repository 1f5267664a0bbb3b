"""Edges of TOP-06 and TOP-09 that planted bugs slipped through (bench/mutants on burnin/checks/host_config.py).

Each test pins one decision: when a pass names the cpufreq driver, a present-CPU
list that could not be read, the NUMA spread's own bounds (0 allowed, 1 and
negative refused), the NUMA nodes judged when the topology lists no cpulists,
the bound of the spread itself, and what the largest node's finding says.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import pytest
from checks_support import FAIL, INCOMPLETE, PASS, TOPOLOGY, assert_status, failing_subjects, judge
from test_checks_host_config import host, set_node_memtotal, with_host, with_reference

from burnin.topology.model import Reference

SPREAD_SOURCE = "site: NUMA nodes' MemTotal"


def spread(value: float) -> Any:
    return with_reference("numa_memory_spread", Reference(value, SPREAD_SOURCE, unit="fraction"))


def test_a_pass_names_the_cpufreq_driver_that_runs_the_governor(facts: dict[str, Any]) -> None:
    verdict = judge("TOP-06", facts)
    assert verdict.reason == "TOP-06 ok: governor performance on all 224 online CPUs (intel_pstate)"


@pytest.mark.parametrize("driver", [None, "", "intel\x1b[2Jpstate", 7])
def test_a_driver_that_could_not_be_read_is_not_named(facts: dict[str, Any], driver: object) -> None:
    host(facts)["cpufreq_driver"] = driver
    verdict = judge("TOP-06", facts)
    assert verdict.reason == "TOP-06 ok: governor performance on all 224 online CPUs"


def test_a_pass_without_cpufreq_names_no_driver(facts: dict[str, Any]) -> None:
    """The BIOS owns P-states: a driver name in the reason would contradict "no cpufreq driver"."""
    host(facts)["governors"] = dict.fromkeys(host(facts)["governors"])
    verdict = judge("TOP-06", facts, with_host(cpu_governor=None))
    assert verdict.reason == "TOP-06 ok: no cpufreq driver on all 224 online CPUs"


@pytest.mark.parametrize("present", [None, "", 224])
def test_an_unreadable_present_list_still_judges_the_online_count(facts: dict[str, Any], present: object) -> None:
    host(facts)["cpu_online"] = "0-16,18-223"
    host(facts)["cpu_present"] = present
    verdict = judge("TOP-09", facts)
    assert_status(verdict, FAIL, "223 CPUs online (expected", "224 CPUs online")
    assert "offline:" not in verdict.reason


def test_a_spread_of_zero_demands_equal_nodes(facts: dict[str, Any]) -> None:
    for node in (0, 1):
        set_node_memtotal(facts, node, 1056440320)
    assert judge("TOP-09", facts, spread(0)).status is PASS
    set_node_memtotal(facts, 1, 1056440320 - 4)
    verdict = judge("TOP-09", facts, spread(0))
    assert_status(verdict, FAIL, "numa1 MemTotal 1007.5 GiB (0.0% below the largest node)")


@pytest.mark.parametrize("value", [-0.01, 1, 1.5])
def test_a_spread_that_is_not_a_fraction_is_incomplete(facts: dict[str, Any], value: float) -> None:
    verdict = judge("TOP-09", facts, spread(value))
    assert_status(verdict, INCOMPLETE, f"numa_memory_spread {value:g} is not a fraction 0..1")


def test_nodes_are_judged_when_the_topology_lists_no_cpulists(facts: dict[str, Any]) -> None:
    no_cpulists = replace(TOPOLOGY, numa=replace(TOPOLOGY.numa, cpulists={}))
    assert judge("TOP-09", facts, no_cpulists).status is PASS
    set_node_memtotal(facts, 1, 1056440320 - 64 * 1024 * 1024)
    verdict = judge("TOP-09", facts, no_cpulists)
    assert_status(verdict, FAIL, "numa1 MemTotal 943.5 GiB")
    assert failing_subjects(verdict) == {"numa1"}


def test_a_node_exactly_at_the_spread_passes(facts: dict[str, Any]) -> None:
    largest = 1056440300  # divisible by 100: 1% below it is a whole number of kB
    set_node_memtotal(facts, 0, largest)
    set_node_memtotal(facts, 1, largest * 99 // 100)
    assert judge("TOP-09", facts).status is PASS
    set_node_memtotal(facts, 1, largest * 99 // 100 - 1)
    assert_status(judge("TOP-09", facts), FAIL, "numa1", "(1.0% below the largest node)")


def test_the_largest_nodes_finding_says_no_shortfall(facts: dict[str, Any]) -> None:
    set_node_memtotal(facts, 0, 1056440320)
    set_node_memtotal(facts, 1, 1056440320 - 1024 * 1024)
    verdict = judge("TOP-09", facts)
    assert verdict.status is PASS
    numa = {f.subject: f.measured for f in verdict.findings if re.fullmatch(r"numa\d", f.subject)}
    assert numa == {"numa0": "MemTotal 1007.5 GiB", "numa1": "MemTotal 1006.5 GiB (0.1% below the largest node)"}
