"""A real Slurm cluster (munged, slurmctld, 8 slurmd) of simulated nodes for the fabric suite.

sim04 carries ``slow-hca`` (mlx5_2 at half its rate; invisible to the health probe).
``readmit_cluster`` is a second one of 4 nodes, sim03 with ``nccl-wrong``, for the
test that readmits a node burnin drained.
Missing slurm-wlm/munge or root skips the tier, except under CI where it fails.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from burnin_lab import slurm as lab

NODES = [f"sim{i:02d}" for i in range(1, 9)]


def _cluster(tmp_path_factory: pytest.TempPathFactory, name: str, nodes: list[str],
             fault: str) -> Iterator[tuple[Path, dict[str, str]]]:
    missing = lab.missing_commands()
    if missing or os.geteuid() != 0:
        message = (f"sim-slurm tier needs slurm-wlm and munge (missing: {', '.join(missing)})" if missing
                   else "sim-slurm tier needs root (slurmd, unshare --uts)")
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    from burnin.dispatch.sim import parse_fault_args
    from burnin.topology import find_topology

    state = tmp_path_factory.mktemp(name)
    faults = parse_fault_args([fault], nodes)
    lab.up(state, find_topology("hgx-h100-8gpu"), nodes, faults, health_interval=300)
    try:
        yield state, {**os.environ, **lab.client_env(state)}
    finally:
        lab.down(state)


@pytest.fixture(scope="module")
def fabric_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    yield from _cluster(tmp_path_factory, "slurmfab", NODES, "sim04:slow-hca")


@pytest.fixture(scope="module")
def readmit_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    yield from _cluster(tmp_path_factory, "slurmre", NODES[:4], "sim03:nccl-wrong")
