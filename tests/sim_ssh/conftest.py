"""One simulated SSH rack per test session (per xdist worker): real sshd per node on loopback."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

from folder_labs import folder_lab
from sshrack import NODES, SIM_FAULTS, TRANSPORT_FAULTS, Rack, make_state_dir, require_sim_ssh, worker_subnet


@folder_lab
def ssh_rack() -> Iterator[Rack]:
    require_sim_ssh()
    from burnin.dispatch.sim import parse_fault_args
    from burnin.nodes import sim_names
    from burnin.topology import find_topology
    from burnin_lab import ssh as lab_ssh

    names = sim_names(NODES)
    state = make_state_dir("burnin-sim-ssh-")
    try:
        lab = lab_ssh.up(state, find_topology("hgx-h100-8gpu"), names, parse_fault_args(SIM_FAULTS, names),
                         transport_faults=TRANSPORT_FAULTS, subnet=worker_subnet())
        yield Rack(state, lab)
    finally:
        if (state / "lab.json").exists():
            lab_ssh.down(state)
        shutil.rmtree(state, ignore_errors=True)
