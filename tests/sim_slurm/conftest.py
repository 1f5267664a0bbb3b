"""A real Slurm cluster (munged, slurmctld, 4 slurmd) of simulated nodes, one per session.

sim02 starts with ``ib-port-down``; the health check (``burnin probe --drain``)
runs every 5 s. Tests put the cluster back with ``slurm_lab.reset()`` first.
Missing slurm-wlm/munge skips the tier, except under CI where it fails.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from folder_labs import folder_lab
from simslurm_support import HEALTH_INTERVAL, NODES, SlurmLab

from burnin.transport.slurm import SlurmClient
from burnin_lab import slurm as lab


def _require_slurm() -> None:
    missing = lab.missing_commands()
    if not missing and os.geteuid() == 0:
        return
    message = (f"sim-slurm tier needs slurm-wlm and munge (missing: {', '.join(missing)})"
               if missing else "sim-slurm tier needs root (slurmd, unshare --uts)")
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@folder_lab
def slurm_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmLab]:
    _require_slurm()
    from burnin.dispatch.sim import parse_fault_args
    from burnin.topology import find_topology

    state = tmp_path_factory.mktemp("slurm")
    faults = parse_fault_args(["sim02:ib-port-down"], NODES)
    lab.up(state, find_topology("hgx-h100-8gpu"), NODES, faults, health_interval=HEALTH_INTERVAL)
    env = {**os.environ, **lab.client_env(state)}
    try:
        yield SlurmLab(state, env, SlurmClient(lab.client_env(state)))
    finally:
        lab.down(state)
