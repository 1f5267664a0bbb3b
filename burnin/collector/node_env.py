"""Which node this process runs as, and where its system files are: the only reader of the simulator's environment.

On a real node these are the host name and ``/``. A simulated node is a process
the simulator started with ``BURNIN_SIM_NODE`` (its name) and ``BURNIN_ROOT``
(the folder holding its sysfs and procfs tree) set (burnin.sim.build,
``SimNode.environment``); the collector, the probe and the watch learn it here
and nowhere else. Standard library only: this module travels in the collector
zipapp.
"""

from __future__ import annotations

import os
import socket

SIM_NODE_ENV = "BURNIN_SIM_NODE"
ROOT_ENV = "BURNIN_ROOT"


def simulated() -> bool:
    """True when this process runs as a simulated node."""
    return bool(os.environ.get(SIM_NODE_ENV))


def host_name() -> str:
    """The node's name as the system knows it (a simulated node's own name)."""
    return os.environ.get(SIM_NODE_ENV) or socket.gethostname()


def short_name() -> str:
    """The node's short name (``gpu001``, not ``gpu001.cluster``): what Slurm calls it."""
    return os.environ.get(SIM_NODE_ENV) or socket.gethostname().split(".")[0]


def root() -> str:
    """The folder below which sysfs and procfs are read: ``/``, or a simulated node's tree."""
    return os.environ.get(ROOT_ENV) or "/"
