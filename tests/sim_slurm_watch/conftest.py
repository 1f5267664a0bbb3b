"""A real Slurm cluster of 4 simulated nodes with `burnin watch` on every node (`sim up --watch`).

The health check runs once an hour only, so whatever drains a node here is the watch.
Missing slurm-wlm/munge or root skips the tier, except under CI where it fails.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from simwatch_support import NODES, WatchLab

from burnin.transport.slurm import SlurmClient
from burnin_lab import slurm as lab


@pytest.fixture(scope="module")
def watch_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WatchLab]:
    missing = lab.missing_commands()
    if missing or os.geteuid() != 0:
        message = (f"sim-slurm-watch tier needs slurm-wlm and munge (missing: {', '.join(missing)})" if missing
                   else "sim-slurm-watch tier needs root (slurmd, unshare --uts)")
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    from burnin.topology import find_topology

    state = tmp_path_factory.mktemp("slurmwatch")
    lab.up(state, find_topology("hgx-h100-8gpu"), NODES, {}, health_interval=3600, watch=[])
    try:
        yield WatchLab(state, SlurmClient(lab.client_env(state)))
    finally:
        lab.down(state)
