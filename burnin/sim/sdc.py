"""Silent data corruption on a simulated node (GPU-14): GPUs that compute a kernel wrong without any error.

The node's SDC workload (:mod:`burnin.collector.sdc_workload`) runs for real on a simulated node, on the
CPU build of torch: each simulated GPU computes the kernels on the CPU, at most :data:`MAX_SIZE` wide.
What the node's GPUs are is rendered here from the node's state into ``out/sdc/node.json`` (their
index, bus id and name, and the kernels a fault makes a GPU compute wrong: ``GpuState.sdc_wrong``); the
workload reads it only on a simulated node, and flips one bit of such a GPU's result of such a kernel.
A lost or absent GPU is not listed: CUDA could not run on it. Every simulated GPU being the same CPU, the
rack's nodes share what they computed through one cache file (:data:`CACHE`): torch is imported once per
rack and answer, not once per node.

- ``sdc@gpuN`` (also written ``sdc-gpuN``): the GPU's BF16 matmul is wrong, every time, from the start;
- ``sdc-when-hot@gpuN`` (a soak fault): the same, once the GPU has been hot for :data:`HOT_AFTER_S` of the
  soak (:mod:`burnin.sim.soak` sets it from then on).
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

from burnin.errors import UsageError
from burnin.sim.faults import Fault, gpu_fault, simulates
from burnin.sim.state import NodeState

NODE_FILE = "sdc/node.json"
MAX_SIZE = 64
"""A simulated GPU is a CPU core: the workload's matrices are at most this wide there."""
CACHE = "../sdc-cache.json"
"""The rack's digests, beside its nodes (relative to the node's folder): each distinct answer computed once."""
WRONG_KERNEL = "matmul/bf16"
"""The kernel a faulted GPU computes wrong (a bad tensor-core unit)."""
HOT_AFTER_S = 3600.0
"""``sdc-when-hot``: the GPU computes wrong from this soak time on (an hour of heat)."""


CACHE_ENV = "BURNIN_SIM_SDC_CACHE"
"""A cache file shared by every rack rendered while it is set (the test suite's: one per test process), in
a folder every user can reach; unset, each rack has its own (:data:`CACHE`)."""


def cache_file() -> str:
    return os.environ.get(CACHE_ENV) or CACHE


def outputs(state: NodeState) -> dict[str, str]:
    gpus = [{"index": g.index, "bus_id": g.bus_id, "name": g.name, "wrong": list(g.sdc_wrong)}
            for g in state.visible_gpus if not g.lost]
    return {NODE_FILE: json.dumps({"max_size": MAX_SIZE, "cache": cache_file(), "gpus": gpus}, indent=1) + "\n"}


TORCH_PATH_ENV = "BURNIN_SIM_TORCH_PATH"


def sdc_torch_path() -> dict[str, str]:
    """Where this python's torch lies, for a simulated node whose user cannot run this python (a lab's nodes
    log in as another user): the workload appends it to its python's path (found, not imported)."""
    spec = importlib.util.find_spec("torch")
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    return {TORCH_PATH_ENV: os.path.dirname(locations[0])} if locations else {}


def prepare_rack_cache(nodes_dir: Path) -> None:
    """The rack's SDC cache and its lock, writable by every user (a lab's nodes log in as another user)."""
    shared = Path(cache_file()) if os.path.isabs(cache_file()) else nodes_dir / Path(CACHE).name
    for path in (shared, shared.with_name(shared.name + ".lock")):
        if not path.exists():
            path.touch()
            path.chmod(0o666)


def _target(state: NodeState, fault: Fault) -> int:
    return int((fault.target or "gpu3").removeprefix("gpu"))


@simulates(gpu_fault("sdc", "GPU-14", "the GPU computes a kernel wrong, the same way every time, with no Xid or "
                     "ECC error (silent data corruption); also written sdc-gpuN",
                     f"the node's SDC workload returns the GPU's {WRONG_KERNEL} result with one bit flipped (its "
                     "digest differs from the other GPUs'); NVML, nvidia-smi and the kernel log unchanged"))
def sdc(state: NodeState, fault: Fault) -> None:
    gpu = state.gpu(f"gpu{_target(state, fault)}")
    gpu.sdc_wrong = sorted({*gpu.sdc_wrong, WRONG_KERNEL})


@simulates(gpu_fault("sdc-when-hot", "GPU-14", "the GPU computes a kernel wrong once it has been hot for an hour "
                     "of the soak (silent data corruption under heat)",
                     f"from soak time +{HOT_AFTER_S / 3600:g} h the node's SDC workload returns the GPU's "
                     f"{WRONG_KERNEL} result with one bit flipped; correct before", suite="soak"))
def sdc_when_hot(state: NodeState, fault: Fault) -> None:
    raise UsageError(f"fault {fault.label!r} unfolds over a soak's simulated hours: use it with `burnin soak`")
