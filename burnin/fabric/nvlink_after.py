"""NVL-04: the NVLink state and error counters re-read after the fabric traffic (pure).

GPU-10 and GPU-11 judge NVLink at rest, from the facts gathered before any
traffic. After the single-node traffic (nccl-tests, nvbandwidth,
p2pBandwidthLatencyTest) the fabric phase gathers the collector's ``nvml``
source again through the dispatcher; :func:`snapshot` keeps, per GPU, what
NVL-04 compares with the facts gathered at the start: its identity, whether
it is lost, the NVML errors of its handle and links, and each link's state and
counters. The snapshot is a facts document of its own (``sources`` and
``nvml``), so the check reads it through :class:`burnin.facts.Facts`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from burnin.facts import Facts

SECTION = "nvlink_after"
"""The key of the snapshot in each node's ``fabric`` facts section."""
SOURCES = "nvml"
"""The collector source gathered again: NVML's link states and error counters (a fast source)."""
_GPU_KEYS = ("index", "bus_id", "lost", "nvlink")


def _gpu(gpu: object) -> object:
    if not isinstance(gpu, dict):
        return gpu  # the check says it is unreadable
    kept = {key: gpu[key] for key in _GPU_KEYS if key in gpu}
    errors = gpu.get("errors")
    if isinstance(errors, dict):
        kept["errors"] = {k: v for k, v in errors.items() if k == "handle" or str(k).startswith("nvlink_")}
    return kept


def snapshot(facts: Facts, after: Sequence[str]) -> dict[str, Any]:
    """What NVL-04 needs of a node's re-gathered facts; ``after`` names the traffic that came before it."""
    if facts.unreachable:
        return {"unreachable": facts.unreachable, "after": list(after)}
    sources = facts.data.get("sources")
    status = sources.get("nvml") if isinstance(sources, dict) else None
    doc: dict[str, Any] = {"sources": {"nvml": status} if status is not None else {}, "after": list(after)}
    nvml = facts.data.get("nvml")
    if isinstance(nvml, dict):
        gpus = nvml.get("gpus")
        doc["nvml"] = {"gpus": [_gpu(g) for g in gpus] if isinstance(gpus, list) else gpus}
    elif nvml is not None:
        doc["nvml"] = nvml
    return doc


def unavailable(reason: str, after: Sequence[str]) -> dict[str, Any]:
    """The snapshot of a node that could not be read again (the gather failed as a whole)."""
    return {"unreachable": reason, "after": list(after)}
