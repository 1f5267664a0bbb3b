"""Fixtures of the storage-fabric tests: simulated nodes read by the real collector, and topology variants."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from burnin.checks.storage import collector_sources
from burnin.sim import SimNode, build_rack
from burnin.topology.load import find_topology
from burnin.topology.model import StorageRouting, Topology

Gather = Callable[..., dict[str, Any]]


def _base() -> Path:
    shm = Path("/dev/shm")
    return Path(tempfile.mkdtemp(prefix="burnin-sto-", dir=shm if shm.is_dir() and os.access(shm, os.W_OK) else None))


def collect(node: SimNode, topology: Topology, sources: str | None = None,
            env: dict[str, str] | None = None) -> dict[str, Any]:
    """The facts of ``node`` as `burnin run` gathers them (its collector argv, the node's environment)."""
    argv = [sys.executable, "-m", "burnin.collector", "--root", str(node.root),
            "--sources", sources or collector_sources("all", [topology]), "--timeout", "30"]
    full = {**os.environ, **node.environment(), "LC_ALL": "C", **(env or {})}
    for key in [k for k in full if k.startswith("NCCL_") and (env is None or k not in env)]:
        del full[key]  # the test's own environment is not the node's
    proc = subprocess.run(argv, env=full, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    data: dict[str, Any] = json.loads(proc.stdout)
    return data


@pytest.fixture(scope="session")
def sto_topology() -> Topology:
    return find_topology("hgx-h100-8gpu")


def with_routing(topology: Topology, routing: StorageRouting, name: str) -> Topology:
    assert topology.storage is not None
    return dataclasses.replace(topology, name=name, storage=dataclasses.replace(topology.storage, routing=routing))


@pytest.fixture(scope="session")
def sim_base() -> Iterator[Path]:
    base = _base()
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def healthy_node(sim_base: Path, sto_topology: Topology) -> SimNode:
    node, = build_rack(sim_base / "healthy", sto_topology, ["sim01"])
    return node


@pytest.fixture(scope="session")
def healthy_storage_facts(healthy_node: SimNode, sto_topology: Topology) -> dict[str, Any]:
    data = collect(healthy_node, sto_topology)
    assert all(status["ok"] for status in data["sources"].values()), data["sources"]
    return data


@pytest.fixture
def facts(healthy_storage_facts: dict[str, Any]) -> dict[str, Any]:
    """A private copy of the healthy node's facts, for one test to change."""
    return copy.deepcopy(healthy_storage_facts)


@pytest.fixture(scope="session")
def faulted(sim_base: Path) -> Gather:
    """Facts of a node of ``topology`` with ``faults`` (built once per combination)."""
    cache: dict[tuple[str, tuple[str, ...]], dict[str, Any]] = {}

    def gather(topology: Topology, *faults: str) -> dict[str, Any]:
        key = (topology.name, faults)
        if key not in cache:
            folder = sim_base / f"{topology.name}-{len(cache)}"
            node, = build_rack(folder, topology, ["sim01"], {"sim01": list(faults)})
            cache[key] = collect(node, topology)
        return copy.deepcopy(cache[key])

    return gather
