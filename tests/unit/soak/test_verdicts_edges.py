"""Edges of the soak's verdicts that planted bugs slipped through (bench/mutants burnin/soak/verdicts.py, unit tier):
which samples and records count, what a verdict measures, the exact limits, the stages read."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest

from burnin.gate.decide import FAIL, INCOMPLETE, PASS, CheckOutcome
from burnin.soak.monitor import Event
from burnin.soak.plan import SoakSettings
from burnin.soak.results import ChunkRecord
from burnin.soak.signals import NodeSample
from burnin.soak.state import DONE, NodeProgress, SoakState
from burnin.soak.verdicts import REASON_LIMIT, Judge, _short
from burnin.topology.model import Topology

from .test_verdicts import DURATION, HOUR, SETTINGS, records, samples

ALL_STAGES = SoakSettings()
CPU_ONLY = SoakSettings.model_validate({"dcgm": {"enabled": False}, "gpu": {"enabled": False},
                                        "nccl": {"enabled": False}, "disk": {"enabled": False}})


def _outcomes(topology: Topology, node_samples: Sequence[NodeSample], node_records: Sequence[ChunkRecord], *,
              settings: SoakSettings = SETTINGS, progress: NodeProgress | None = None,
              others: dict[str, tuple[Sequence[NodeSample], Sequence[ChunkRecord]]] | None = None,
              ) -> dict[str, CheckOutcome]:
    nodes = {"a": (node_samples, node_records), **(others or {})}
    states = {n: NodeProgress(n, status=DONE, end_t=DURATION) for n in nodes}
    if progress is not None:
        states["a"] = progress
    state = SoakState(command={}, duration_s=DURATION, interval_s=600.0, nodes=states, now=DURATION)
    judged = Judge(state, {n: list(s) for n, (s, _) in nodes.items()}, {n: list(r) for n, (_, r) in nodes.items()},
                   settings, topology, "site.yaml").outcomes()
    return {o.check: o for o in judged if o.node == "a"}


def _with_hcas(topology: Topology, node: str) -> list[NodeSample]:
    hcas: dict[str, dict[str, int]] = {h.name: {} for h in topology.compute_hcas}
    return [dataclasses.replace(s, ib=hcas) for s in samples(node)]


def test_a_reason_of_exactly_the_limit_is_kept_whole() -> None:
    assert REASON_LIMIT == 700
    whole = "x" * REASON_LIMIT
    assert _short(whole) == whole
    cut = _short(whole + "y")
    assert len(cut) == REASON_LIMIT and cut == "x" * (REASON_LIMIT - 3) + "..."


def test_one_gpu_unread_is_a_signal_not_read(h100_topology: Topology) -> None:
    partial = [dataclasses.replace(s, gpus=(dataclasses.replace(s.gpus[0], ecc_corrected=None), *s.gpus[1:]))
               for s in samples("a")]
    out = _outcomes(h100_topology, partial, records("a"))
    assert out["GPU-02"].status == INCOMPLETE and "not read in 25 of 25 samples" in out["GPU-02"].reason


def test_only_the_last_attempts_readable_samples_count(h100_topology: Topology) -> None:
    earlier = [dataclasses.replace(s, attempt=0, gpus=tuple(dataclasses.replace(g, ecc_uncorrected=None)
                                                           for g in s.gpus)) for s in samples("a")]
    now = [dataclasses.replace(s, attempt=1) for s in samples("a")]
    progress = NodeProgress("a", status=DONE, end_t=DURATION, attempt=1)
    out = _outcomes(h100_topology, [*earlier, *now], [dataclasses.replace(r, attempt=1) for r in records("a")],
                    progress=progress)
    assert out["GPU-01"].status == PASS and out["GPU-01"].measured == "25 samples"
    broken = [dataclasses.replace(s, error="unreachable") for s in now]
    out = _outcomes(h100_topology, [*now, *broken], [dataclasses.replace(r, attempt=1) for r in records("a")],
                    progress=progress)
    assert out["GPU-01"].measured == "25 samples"  # the unreadable samples are not counted as read


def test_a_noted_event_is_measured_by_its_own_check_only(h100_topology: Topology) -> None:
    note = Event("GPU-04", "a", "gpu2", 600.0, False, "Xid 13 (graphics engine exception)", "no fatal Xid")
    fatal = Event("GPU-04", "a", "gpu2", 700.0, True, "Xid 94", "no fatal Xid")
    progress = NodeProgress("a", status=DONE, end_t=DURATION, events=[note])
    out = _outcomes(h100_topology, samples("a"), records("a"), progress=progress)
    assert out["GPU-04"].measured == "25 samples; noted: Xid 13 (graphics engine exception)"
    assert out["GPU-01"].measured == "25 samples"  # not GPU-01's, and no creep text outside GPU-06
    failed = NodeProgress("a", status="failed", end_t=700.0, events=[note, fatal])
    assert "noted: Xid 94" not in _outcomes(h100_topology, samples("a"), records("a"), progress=failed)[
        "GPU-04"].measured


def test_creep_is_measured_by_the_hottest_gpu_and_only_under_gpu_load(h100_topology: Topology) -> None:
    out = _outcomes(h100_topology, samples("a"), records("a"))
    assert out["GPU-06"].measured.startswith("gpu0 temperature +0.0 C first to last hour under load")
    hot_elsewhere = [dataclasses.replace(s, stage="cpu", gpus=tuple(dataclasses.replace(g, temperature_c=75.0)
                                                                    for g in s.gpus))
                     if s.t >= DURATION - HOUR else s for s in samples("a")]
    assert _outcomes(h100_topology, hot_elsewhere, records("a"))["GPU-06"].status == PASS
    # with the gpu stage switched off every stage is load
    off = SETTINGS.model_copy(update={"gpu": SETTINGS.gpu.model_copy(update={"enabled": False})})
    assert _outcomes(h100_topology, hot_elsewhere, records("a"), settings=off)["GPU-06"].status == FAIL


def test_ib_counters_read_on_every_compute_hca_pass(h100_topology: Topology) -> None:
    out = _outcomes(h100_topology, _with_hcas(h100_topology, "a"), records("a"))
    assert out["IB-04"].status == PASS and out["IB-04"].measured == f"{len(h100_topology.compute_hcas)} HCAs"


def test_dcgm_counts_its_tests(h100_topology: Topology) -> None:
    dcgm = [ChunkRecord("a", "dcgm", 0.0, 900.0, 0, details={"tests": 5}), ChunkRecord("a", "dcgm", 0.0, 900.0, 0)]
    out = _outcomes(h100_topology, samples("a"), [*records("a"), *dcgm], settings=ALL_STAGES)
    assert out["BRN-01"].measured == "5 DCGM tests" and out["BRN-01"].status == PASS


def _gpu_records(first: float, last: float) -> list[ChunkRecord]:
    """gpu_burn at ``first`` Gflop/s on every GPU in the soak's first half hour, ``last`` in its last."""
    head = [(300.0 * k, first) for k in range(1, 6)]
    tail = [(DURATION - 300.0 * k, last) for k in range(5, 0, -1)]
    return [ChunkRecord("a", "gpu", 0.0, DURATION, 0, series={f"gpu{i}": [*head, *tail] for i in range(8)}),
            *(r for r in records("a") if r.stage == "nccl")]


def test_a_fall_of_exactly_the_tolerance_passes(h100_topology: Topology) -> None:
    at = _outcomes(h100_topology, samples("a"), _gpu_records(400000.0, 380000.0))  # exactly 5%
    assert at["BRN-02"].status == PASS and at["BRN-02"].measured.startswith("gpu0 ")  # equal falls: the first GPU
    over = _outcomes(h100_topology, samples("a"), _gpu_records(400000.0, 379000.0))
    assert over["BRN-02"].status == FAIL


def _nccl(values: Sequence[float]) -> list[ChunkRecord]:
    step = DURATION / len(values)
    return [*(r for r in records("a") if r.stage == "gpu"),
            *(ChunkRecord("a", "nccl", k * step, (k + 1) * step, 0, series={"busbw": [((k + 1) * step, v)]})
              for k, v in enumerate(values))]


def test_busbw_floor_and_drift_limits(h100_topology: Topology) -> None:
    ref = h100_topology.ref("nccl_single_busbw_gbps")
    assert ref is not None and ref.lower == 440
    assert _outcomes(h100_topology, samples("a"), _nccl([440.0] * 8))["BRN-03"].status == PASS  # at the floor
    below = _outcomes(h100_topology, samples("a"), _nccl([479.0] * 7 + [439.0]))["BRN-03"]
    assert below.status == FAIL and "fell to 439.0 GB/s (expected >= 440 GB/s)" in below.reason
    assert below.expected == "busbw >= 440 GB/s, fall <= 3%"
    assert _outcomes(h100_topology, samples("a"), _nccl([500.0] * 3 + [490.0] * 2 + [485.0] * 3))[
        "BRN-03"].status == PASS  # exactly 3%
    fell = _outcomes(h100_topology, samples("a"), _nccl([500.0] * 3 + [490.0] * 2 + [484.0] * 3))["BRN-03"]
    assert fell.status == FAIL and "fell 3.2% from the first to the last hour" in fell.reason


def test_a_topology_without_a_busbw_floor_leaves_brn03_incomplete(h100_topology: Topology) -> None:
    refs = {k: v for k, v in h100_topology.references.items() if k != "nccl_single_busbw_gbps"}
    bare = dataclasses.replace(h100_topology, references=refs)
    out = _outcomes(bare, samples("a"), records("a"))["BRN-03"]
    assert out.status == INCOMPLETE and "defines no nccl_single_busbw_gbps floor" in out.reason
    assert out.expected == "a busbw floor"


def _stream(*per_socket: float, edac: bool = True) -> list[ChunkRecord]:
    return [ChunkRecord("a", "cpu", 0.0, HOUR, 0,
                        series={f"socket{i}": [(HOUR, v)] for i, v in enumerate(per_socket)})]


def test_stream_sockets_within_and_beyond_their_spread(h100_topology: Topology) -> None:
    ok = _outcomes(h100_topology, samples("a"), _stream(100.0, 95.0), settings=CPU_ONLY)["BRN-04"]
    assert ok.status == PASS and ok.measured == "STREAM triad socket0 100.0, socket1 95.0 GB/s"  # exactly 5%
    apart = _outcomes(h100_topology, samples("a"), _stream(100.0, 94.0), settings=CPU_ONLY)["BRN-04"]
    assert apart.status == FAIL and "sockets 6.0% apart" in apart.reason
    one = _outcomes(h100_topology, samples("a"), _stream(100.0), settings=CPU_ONLY)["BRN-04"]
    assert one.status == PASS and one.measured == ""  # one socket: nothing to compare
    none = _outcomes(h100_topology, samples("a"), [ChunkRecord("a", "cpu", 0.0, HOUR, 0)], settings=CPU_ONLY)
    assert none["BRN-04"].status == INCOMPLETE and "no STREAM triad measured" in none["BRN-04"].reason
    zero = _outcomes(h100_topology, samples("a"), _stream(0.0, 0.0), settings=CPU_ONLY)["BRN-04"]
    assert zero.status == PASS  # no rate: no spread to judge
    small = _outcomes(h100_topology, samples("a"), _stream(0.5, 0.4), settings=CPU_ONLY)["BRN-04"]
    assert small.status == FAIL and "sockets 20.0% apart" in small.reason
    some = [dataclasses.replace(s, edac_ue=None) if s.t == 0 else s for s in samples("a")]
    edac = _outcomes(h100_topology, some, _stream(100.0, 99.0), settings=CPU_ONLY)["BRN-04"]
    assert edac.status == INCOMPLETE and "EDAC counters not readable" in edac.reason


def test_a_node_done_early_did_not_complete_its_soak(h100_topology: Topology) -> None:
    early = NodeProgress("a", status=DONE, end_t=DURATION / 2)
    out = _outcomes(h100_topology, samples("a"), records("a"), progress=early)["BRN-06"]
    assert out.status == INCOMPLETE and "did not complete its soak (soaked 02:00:00 of 04:00:00)" in out.reason


def test_a_node_never_read_was_never_sampled(h100_topology: Topology) -> None:
    unread = [dataclasses.replace(s, error="unreachable") for s in samples("a")]
    out = _outcomes(h100_topology, unread, records("a"))["BRN-07"]
    assert out.status == INCOMPLETE and "the node was never sampled" in out.reason
    assert out.measured == "0 of 25 samples read every 00:10:00"


@pytest.mark.parametrize(("interval", "window"), [(HOUR, "hour")])
def test_the_coarse_interval_names_the_judging_window(h100_topology: Topology, interval: float, window: str) -> None:
    state = SoakState(command={}, duration_s=DURATION, interval_s=interval,
                      nodes={"a": NodeProgress("a", status=DONE, end_t=DURATION)}, now=DURATION)
    out = {o.check: o for o in Judge(state, {"a": samples("a")}, {"a": records("a")}, SETTINGS, h100_topology,
                                     "site.yaml").outcomes()}
    assert f"(two samples per {window} at least: every 00:30:00 or more often)" in out["BRN-07"].reason
    short = SoakState(command={}, duration_s=HOUR, interval_s=HOUR / 4,
                      nodes={"a": NodeProgress("a", status=DONE, end_t=HOUR)}, now=HOUR)
    out = {o.check: o for o in Judge(short, {"a": samples("a")}, {"a": records("a")}, SETTINGS, h100_topology,
                                     "site.yaml").outcomes()}
    assert "two samples per 00:15:00 window at least: every 00:07:30" in out["BRN-07"].reason
