"""PIN-01..04 on placement sections: table-driven against the H100 topology (GPU0-3 NUMA 0, GPU4-7 NUMA 1)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from burnin.checks import load_all
from burnin.evaluate.verdict import Status, Verdict
from burnin.facts import Facts
from burnin.megatron.pinning import nccl_hcas
from burnin.topology.model import Topology

BUSES = ["0000:1b:00.0", "0000:43:00.0", "0000:52:00.0", "0000:61:00.0",
         "0000:9d:00.0", "0000:c3:00.0", "0000:d1:00.0", "0000:df:00.0"]
NUMA = {0: "0-55,112-167", 1: "56-111,168-223"}
HCAS = "=" + ",".join(f"mlx5_{i}:1" for i in range(8))


def rank(local: int, *, numa: int | None = None, **overrides: Any) -> dict[str, Any]:
    node = (0 if local < 4 else 1) if numa is None else numa
    record: dict[str, Any] = {
        "probe": "burnin-placement", "version": 1, "host": "n1", "pid": 100 + local, "rank": local,
        "local_rank": local, "world_size": 8, "cpus": NUMA[node], "cpus_allowed_list": NUMA[node],
        "mems": str(node), "cuda_visible_devices": None, "gpu_bus_ids": BUSES, "gpu_bus_id": BUSES[local],
        "memory": {"bytes": 64 << 20, "pages_by_node": {str(node): 16385}},
        "thread_cpus": NUMA[node].split(",")[0].split("-")[0], "nccl_ib_hca": HCAS, "binding_env": {}}
    record.update(overrides)
    return record


def placement(ranks: list[dict[str, Any]] | None = None, **overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"form": "torchrun", "binding": "numactl", "nodes": ["n1"], "ranks_per_node": 8,
                            "command": {"n1": ["torchrun"]}, "exit_status": 0, "timed_out": False, "error": None,
                            "duration_s": 1.0, "timeout_s": 120.0, "node_exits": {"n1": 0},
                            "ranks": ranks if ranks is not None else [rank(i) for i in range(8)],
                            "cpu_bind": [], "problems": [], "tails": {}}
    data.update(overrides)
    return copy.deepcopy(data)


def replaced(local: int, **changes: Any) -> dict[str, Any]:
    ranks = [rank(i) for i in range(8)]
    ranks[local] = rank(local, **changes)
    return placement(ranks)


def verdict(check_id: str, data: dict[str, Any] | None, topology: Topology) -> Verdict:
    return load_all()[check_id].func(Facts("n1", {} if data is None else {"placement": data}), topology)


CASES: list[tuple[str, str, Callable[[], dict[str, Any] | None], Status, list[str]]] = [
    ("healthy-01", "PIN-01", placement, Status.PASS, ["rank 3: CPUs 0-55,112-167, memory 0 for gpu3"]),
    ("healthy-02", "PIN-02", placement, Status.PASS, ["100% on NUMA 1 of gpu7"]),
    ("healthy-03", "PIN-03", placement, Status.PASS, []),
    ("healthy-04", "PIN-04", placement, Status.PASS, ["includes mlx5_3 of gpu3"]),
    ("absent", "PIN-01", lambda: None, Status.INCOMPLETE, ["placement measurements not collected"]),
    ("wrong-numa", "PIN-01", lambda: replaced(3, numa=1), Status.FAIL,
     ["rank 3 CPUs 56-111,168-223 (NUMA 1) but its gpu3 on NUMA 0 (0-55,112-167)"]),
    ("wrong-numa-memory", "PIN-02", lambda: replaced(3, numa=1), Status.FAIL, ["rank 3 0% on NUMA 0 of gpu3"]),
    ("unbound", "PIN-01", lambda: placement([rank(i, cpus="0-223", mems="0-1") for i in range(8)]), Status.FAIL,
     ["rank 0 CPUs 0-223 (NUMA 0,1) but its gpu0 on NUMA 0"]),
    ("binding-none", "PIN-01", lambda: placement(binding="none"), Status.FAIL,
     ["launcher binds no CPUs (binding: none", "set 'binding: slurm'"]),
    ("membind-missing", "PIN-01", lambda: replaced(5, mems="0-1"), Status.FAIL,
     ["rank 5 memory nodes 0-1 but its gpu5 on NUMA 1"]),
    ("slurm-ldoms-mems", "PIN-01",
     lambda: placement([rank(i, mems="0-1") for i in range(8)], binding="slurm", form="srun"), Status.PASS, []),
    ("two-ranks-one-gpu", "PIN-01", lambda: replaced(2, gpu_bus_id=BUSES[1]), Status.FAIL,
     ["gpu1 driven by ranks 1,2", "gpu2 driven by no rank"]),
    ("missing-rank", "PIN-01", lambda: placement([rank(i) for i in range(7)]), Status.INCOMPLETE,
     ["rank 7: printed no placement record"]),
    ("no-gpu", "PIN-01", lambda: replaced(4, gpu_bus_id=None, gpu_error="no GPU visible (CUDA_VISIBLE_DEVICES='')"),
     Status.INCOMPLETE, ["rank 4: no GPU visible"]),
    ("foreign-gpu", "PIN-01", lambda: replaced(4, gpu_bus_id="0000:aa:00.0"), Status.INCOMPLETE,
     ["not a GPU of topology hgx-h100-8gpu"]),
    ("garbage-cpus", "PIN-01", lambda: replaced(1, cpus="zero", cpus_allowed_list=None), Status.INCOMPLETE,
     ["'zero' is not a CPU list"]),
    ("hung", "PIN-03", lambda: placement(timed_out=True, exit_status=None, tails={"0": ["starting"]}),
     Status.INCOMPLETE, ["the placement probe hung", "rank 0: starting"]),
    ("memory-split", "PIN-02",
     lambda: replaced(6, memory={"bytes": 1, "pages_by_node": {"0": 8000, "1": 8385}}), Status.FAIL,
     ["rank 6 51% on NUMA 1 of gpu6 (NUMA 0: 49%, NUMA 1: 51%)"]),
    ("memory-unreadable", "PIN-02", lambda: replaced(6, memory=None, memory_error="no numa_maps"),
     Status.INCOMPLETE, ["rank 6: no numa_maps"]),
    ("memory-negative", "PIN-02", lambda: replaced(6, memory={"pages_by_node": {"1": -5}}), Status.INCOMPLETE,
     ["is not a count per node"]),
    ("threads-strayed", "PIN-03", lambda: replaced(0, thread_cpus="3,60"), Status.FAIL,
     ["rank 0 threads ran on CPUs 60 outside its allowed 0-55,112-167"]),
    ("storage-hca", "PIN-04", lambda: replaced(0, nccl_ib_hca="mlx5"), Status.FAIL,
     ["lets NCCL use storage HCA mlx5_8,mlx5_9"]),
    ("unset-hca", "PIN-04", lambda: replaced(0, nccl_ib_hca=None), Status.FAIL, ["NCCL_IB_HCA unset"]),
    ("paired-excluded", "PIN-04", lambda: replaced(2, nccl_ib_hca="^mlx5_2,mlx5_8,mlx5_9"), Status.FAIL,
     ["leaves out mlx5_2, paired with gpu2"]),
]


@pytest.mark.parametrize(("check_id", "make", "status", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_pin_verdicts(h100_topology: Topology, check_id: str, make: Callable[[], dict[str, Any] | None],
                      status: Status, words: list[str]) -> None:
    result = verdict(check_id, make(), h100_topology)
    assert result.status is status, result.reason
    for word in words:
        assert word in result.reason, (word, result.reason)


@pytest.mark.parametrize(("spec", "usable"), [
    (None, {f"mlx5_{i}" for i in range(10)}),
    ("=mlx5_0:1,mlx5_3:1", {"mlx5_0", "mlx5_3"}),
    ("mlx5_1", {"mlx5_1"}),
    ("^mlx5_8,mlx5_9", {f"mlx5_{i}" for i in range(8)}),
    ("^=mlx5_8:1", {f"mlx5_{i}" for i in range(10)} - {"mlx5_8"}),
])
def test_nccl_ib_hca_rules(h100_topology: Topology, spec: str | None, usable: set[str]) -> None:
    assert nccl_hcas(spec, h100_topology) == usable
