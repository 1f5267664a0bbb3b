"""IB-01..IB-04, table-driven: every compute HCA, every counter alone at its bound."""

from __future__ import annotations

from typing import Any

import pytest
from checks_support import (
    COMPUTE_HCAS,
    FAIL,
    INCOMPLETE,
    PASS,
    STORAGE_HCAS,
    assert_status,
    failing_subjects,
    judge,
    port,
    unmeasured_subjects,
)

from burnin.checks.infiniband import ERROR_COUNTERS, FATAL_COUNTERS
from burnin.evaluate.verdict import Status

Facts = dict[str, Any]
# Counters the catalog records but does not judge (congestion, management traffic).
UNJUDGED = ("port_xmit_discards", "VL15_dropped", "port_rcv_switch_relay_errors", "port_xmit_constraint_errors",
            "port_rcv_constraint_errors")


@pytest.mark.parametrize("hca", COMPUTE_HCAS)
@pytest.mark.parametrize(("state", "phys", "status"), [
    ("4: ACTIVE", "5: LinkUp", PASS),
    ("1: DOWN", "2: Polling", FAIL),
    ("2: INIT", "5: LinkUp", FAIL),
    ("3: ARMED", "5: LinkUp", FAIL),
    ("4: ACTIVE", "3: Disabled", FAIL),
])
def test_port_state_on_every_compute_hca(facts: Facts, hca: str, state: str, phys: str, status: Status) -> None:
    port(facts, hca).update(state=state, phys_state=phys)
    verdict = judge("IB-01", facts)
    assert verdict.status is status, verdict.reason
    if status is FAIL:
        assert failing_subjects(verdict) == {hca}


def test_storage_port_state_is_not_ib01s(facts: Facts) -> None:
    port(facts, STORAGE_HCAS[0]).update(state="1: DOWN", phys_state="3: Disabled")
    assert judge("IB-01", facts).status is PASS


@pytest.mark.parametrize("hca", COMPUTE_HCAS)
@pytest.mark.parametrize(("rate", "status"), [
    ("400 Gb/sec (4X NDR)", PASS),
    ("399.9 Gb/sec (4X NDR)", FAIL),
    ("200 Gb/sec (4X HDR)", FAIL),
    ("800 Gb/sec (4X XDR)", PASS),
    ("0 Gb/sec", INCOMPLETE),  # an ACTIVE port at 0 Gb/s is no reading
    ("", INCOMPLETE),
    (None, INCOMPLETE),
])
def test_port_rate_on_every_compute_hca(facts: Facts, hca: str, rate: str | None, status: Status) -> None:
    port(facts, hca)["rate"] = rate
    verdict = judge("IB-02", facts)
    assert verdict.status is status, verdict.reason
    if status is FAIL:
        assert failing_subjects(verdict) == {hca} and str(rate) in verdict.reason


def test_rate_of_a_port_that_is_down_is_not_measured(facts: Facts) -> None:
    """It used to pass ('rate not judged'): a rate nobody could read is not a pass."""
    port(facts, "mlx5_2").update(state="1: DOWN", rate="40 Gb/sec (4X QDR)")
    verdict = judge("IB-02", facts)
    assert_status(verdict, INCOMPLETE, "mlx5_2", "not ACTIVE")


@pytest.mark.parametrize("hca", [*COMPUTE_HCAS, *STORAGE_HCAS])
def test_wrong_link_layer_on_every_hca(facts: Facts, hca: str) -> None:
    layer = port(facts, hca)["link_layer"]
    port(facts, hca)["link_layer"] = "Ethernet" if layer == "InfiniBand" else "InfiniBand"
    verdict = judge("IB-03", facts)
    assert verdict.status is FAIL and failing_subjects(verdict) == {hca}


@pytest.mark.parametrize("hca", COMPUTE_HCAS)
def test_absent_compute_hca_fails(facts: Facts, hca: str) -> None:
    del facts["infiniband"]["hcas"][hca]
    for check_id in ("IB-01", "IB-02", "IB-04"):
        verdict = judge(check_id, facts)
        assert verdict.status is FAIL and failing_subjects(verdict) == {hca}, verdict.reason


# ------------------------------------------------------------------ IB-04

COUNTER_BOUNDS = [(name, value, FAIL if value > 0 else PASS) for name in FATAL_COUNTERS for value in (0, 1, 50)]
COUNTER_BOUNDS += [(name, value, FAIL if value > 100 else PASS) for name in ERROR_COUNTERS
                   for value in (0, 1, 99, 100, 101)]
COUNTER_BOUNDS += [(name, 10**6, PASS) for name in UNJUDGED]


@pytest.mark.parametrize("hca", COMPUTE_HCAS)
@pytest.mark.parametrize(("counter", "value", "status"), COUNTER_BOUNDS,
                         ids=[f"{c}={v}" for c, v, _ in COUNTER_BOUNDS])
def test_each_counter_alone_on_every_compute_hca(facts: Facts, hca: str, counter: str, value: int,
                                                 status: Status) -> None:
    port(facts, hca)["counters"][counter] = value
    verdict = judge("IB-04", facts)
    assert verdict.status is status, verdict.reason
    if status is FAIL:
        assert failing_subjects(verdict) == {hca}
        assert f"{counter}={value}" in verdict.reason


def test_counters_are_judged_per_port_not_summed(facts: Facts) -> None:
    for hca in COMPUTE_HCAS:
        port(facts, hca)["counters"]["symbol_error"] = 100
    assert judge("IB-04", facts).status is PASS


def test_baseline_is_named(facts: Facts) -> None:
    facts["counter_baseline"] = "2026-03-01T00:00:00Z"
    port(facts, "mlx5_5")["counters"]["link_downed"] = 1
    assert_status(judge("IB-04", facts), FAIL, "link_downed=1 since baseline 2026-03-01T00:00:00Z")


@pytest.mark.parametrize("hca", COMPUTE_HCAS)
@pytest.mark.parametrize("counter", (*FATAL_COUNTERS, *ERROR_COUNTERS))
def test_absent_counter_is_not_measured(facts: Facts, hca: str, counter: str) -> None:
    """The IB-04 fail-open: a counter the collector could not read used to be ignored."""
    del port(facts, hca)["counters"][counter]
    verdict = judge("IB-04", facts)
    assert verdict.status is INCOMPLETE and unmeasured_subjects(verdict) == {hca}
    assert counter in verdict.reason


def test_absent_counter_does_not_hide_a_fault_elsewhere(facts: Facts) -> None:
    del port(facts, "mlx5_0")["counters"]["symbol_error"]
    port(facts, "mlx5_7")["counters"]["link_downed"] = 3
    assert_status(judge("IB-04", facts), FAIL, "mlx5_7 link_downed=3", "not measured: mlx5_0")
