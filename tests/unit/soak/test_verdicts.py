"""The end-of-soak verdicts per node and check: drift, stragglers, creep, stopped nodes, switched-off stages."""

from __future__ import annotations

from pathlib import Path

import pytest

from burnin.gate.decide import FAIL, INCOMPLETE, NOT_APPLICABLE, PASS
from burnin.soak.monitor import Event
from burnin.soak.plan import SoakSettings
from burnin.soak.results import ChunkRecord
from burnin.soak.signals import GpuReading, NodeSample
from burnin.soak.state import DONE, FAILED, NodeProgress, SoakState
from burnin.soak.verdicts import Judge, write_outputs
from burnin.topology.model import Topology

HOUR = 3600.0
DURATION = 4 * HOUR
SETTINGS = SoakSettings.model_validate({"dcgm": {"enabled": False}, "cpu": {"enabled": False},
                                        "disk": {"enabled": False}})


def samples(node: str, creep_per_h: float = 0.0) -> list[NodeSample]:
    out = []
    for k in range(int(DURATION / 600) + 1):
        t = k * 600.0
        gpus = tuple(GpuReading(index=i, bus_id=None, temperature_c=60 + (creep_per_h * t / HOUR if i == 3 else 0),
                                ecc_corrected=0, ecc_uncorrected=0, remap_pending=False, clock_reasons=0,
                                pcie_replay=0, nvlink_replay=0) for i in range(8))
        out.append(NodeSample(node, t, "gpu", 0, uptime_s=1e5 + t, gpus=gpus, ib={"mlx5_0": {}}, edac_ce=0,
                              edac_ue=0))
    return out


def records(node: str, rate: float = 400000.0, drift_per_h: float = 0.0, slow_gpu: float = 1.0) -> list[ChunkRecord]:
    out = []
    for hour in range(4):
        series = {f"gpu{i}": [(hour * HOUR + s * 360.0, rate * (slow_gpu if i == 5 else 1.0)
                               * (1 - (drift_per_h * (hour * HOUR + s * 360.0) / HOUR if i == 3 else 0)))
                              for s in range(1, 11)] for i in range(8)}
        out.append(ChunkRecord(node, "gpu", hour * HOUR, (hour + 1) * HOUR, 0, series=series))
        out.append(ChunkRecord(node, "sdc", (hour + 1) * HOUR, (hour + 1) * HOUR, 0))  # GPU-14 after the stage
        out.append(ChunkRecord(node, "nccl", (hour + 1) * HOUR, (hour + 1) * HOUR, 0,
                               series={"busbw": [((hour + 1) * HOUR, 479.0)]}))
    return out


def judge(h100_topology: Topology, nodes: dict[str, tuple[list[NodeSample], list[ChunkRecord]]],
          progress: dict[str, NodeProgress] | None = None) -> dict[tuple[str, str], tuple[str, str]]:
    progress = progress or {n: NodeProgress(n, status=DONE, end_t=DURATION) for n in nodes}
    state = SoakState(command={}, duration_s=DURATION, interval_s=600.0, nodes=progress, now=DURATION)
    verdicts = Judge(state, {n: s for n, (s, _) in nodes.items()}, {n: r for n, (_, r) in nodes.items()},
                     SETTINGS, h100_topology, "site.yaml").outcomes()
    return {(o.node, o.check): (o.status, o.reason) for o in verdicts}


def test_healthy_fleet_passes_every_check_and_stands_aside_where_switched_off(h100_topology: Topology) -> None:
    out = judge(h100_topology, {n: (samples(n), records(n)) for n in ("a", "b", "c")})
    statuses = {check: status for (node, check), (status, _) in out.items() if node == "a"}
    assert {c for c, s in statuses.items() if s != PASS} == {"BRN-01", "BRN-05", "IB-04"}
    assert statuses["BRN-01"] == statuses["BRN-05"] == NOT_APPLICABLE
    assert "switched off in site.yaml" in out[("a", "BRN-01")][1]
    # the samples read one HCA of the topology's eight: IB-04 was not measured, never a pass
    assert out[("a", "IB-04")] == (INCOMPLETE, "IB-04 IB counters not read in 25 of 25 samples")


def test_drift_straggler_and_creep_fail_only_their_node(h100_topology: Topology) -> None:
    out = judge(h100_topology, {"a": (samples("a"), records("a")), "b": (samples("b"), records("b", drift_per_h=0.03)),
                                "c": (samples("c", creep_per_h=2.5), records("c")),
                                "d": (samples("d"), records("d", slow_gpu=0.93)),
                                "e": (samples("e"), records("e", rate=370000.0))})
    assert out[("b", "BRN-02")][0] == FAIL and "gpu3 throughput fell" in out[("b", "BRN-02")][1]
    assert "first to the last hour" in out[("b", "BRN-02")][1] and "slope" in out[("b", "BRN-02")][1]
    assert out[("c", "GPU-06")][0] == FAIL and "gpu3 temperature crept +7.1 C" in out[("c", "GPU-06")][1]
    assert out[("d", "BRN-02")][0] == FAIL and "gpu5 mean 372000 Gflop/s is 7.0% below the node median" in \
        out[("d", "BRN-02")][1]
    assert out[("e", "BRN-02")][0] == FAIL and "is 6.8% below the fleet median" in out[("e", "BRN-02")][1]
    assert out[("a", "BRN-02")][0] == out[("a", "GPU-06")][0] == PASS
    assert out[("c", "BRN-02")][0] == PASS and out[("b", "GPU-06")][0] == PASS


def test_a_stopped_node_fails_its_check_and_says_why_the_rest_was_not_judged(h100_topology: Topology,
                                                                             tmp_path: Path) -> None:
    xid = Event("GPU-04", "b", "gpu3", 5400.0, True, "Xid 79 (GPU has fallen off the bus)", "no fatal Xid")
    progress = {"a": NodeProgress("a", status=DONE, end_t=DURATION),
                "b": NodeProgress("b", status=FAILED, end_t=5400.0, events=[xid])}
    early = [s for s in samples("b") if s.t <= 5400.0]
    out = judge(h100_topology, {"a": (samples("a"), records("a")), "b": (early, records("b")[:2])}, progress)
    assert out[("b", "GPU-04")] == (FAIL, "GPU-04 gpu3 Xid 79 (GPU has fallen off the bus) at +01:30:00 "
                                          "(expected no fatal Xid)")
    status, reason = out[("b", "BRN-06")]
    assert status == INCOMPLETE and "stopped at +01:30:00 when GPU-04 failed" in reason
    assert out[("b", "BRN-03")] == (INCOMPLETE, "BRN-03 not judged: the node's soak stopped at +01:30:00 when "
                                                "GPU-04 failed")
    state = SoakState(command={}, duration_s=DURATION, interval_s=600.0, nodes=progress, now=DURATION)
    from burnin.gate.decide import CheckOutcome

    decisions = write_outputs(tmp_path, state, [CheckOutcome(n, c, s, r) for (n, c), (s, r) in out.items()], {},
                              meta={"simulated": True})
    assert not decisions["b"].admitted and "GPU-04" in decisions["b"].failed
    assert {p.name for p in tmp_path.iterdir()} == {"gate.json", "verdicts.json", "series.json"}


@pytest.mark.parametrize("missing", ["temperature_c", "pcie_replay"])
def test_a_signal_never_read_is_incomplete(h100_topology: Topology, missing: str) -> None:
    from dataclasses import replace

    blind = [replace(s, gpus=tuple(replace(g, **{missing: None}) for g in s.gpus)) for s in samples("a")]
    out = judge(h100_topology, {"a": (blind, records("a")), "b": (samples("b"), records("b"))})
    check = {"temperature_c": "GPU-06", "pcie_replay": "GPU-09"}[missing]
    assert out[("a", check)][0] == INCOMPLETE and "not read in 25 of 25 samples" in out[("a", check)][1]
    assert out[("b", check)][0] == PASS


def test_sdc_fails_with_its_event_is_incomplete_without_a_round_and_stands_aside_when_off(
        h100_topology: Topology) -> None:
    wrong = Event("GPU-14", "b", "gpu3", 4500.0, True, "matmul/bf16 digest 2d72534d differs from the fleet's "
                  "c37cef16 (7 of 8 GPUs of b, 23 of 24 in the run)", "the digest of most of the run's GPUs")
    progress = {"a": NodeProgress("a", status=DONE, end_t=DURATION),
                "b": NodeProgress("b", status=FAILED, end_t=4500.0, events=[wrong]),
                "c": NodeProgress("c", status=DONE, end_t=DURATION)}
    no_rounds = [r for r in records("c") if r.stage != "sdc"]
    out = judge(h100_topology, {"a": (samples("a"), records("a")), "b": (samples("b"), records("b")),
                                "c": (samples("c"), no_rounds)}, progress)
    assert out[("a", "GPU-14")] == (PASS, "")
    assert out[("b", "GPU-14")] == (FAIL, "GPU-14 gpu3 matmul/bf16 digest 2d72534d differs from the fleet's "
                                          "c37cef16 (7 of 8 GPUs of b, 23 of 24 in the run) at +01:15:00 "
                                          "(expected the digest of most of the run's GPUs)")
    assert out[("c", "GPU-14")] == (INCOMPLETE, "GPU-14 the SDC workload after a GPU stage did not run on this node")
    off = SETTINGS.model_copy(update={"gpu": SETTINGS.gpu.model_copy(update={"sdc": False})})
    state = SoakState(command={}, duration_s=DURATION, interval_s=600.0,
                      nodes={"a": NodeProgress("a", status=DONE, end_t=DURATION)}, now=DURATION)
    outcomes = Judge(state, {"a": samples("a")}, {"a": no_rounds}, off, h100_topology, "site.yaml").outcomes()
    sdc = next(o for o in outcomes if o.check == "GPU-14")
    assert (sdc.status, sdc.reason) == (NOT_APPLICABLE, "GPU-14 gpu.sdc is false in site.yaml")


def test_an_sdc_round_that_could_not_judge_makes_gpu14_incomplete_with_its_cause(h100_topology: Topology) -> None:
    cause = "GPU-14 could not be measured: gpu0: SDC workload: torch not importable by /usr/bin/python3"
    unjudged = [ChunkRecord(r.node, r.stage, r.start, r.end, 0, errors=(cause,)) if r.stage == "sdc" else r
                for r in records("a")]
    out = judge(h100_topology, {"a": (samples("a"), unjudged), "b": (samples("b"), records("b"))})
    assert out[("a", "GPU-14")] == (INCOMPLETE, f"GPU-14 {cause}")
    assert out[("b", "GPU-14")] == (PASS, "")
