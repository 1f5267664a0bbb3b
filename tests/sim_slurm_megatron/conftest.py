"""A real Slurm cluster (munged, slurmctld, 4 slurmd) of simulated nodes for the megatron suite.

sim03 carries ``train-slow`` (its training 20% slow; invisible to the health probe).
Missing slurm-wlm/munge or root skips the tier, except under CI where it fails.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

NODES = [f"sim{i:02d}" for i in range(1, 5)]


@pytest.fixture(scope="module")
def megatron_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    try:
        from burnin_lab import slurm as lab
    except ImportError:
        lab = None
    missing = lab.missing_commands() if lab is not None else ["burnin-lab (pip install ./lab)"]
    if missing or os.geteuid() != 0:
        message = (f"sim-slurm tier needs slurm-wlm and munge (missing: {', '.join(missing)})" if missing
                   else "sim-slurm tier needs root (slurmd, unshare --uts)")
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    assert lab is not None
    from burnin.dispatch.sim import parse_fault_args
    from burnin.topology import find_topology

    state = tmp_path_factory.mktemp("slurmmeg")
    lab.up(state, find_topology("hgx-h100-8gpu"), NODES, parse_fault_args(["sim03:train-slow"], NODES),
           health_interval=300)
    try:
        yield state, {**os.environ, **lab.client_env(state)}
    finally:
        lab.down(state)
