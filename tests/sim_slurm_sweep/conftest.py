"""A real Slurm cluster (munged, slurmctld, 6 slurmd) of simulated nodes with preemption, for ``burnin sweep``.

Partition ``batch`` (the default, PriorityTier 10) preempts partition ``sweep`` (PriorityTier 1,
``PreemptMode=CANCEL``, no grace time) on the same nodes (``burnin_lab.slurm.up(preemption=True)``). The
health check runs only as each slurmd starts (interval one hour), so faults injected afterwards are found
by the sweep, not by the probe. Missing slurm-wlm/munge or root skips the tier, except under CI where it fails.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from folder_labs import folder_lab
from simsweep_support import NODES, SweepLab

from burnin.transport.slurm import SlurmClient
from burnin_lab import slurm as lab


@folder_lab  # one cluster for every module here: starting it is the slow part
def sweep_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SweepLab]:
    missing = lab.missing_commands()
    if missing or os.geteuid() != 0:
        message = (f"sim-slurm tier needs slurm-wlm and munge (missing: {', '.join(missing)})" if missing
                   else "sim-slurm tier needs root (slurmd, unshare --uts)")
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    from burnin.topology import find_topology

    state = tmp_path_factory.mktemp("slurmsweep")
    lab.up(state, find_topology("hgx-h100-8gpu"), NODES, {}, health_interval=3600, preemption=True)
    try:
        yield SweepLab(state, {**os.environ, **lab.client_env(state)}, SlurmClient(lab.client_env(state)))
    finally:
        lab.down(state)
