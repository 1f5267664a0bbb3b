"""The one home for "run this on these nodes": the :class:`Launcher` protocol and its implementations.

- :mod:`burnin.launch.base`: the protocol, what it is asked to start (:class:`NodeCommand`,
  :class:`JobSpec`, :class:`Hold`, plan items), the one error wrapper and the one set of limits;
- :mod:`burnin.launch.log`: the one command log;
- :mod:`burnin.launch.ssh`: over a transport (SSH's pooled connections), jobs with ``mpirun`` from the first
  node (:func:`burnin.launch.ssh.mpirun_argv`);
- :mod:`burnin.launch.local`: simulated racks, a job as one process that models its group;
- :mod:`burnin.launch.slurm`: one allocation, srun steps, the one srun argv builder;
- :mod:`burnin.launch.dryrun`: ``--dry-run``, prints and starts nothing;
- :mod:`burnin.launch.gather`: facts from the collector launched on every node.

Dispatchers (:mod:`burnin.dispatch`) build the launcher for their nodes; phases and the soak receive it.
Only :mod:`burnin.transport` below starts processes.
"""

from burnin.launch.base import (
    ALLOC_WAIT_S,
    HOLD_WAIT_S,
    SLACK_S,
    Container,
    Each,
    Hold,
    JobForm,
    JobSpec,
    Launcher,
    MpirunOptions,
    NodeCommand,
    Note,
    PlanItem,
    Preset,
    SrunOptions,
    not_started,
    run_guarded,
)
from burnin.launch.log import CommandLog

__all__ = ["ALLOC_WAIT_S", "HOLD_WAIT_S", "SLACK_S", "CommandLog", "Container", "Each", "Hold", "JobForm", "JobSpec",
           "Launcher", "MpirunOptions", "NodeCommand", "Note", "PlanItem", "Preset", "SrunOptions", "not_started",
           "run_guarded"]
