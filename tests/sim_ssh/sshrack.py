"""Helpers of the sim-ssh tier: the rack's layout, skip rules, state folders, the CLI.

sim01..sim08 are ordinary nodes (sim05 with the simulator fault pcie-x8);
sim09..sim14 each break the transport in one way (see TRANSPORT_FAULTS).
Missing openssh-server (or not root) fails the tier under CI and skips it elsewhere.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tmpfs_root import tmpfs_temproot

NODES = 14
HEALTHY = [f"sim{i:02d}" for i in range(1, 9)]
SIM_FAULTS = ["sim05:pcie-x8"]
TRANSPORT_FAULTS = {
    "sim09": "hang",
    "sim10": "garbage",
    "sim11": "no-python3",
    "sim12": "refuse-key",
    "sim13": "host-key-changed",
    "sim14": "host-key-unknown",
}


@dataclass(frozen=True)
class Rack:
    state: Path
    lab: dict[str, Any]

    @property
    def inventory(self) -> Path:
        return self.state / "inventory.yaml"

    @property
    def ssh_config(self) -> Path:
        return Path(self.lab["ssh_config"])

    @property
    def known_hosts(self) -> Path:
        return Path(self.lab["known_hosts"])

    def address(self, node: str) -> str:
        return str(self.lab["nodes"][node]["address"])


def require_sim_ssh() -> None:
    """Skip (or fail under CI) when this machine cannot run the sim-ssh tier."""
    from burnin_lab.ssh import sshd_available

    problem = None
    if sshd_available() is None:
        problem = "sshd not installed (apt-get install openssh-server)"
    elif os.geteuid() != 0:
        problem = "the sim-ssh tier needs root (sshd on 127.0.1.x:22, a login account)"
    elif not Path("/usr/bin/python3").is_file():
        problem = "/usr/bin/python3 missing (simulated nodes run the collector with it)"
    if problem:
        if os.environ.get("CI"):
            pytest.fail(f"sim-ssh tier cannot run: {problem}")
        pytest.skip(problem)


def require_netns() -> None:
    """Skip (or fail under CI) when this machine cannot give a lab rack kernel networking (netns)."""
    require_sim_ssh()
    from burnin_lab.netns import unavailable

    problem = unavailable()
    if problem:
        if os.environ.get("CI"):
            pytest.fail(f"kernel-network lab cannot run: {problem}")
        pytest.skip(problem)


def require_mpirun() -> None:
    """Skip (or fail under CI) when OpenMPI's mpirun and orted are missing (apt-get install openmpi-bin)."""
    import shutil

    if not (shutil.which("mpirun") and shutil.which("orted")):
        if os.environ.get("CI"):
            pytest.fail("mpirun over the SSH lab cannot run: openmpi-bin not installed")
        pytest.skip("openmpi-bin not installed (apt-get install openmpi-bin)")


def worker_subnet(offset: int = 0) -> str:
    """A loopback /24 per xdist worker and test session, so parallel racks do not fight over addresses.

    The third octet tells the workers of one session apart; the second comes from the session
    (xdist's run id, shared by its workers, or this process), so two sessions running on one
    machine at the same time (two developers, a CI run) land on different addresses too.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    number = int(worker[2:]) if worker[2:].isdigit() else 0
    session = os.environ.get("PYTEST_XDIST_TESTRUNUID") or str(os.getpid())
    second = 1 + int(hashlib.sha256(session.encode()).hexdigest(), 16) % 254
    return f"127.{second}.{40 + 4 * number + offset}"


# A lab node is ~5,000 files and ~16 MB: on a disk, writing and deleting an 8-node lab's 40,000 took minutes on
# a busy 2-core CI machine, on tmpfs about a second. /dev/shm is used when it has room for a 64-node lab twice.
SHM_NEEDED = 2 << 30


def state_base() -> str:
    """/dev/shm when it is a writable tmpfs with room, else /tmp (a container's 64 MB /dev/shm has none)."""
    return tmpfs_temproot(needed=SHM_NEEDED) or "/tmp"


def make_state_dir(prefix: str) -> Path:
    """A state folder the login account can reach (pytest's own tmp dirs are private), on tmpfs when it can."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=state_base()))
    path.chmod(0o755)
    return path


def burnin(*args: str, timeout: float = 300, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "burnin.cli.main", *args], capture_output=True,
                          text=True, timeout=timeout, check=False, cwd=cwd)
