"""Fixtures of the storage-fabric tests: simulated nodes read by the real collector, and topology variants."""

from __future__ import annotations

import copy
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from storage_support import Gather, collect

from burnin.sim import SimNode, build_rack
from burnin.topology.load import find_topology
from burnin.topology.model import Topology


def _base() -> Path:
    shm = Path("/dev/shm")
    return Path(tempfile.mkdtemp(prefix="burnin-sto-", dir=shm if shm.is_dir() and os.access(shm, os.W_OK) else None))


@pytest.fixture(scope="session")
def sto_topology() -> Topology:
    return find_topology("hgx-h100-8gpu")


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
