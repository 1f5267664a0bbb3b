"""A real Slurm cluster (munged, MariaDB, slurmdbd, slurmctld, 3 slurmd) of simulated nodes with accounting, for the
Slurm node events ``burnin reliability`` reads (``sacctmgr show event``).

``burnin_lab.slurm.up(accounting=True)``: a private MariaDB on loopback, slurmdbd over it, the cluster registered.
Missing slurm-wlm/munge/mariadb-server/slurmdbd or root skips the tier, except under CI where it fails.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator

import pytest

NODES = ["sim01", "sim02", "sim03"]


@pytest.fixture(scope="module")
def accounting_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The client environment (``SLURM_CONF``) of the running cluster."""
    from burnin_lab import slurm as lab
    from burnin_lab import slurmdbd

    search = os.pathsep.join([os.environ.get("PATH", ""), lab.SYSTEM_PATH])
    missing = lab.missing_commands() + slurmdbd.missing_commands(search)
    if missing or os.geteuid() != 0 or shutil.which("mariadbd", path=search) is None:
        message = (f"sim-slurm accounting tier needs slurm-wlm, munge, mariadb-server and slurmdbd (missing: "
                   f"{', '.join(missing)})" if missing else "sim-slurm tier needs root (slurmd, unshare --uts)")
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    from burnin.topology import find_topology

    state = tmp_path_factory.mktemp("slurmacct")
    started = time.monotonic()
    lab.up(state, find_topology("hgx-h100-8gpu"), NODES, {}, health_interval=3600, accounting=True)
    print(f"accounting lab up in {time.monotonic() - started:.1f} s")
    try:
        yield {**os.environ, **lab.client_env(state)}
    finally:
        lab.down(state)
