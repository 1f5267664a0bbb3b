"""A majority of slow nodes never blames the healthy ones nor makes itself the norm (issue 19)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from fabric_support import (
    FakeLauncher,
    alone,
    before,
    fleet,
    ib_write_bw_output,
    nvb,
    nvbandwidth_output,
    perf_output,
    result,
    section,
)

from burnin.checks.base import evaluate
from burnin.evaluate.verdict import Status
from burnin.fabric import judge
from burnin.fabric.measure import NcclMeasurement
from burnin.fabric.phase import Phase
from burnin.fabric.results import node_documents
from burnin.fabric.settings import SIMULATED
from burnin.facts import Facts
from burnin.topology import Topology


@pytest.mark.parametrize(("value", "stats", "typical", "words"), [
    (345.0, {"median": 345.0, "count": 8}, 392.0, "is 12% below the topology's reference 392 GB/s (tolerance 10%)"),
    (345.0, {"median": 400.0, "count": 8}, 392.0, "is 14% below the run's median 400.0 GB/s of 8"),
    (345.0, {"median": 392.0, "count": 8}, 392.0, "below the run's median 392.0"),  # equal: the run's median
    (345.0, {"median": 400.0, "count": 2}, 392.0, "below the topology's reference 392"),  # no median of two
    (345.0, None, 392.0, "below the topology's reference 392"),
    (345.0, {"median": 400.0, "count": 8}, None, "below the run's median 400.0"),
    (345.0, {"median": 400.0, "count": 8}, math.nan, "below the run's median 400.0"),
    (352.8, None, 392.0, None),  # exactly at the line
    (345.0, {"median": 345.0, "count": 8}, None, None),
    (345.0, {"median": 345.0, "count": 8}, 0.0, None),
    (345.0, {"median": 345.0, "count": 8}, -392.0, None),
    (None, {"median": 400.0, "count": 8}, 392.0, None),
])
def test_the_norm_is_the_median_but_never_below_the_reference(value: float | None, stats: dict[str, float] | None,
                                                             typical: float | None, words: str | None) -> None:
    found = judge.straggler(value, stats, 0.10, typical)
    if words is None:
        assert found is None
    else:
        assert found is not None and words in found.describe(), found


def _run(check_id: str, topology: Topology, **kwargs: Any) -> Status:
    verdict = evaluate(check_id, Facts("sim01", {"fabric": section("sim01", **kwargs)}), topology)
    return verdict.status


def test_a_slow_majority_on_nvlink_is_no_norm(h100_topology: Topology) -> None:
    """Most nodes read 345 GB/s between GPUs (above the 335 floor): their median is no norm, 392 is."""
    slow = evaluate("NVL-01", Facts("sim01", {"fabric": section(nvbw=nvb(d2d=345.0), fleet_stats=fleet(d2d=345.0))}),
                    h100_topology)
    assert slow.status is Status.FAIL and "below the topology's reference 392 GB/s" in slow.reason, slow.reason
    assert _run("NVL-01", h100_topology, nvbw=nvb(d2d=392.0), fleet_stats=fleet(d2d=345.0)) is Status.PASS
    host = evaluate("NVL-02", Facts("sim01", {"fabric": section(nvbw=nvb(h2d=49.0), fleet_stats=fleet(h2d=49.0))}),
                    h100_topology)
    assert host.status is Status.FAIL and "H2D straggler: 49.0 GB/s" in host.reason, host.reason
    assert _run("NVL-02", h100_topology, fleet_stats=fleet(h2d=49.0, d2h=49.0)) is Status.PASS


def test_a_collective_without_a_reference_is_judged_against_the_run_only(h100_topology: Topology) -> None:
    doc = section()
    doc["single"]["alltoall"] = NcclMeasurement("alltoall", ("sim01",), "ok", busbw_gbps=250.0).to_json()
    doc["fleet"]["single.alltoall"] = {"median": 250.0, "count": 8}
    assert evaluate("NCCL-02", Facts("sim01", {"fabric": doc}), h100_topology).status is Status.PASS


# ---------------------------------------------------------------- localisation with most nodes slow


def _rack(slow: set[str]) -> FakeLauncher:
    """Healthy alone (IB-08, NCCL-01 pass); every multi-node job with a ``slow`` node at half rate."""

    def per_node(node: str, command: Sequence[str]) -> Any:
        if any("nvbandwidth" in part for part in command):
            return result(node, nvbandwidth_output(8))
        if "ib_write_bw" in command:
            return result(node, ib_write_bw_output(command, 392.0))
        return result(node, perf_output(479.0))

    def job(nodes: Sequence[str], ib_hca: str | None) -> Any:
        value = (1 if ib_hca else 8) * 46.0 * (0.5 if set(nodes) & slow else 1.0)
        return result(nodes[0], perf_output(value, ranks=8 * len(nodes)))

    return FakeLauncher(per_node, job)


@pytest.mark.parametrize(("size", "slow"), [(2, 1), (3, 2), (4, 3), (5, 3), (8, 5)])
def test_localisation_never_blames_the_healthy_minority(h100_topology: Topology, tmp_path: Path, size: int,
                                                        slow: int) -> None:
    nodes = [f"sim{i:02d}" for i in range(1, size + 1)]
    bad = set(nodes[:slow])
    res = Phase(_rack(bad), h100_topology, SIMULATED, facts=before(nodes), failed_alone=alone).run(nodes)
    docs = node_documents(res)
    for node in nodes:
        for check_id in ("NCCL-03", "NCCL-04"):
            status = evaluate(check_id, Facts(node, {"fabric": docs[node]}), h100_topology).status
            if node in bad:
                assert status is not Status.PASS, (node, check_id)
            else:
                assert status is not Status.FAIL, (node, check_id)
    if size - slow >= 2:  # two healthy nodes vouch for each other, then name the slow ones
        assert res.localization is not None and set(res.localization.named) == bad
