"""NVL-03's launch reader, NVL-04's snapshot, and how the phase runs both (pure parts and fake launchers)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from fabric_support import (
    AFTER,
    FakeLauncher,
    alone,
    before,
    ib_write_bw_output,
    nvbandwidth_output,
    nvml_facts,
    nvml_gpus,
    p2p_output,
    perf_output,
    recollect_healthy,
    result,
)

from burnin.checks.base import evaluate
from burnin.evaluate.verdict import Status
from burnin.fabric import commands, nvlink_after
from burnin.fabric.p2p import P2pMeasurement, matrix_name, p2p_measurement
from burnin.fabric.phase import Phase
from burnin.fabric.results import node_documents
from burnin.fabric.settings import PRODUCTION, SIMULATED, load_settings
from burnin.facts import Facts
from burnin.parsers.p2p_bandwidth import parse_p2p_bandwidth
from burnin.topology import Topology
from burnin.transport.base import CommandResult

ARGV = ("timeout", "-k", "5", "60", "p2pBandwidthLatencyTest")
NODES = ["sim01", "sim02", "sim03", "sim04"]


def launch(stdout: str, **kwargs: Any) -> CommandResult:
    return result("sim01", stdout, argv=ARGV, **kwargs)


# ---------------------------------------------------------------- commands and settings


def test_the_command_runs_the_sample_as_it_ships_under_the_time_limit() -> None:
    assert commands.p2p_bandwidth_command(SIMULATED) == ["timeout", "-k", "5", "60", "p2pBandwidthLatencyTest"]
    custom = PRODUCTION.replace(p2p_bandwidth="/opt/cuda-samples/bin/p2pBandwidthLatencyTest", timeout_s=90.5)
    assert commands.p2p_bandwidth_command(custom)[-2:] == ["91", "/opt/cuda-samples/bin/p2pBandwidthLatencyTest"]


def test_settings_of_the_second_look(tmp_path: Path) -> None:
    assert PRODUCTION.nvlink_recollect_timeout_s == 120.0 and SIMULATED.p2p_bandwidth == "p2pBandwidthLatencyTest"
    config = tmp_path / "fabric.yaml"
    config.write_text("nvlink_recollect_timeout_s: 30\np2p_bandwidth: /opt/p2p\n")
    settings = load_settings(config)
    assert settings.nvlink_recollect_timeout_s == 30.0 and settings.p2p_bandwidth == "/opt/p2p"
    for bad in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="nvlink_recollect_timeout_s must be a finite number > 0"):
            PRODUCTION.replace(nvlink_recollect_timeout_s=bad)
    with pytest.raises(ValueError, match="nccl_evidence_timeout_s must be a finite number > 0"):
        PRODUCTION.replace(nccl_evidence_timeout_s=0.0)


# ---------------------------------------------------------------- the launch reader (NVL-03)


def test_a_whole_run_keeps_every_matrix_by_name() -> None:
    run = p2p_measurement(launch(p2p_output(refused={2})), timeout_s=60)
    assert run.ok and run.status == "ok" and run.reason == "" and run.devices == 8
    assert sorted(run.matrices) == ["bidirectional_p2p_disabled", "bidirectional_p2p_enabled", "connectivity",
                                    "latency_p2p_disabled_cpu", "latency_p2p_disabled_gpu",
                                    "latency_p2p_enabled_cpu", "latency_p2p_enabled_gpu",
                                    "unidirectional_p2p_disabled", "unidirectional_p2p_enabled"]
    assert run.matrices["connectivity"][2] == [0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    assert run.matrices["unidirectional_p2p_enabled"][0][1] == 376.0
    assert run.refused[:2] == ((0, 2), (1, 2)) and len(run.refused) == 14
    assert run.argv == " ".join(ARGV) and run.duration_s == 0.5
    assert P2pMeasurement.from_json(run.to_json()) == run


def test_matrix_names() -> None:
    names = {matrix_name(m) for m in parse_p2p_bandwidth(p2p_output(2)).matrices}
    assert "unidirectional_p2p_enabled" in names and "latency_p2p_enabled_gpu" in names
    odd = parse_p2p_bandwidth("Some Matrix (GB/s)\n   D\\D     0\n     0 1.00\n"
                              "A Latency Matrix (us)\n   CPU     0\n     0 2.00\n").matrices
    assert [matrix_name(m) for m in odd] == ["unknown_p2p_unknown", "latency_p2p_unknown_cpu"]


def test_the_real_h100_snippet_alone_lacks_the_connectivity_matrix(reference_dir: Path) -> None:
    text = (reference_dir / "p2pBandwidthLatencyTest" / "p2p-unidir-writes-matrix-h100-8gpu.txt").read_text()
    run = p2p_measurement(launch(text), timeout_s=60)
    assert not run.ok and run.reason.startswith("p2pBandwidthLatencyTest printed no connectivity matrix (exit 0)")
    assert run.matrices["unidirectional_p2p_enabled"][2][0] == 363.43


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"status": 124}, "p2pBandwidthLatencyTest hung on sim01: no result within 60 s"),
    ({"timed_out": True, "status": None}, "p2pBandwidthLatencyTest hung on sim01"),
    ({"status": 127}, "p2pBandwidthLatencyTest not found on sim01 (exit 127): build the CUDA samples or set "
                      "p2p_bandwidth in the fabric config"),
    ({"error": "ssh: connection reset", "status": None}, "p2pBandwidthLatencyTest on sim01: ssh: connection reset"),
    ({"status": 1}, "p2pBandwidthLatencyTest exited 1"),
])
def test_launches_that_went_wrong_are_unmeasured(kwargs: dict[str, Any], words: str) -> None:
    run = p2p_measurement(launch(p2p_output(2), **kwargs), timeout_s=60)
    assert run.status == "unmeasured" and not run.ok and run.reason.startswith(words), run.reason
    assert "last output: " in run.reason and "Boost is enabled" in run.reason


def test_cut_or_garbled_output_is_unmeasured_with_the_parsers_words() -> None:
    cut = p2p_output(2).split("Bidirectional P2P=Enabled")[0] + "Bidirectional P2P=Enabled Bandwidth Matrix (GB/s)\n"
    run = p2p_measurement(launch(cut, status=1), timeout_s=60)
    assert run.reason.startswith("p2pBandwidthLatencyTest output is not readable: p2p-bandwidth: matrix "
                                 "'Bidirectional P2P=Enabled Bandwidth Matrix (GB/s)' has no rows")
    failed = "[P2P (Peer-to-Peer) GPU Bandwidth Latency Test]\nCuda failure p2p.cu:632: 'unknown error'\n"
    assert "stopped on a CUDA error" in p2p_measurement(launch(failed, status=1), timeout_s=60).reason
    silent = p2p_measurement(launch("", status=0), timeout_s=60)
    assert silent.reason == "p2pBandwidthLatencyTest printed no connectivity or unidirectional_p2p_enabled matrix " \
                            "(exit 0)"
    hung = p2p_measurement(launch("garbage\n", status=124), timeout_s=60)
    assert hung.reason.startswith("p2pBandwidthLatencyTest hung")  # the launch problem comes first


def test_a_record_read_back_from_little() -> None:
    run = P2pMeasurement.from_json({})
    assert run.status == "unmeasured" and run.matrices == {} and run.devices == 0 and run.refused == ()


# ---------------------------------------------------------------- the snapshot (NVL-04)


def test_a_snapshot_keeps_what_nvl_04_reads() -> None:
    facts = nvml_facts(gpus=nvml_gpus(2, 2))
    gpu = facts.data["nvml"]["gpus"][0]
    gpu.update({"uuid": "GPU-x", "temperature_c": 40, "bus_id": "0000:1b:00.0",
                "errors": {"handle": "NVML_ERROR_UNKNOWN", "nvlink_0_replay": "NVML_ERROR_NOT_SUPPORTED",
                           "power": "NVML_ERROR_NOT_SUPPORTED"}})
    facts.data["nvml"]["gpus"].append("garbage")
    snap = nvlink_after.snapshot(facts, AFTER)
    kept = snap["nvml"]["gpus"][0]
    assert set(kept) == {"index", "bus_id", "lost", "nvlink", "errors"}
    assert kept["errors"] == {"handle": "NVML_ERROR_UNKNOWN", "nvlink_0_replay": "NVML_ERROR_NOT_SUPPORTED"}
    assert snap["nvml"]["gpus"][2] == "garbage" and snap["after"] == AFTER
    assert snap["sources"] == {"nvml": {"ok": True, "error": None, "duration_s": 0.1}}
    del facts.data["nvml"]["gpus"][0]["errors"]
    assert "errors" not in nvlink_after.snapshot(facts, AFTER)["nvml"]["gpus"][0]


def test_snapshots_of_nodes_that_said_little() -> None:
    assert nvlink_after.snapshot(Facts.unreachable_node("sim02", "timed out"), ["x"]) == {
        "unreachable": "timed out", "after": ["x"]}
    assert nvlink_after.snapshot(Facts("sim02", {"sources": "odd"}), []) == {"sources": {}, "after": []}
    odd = nvlink_after.snapshot(Facts("sim02", {"sources": {}, "nvml": "broken"}), [])
    assert odd["nvml"] == "broken"
    listless = nvlink_after.snapshot(Facts("sim02", {"sources": {}, "nvml": {"gpus": None}}), [])
    assert listless["nvml"] == {"gpus": None}
    assert nvlink_after.unavailable("why", ("a",)) == {"unreachable": "why", "after": ["a"]}


# ---------------------------------------------------------------- the phase


def rack(flaky: str | None = None, p2p_hang: str | None = None) -> FakeLauncher:
    def per_node(node: str, command: Sequence[str]) -> CommandResult:
        if any("nvbandwidth" in part for part in command):
            return result(node, nvbandwidth_output(8))
        if "ib_write_bw" in command:
            return result(node, ib_write_bw_output(command, 392.0))
        return result(node, perf_output(479.0))

    def p2p(node: str, command: Sequence[str]) -> CommandResult:
        if node == p2p_hang:
            return result(node, "[P2P (Peer-to-Peer) GPU Bandwidth Latency Test]\n", status=124, argv=command)
        return result(node, p2p_output(), argv=command)

    return FakeLauncher(per_node, lambda nodes, hca: result(nodes[0], perf_output(368.0, ranks=8 * len(nodes))),
                        p2p=p2p)


class Gather:
    """NVL-04's second gather: sim02's link 7 of gpu3 grew (flaky), or the collector reached no node."""

    def __init__(self, flaky: str | None = None, fail: bool = False) -> None:
        self.flaky, self.fail, self.asked = flaky, fail, 0

    def __call__(self, nodes: Sequence[str]) -> Mapping[str, Facts]:
        self.asked += 1
        if self.fail:
            return {n: Facts.unreachable_node(n, "sbcast of the collector failed: sbcast exited 1") for n in nodes}
        grown = nvml_gpus(counters={(3, 7): {"recovery": 2, "replay": 300}})
        return {n: nvml_facts(n, grown if n == self.flaky else None) for n in nodes}


def run_phase(launcher: FakeLauncher, topology: Topology, tmp_path: Path, gather: Any, nodes: list[str] = NODES,
              **settings: Any) -> Any:
    launcher._gather = gather
    return Phase(launcher, topology, SIMULATED.replace(**settings), facts=before(nodes),
                 failed_alone=alone).run(nodes)


def verdict(res: Any, node: str, check_id: str, topology: Topology) -> Status:
    facts = nvml_facts(node)
    facts.data["fabric"] = node_documents(res)[node]
    return evaluate(check_id, facts, topology).status


def test_nvl_03_and_04_run_on_every_node_and_a_failing_node_stays_out(h100_topology: Topology,
                                                                      tmp_path: Path) -> None:
    launcher = rack()
    gather = Gather(flaky="sim02")
    res = run_phase(launcher, h100_topology, tmp_path, gather, localize="never")
    assert gather.asked == 1 and launcher.steps == ["p2p", "collect"]  # the collector in what the phase holds
    assert sorted(res.p2p) == NODES and all(m.ok for m in res.p2p.values())
    assert res.excluded == {"sim02": "left out of multi-node runs and localisation: NVL-04 failed on this node"}
    assert "recovery +2 (link 7), replay +300 (link 7)" in res.excluded_why["sim02"][0]
    assert res.group is not None and res.group.nodes == ("sim01", "sim03", "sim04") and res.group_passed
    assert verdict(res, "sim02", "NVL-04", h100_topology) is Status.FAIL
    assert verdict(res, "sim01", "NVL-04", h100_topology) is Status.PASS
    assert verdict(res, "sim01", "NVL-03", h100_topology) is Status.PASS
    doc = res.to_json()
    assert doc["p2p"]["sim03"]["status"] == "ok" and doc["nvlink_after"]["sim02"]["after"] == AFTER
    assert any(note.startswith("NVL-04: NVML gathered again on 4 of 4 nodes after all_reduce_perf, nvbandwidth, "
                               "p2pBandwidthLatencyTest, ib_write_bw in") for note in launcher.notes)


def test_a_hung_p2p_run_is_incomplete_and_keeps_its_node_out(h100_topology: Topology, tmp_path: Path) -> None:
    res = run_phase(rack(p2p_hang="sim03"), h100_topology, tmp_path, Gather(), localize="never")
    assert res.excluded["sim03"].endswith("NVL-03 incomplete on this node")
    assert "p2pBandwidthLatencyTest hung on sim03" in res.excluded_why["sim03"][0]
    assert verdict(res, "sim03", "NVL-03", h100_topology) is Status.INCOMPLETE


def test_a_failed_second_look_leaves_every_node_incomplete_not_failed(h100_topology: Topology,
                                                                      tmp_path: Path) -> None:
    launcher = rack()
    res = run_phase(launcher, h100_topology, tmp_path, Gather(fail=True), localize="never")
    assert set(res.excluded) == set(NODES) and res.group is None
    for node in NODES:
        assert res.nvlink_after[node] == {"unreachable": "sbcast of the collector failed: sbcast exited 1",
                                          "after": AFTER}
        assert res.excluded_by[node] == "NVL-04 incomplete"
    assert any(note.startswith("NVL-04: NVML gathered again on 0 of 4 nodes") for note in launcher.notes)


def test_a_node_the_second_gather_missed_is_incomplete(h100_topology: Topology, tmp_path: Path) -> None:
    res = run_phase(rack(), h100_topology, tmp_path, lambda nodes: recollect_healthy(nodes[1:]), localize="never")
    assert res.nvlink_after["sim01"] == {"unreachable": "sim01 was not gathered again", "after": AFTER}
    assert list(res.excluded) == ["sim01"]


def test_without_the_facts_gathered_before_nvl_04_is_incomplete(h100_topology: Topology) -> None:
    res = Phase(rack(), h100_topology, SIMULATED, failed_alone=alone).run(NODES)
    assert set(res.excluded) == set(NODES)
    assert "NVML before the traffic: source 'nvml' was not collected" in res.excluded_why["sim01"][0]


def test_a_run_without_multi_node_part_still_looks_again(h100_topology: Topology, tmp_path: Path) -> None:
    for nodes, settings in ((["sim01"], {}), (NODES, {"multi_node": False})):
        launcher = rack()
        res = run_phase(launcher, h100_topology, tmp_path, Gather(), nodes=nodes, **settings)
        assert launcher.steps == ["p2p", "collect"] and launcher.jobs == []
        assert verdict(res, nodes[0], "NVL-04", h100_topology) is Status.PASS


def test_the_traffic_names_each_collective_and_ib_write_bw_only_with_compute_hcas(h100_topology: Topology,
                                                                                  tmp_path: Path) -> None:
    import dataclasses

    res = run_phase(rack(), h100_topology, tmp_path, Gather(), nodes=["sim01"], multi_node=False,
                    collectives=("all_reduce", "all_gather"))
    assert res.nvlink_after["sim01"]["after"] == ["all_reduce_perf", "all_gather_perf", "nvbandwidth",
                                                  "p2pBandwidthLatencyTest", "ib_write_bw"]
    unpaired = tuple(dataclasses.replace(d, hca=None) for d in h100_topology.gpus.devices)
    no_hcas = dataclasses.replace(h100_topology, hcas=tuple(h for h in h100_topology.hcas if h.role == "storage"),
                                  gpus=dataclasses.replace(h100_topology.gpus, devices=unpaired), storage=None)
    res = run_phase(rack(), no_hcas, tmp_path, Gather(), nodes=["sim01"])
    assert res.nvlink_after["sim01"]["after"][-1] == "p2pBandwidthLatencyTest"


def test_an_interrupt_during_the_second_look_starts_nothing_after_it(h100_topology: Topology,
                                                                     tmp_path: Path) -> None:
    def interrupted(nodes: Sequence[str]) -> Mapping[str, Facts]:
        raise KeyboardInterrupt

    launcher = rack()
    with pytest.raises(KeyboardInterrupt):
        run_phase(launcher, h100_topology, tmp_path, interrupted)
    assert launcher.steps == ["p2p", "collect"] and launcher.jobs == []
