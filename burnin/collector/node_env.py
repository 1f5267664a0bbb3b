"""Which node this process runs as, and where its system files are: the only reader of the simulator's environment.

On a real node these are the host name, ``/`` and ``/dev/kmsg``. A simulated
node is a process the simulator started with ``BURNIN_SIM_NODE`` (its name),
``BURNIN_ROOT`` (the folder holding its sysfs and procfs tree) and
``BURNIN_SIM_NVML`` (its NVML state, beside which its kernel log lies) set
(burnin.sim.build, ``SimNode.environment``); the collector, the probe and the
watch learn it here and nowhere else. Standard library only: this module travels in the collector
zipapp.
"""

from __future__ import annotations

import os
import sys

SIM_NODE_ENV = "BURNIN_SIM_NODE"
ROOT_ENV = "BURNIN_ROOT"
SIM_NVML_ENV = "BURNIN_SIM_NVML"
SDC_PYTHON_ENV = "BURNIN_SIM_SDC_PYTHON"
"""A simulated node's python with torch for GPU-14's workload (a lab node's own python3 has none)."""


def simulated() -> bool:
    """True when this process runs as a simulated node."""
    return bool(os.environ.get(SIM_NODE_ENV))


def host_name() -> str:
    """The node's name as the system knows it (a simulated node's own name)."""
    return os.environ.get(SIM_NODE_ENV) or _system_host_name()


def short_name() -> str:
    """The node's short name (``gpu001``, not ``gpu001.cluster``): what Slurm calls it."""
    return os.environ.get(SIM_NODE_ENV) or _system_host_name().split(".")[0]


def _system_host_name() -> str:
    """``gethostname()``, which on Linux is the kernel's ``uname`` node name (read without importing socket)."""
    return os.uname().nodename


def root() -> str:
    """The folder below which sysfs and procfs are read: ``/``, or a simulated node's tree."""
    return os.environ.get(ROOT_ENV) or "/"


def sdc_python() -> str:
    """The python that runs GPU-14's SDC workload: the collector's own (the node's python3), or the one a
    simulated node names (the interpreter that rendered it, which has the CPU build of torch) where this
    node's user may run it."""
    named = os.environ.get(SDC_PYTHON_ENV) if simulated() else None
    if named and os.access(named, os.X_OK):
        return named
    return sys.executable or "python3"  # a lab node's user cannot run it: the workload finds torch by path


def kernel_log() -> str:
    """The kernel log to follow: ``/dev/kmsg``, or a simulated node's ``kmsg`` file (burnin.sim.events)."""
    state = os.environ.get(SIM_NVML_ENV)
    return os.path.join(os.path.dirname(state), "kmsg") if state else "/dev/kmsg"
