"""Measuring nodes burnin drained, without opening them to anyone else's jobs.

Slurm starts no job on a drained node. To measure a node burnin drained
(reason ``burnin:...``) again, a maintenance reservation (``MAINT,IGNORE_JOBS``,
for this user only) is put over it first, then it is resumed inside it, so no
other job can land on it at any moment. Afterwards each node is drained again
with the reason it had (unless something drained it again meanwhile, whose
newer reason stays) and the reservation is deleted; the gate decides then.

Used by the collector step (:mod:`burnin.dispatch.slurm`) and the fabric
phase's Slurm launcher (:mod:`burnin.fabric.launch`). The reservation may
cover more nodes than the drained ones (the fabric phase needs all its nodes
in one allocation); only the drained ones are resumed and drained again.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field

from burnin.gate.slurm import SlurmNode, drain_argv, read_nodes, resume_argv
from burnin.nodes import fold
from burnin.transport.base import CommandResult
from burnin.transport.slurm import (
    QUICK_TIMEOUT,
    SlurmRunner,
    create_reservation_argv,
    delete_reservation_argv,
    scancel_argv,
)

# Runs one client command with a timeout (and logs it): the caller's own runner.
RunCommand = Callable[[list[str], float], CommandResult]
POLL_S = 0.5


def recheckable(info: SlurmNode) -> bool:
    """Drained by burnin, no job left on it, and slurmd answering."""
    return (info.drained and info.ours and not info.busy
            and not info.flags & {"DOWN", "NOT_RESPONDING", "FAIL"})


@dataclass
class Recheck:
    """A reservation ``name`` over ``nodes``; ``drained`` maps each node to resume to its reason."""

    name: str
    nodes: list[str]
    drained: dict[str, str] = field(default_factory=dict)

    def open(self, run: RunCommand) -> str | None:
        """Reserve the nodes, then resume the drained ones inside; why not, on failure.

        Call :meth:`close` afterwards in every case, failed or not.
        """
        user = pwd.getpwuid(os.getuid()).pw_name
        made = run(create_reservation_argv(self.name, self.nodes, user), QUICK_TIMEOUT)
        if not made.ok:
            return f"cannot reserve the node to recheck it: {made.describe_failure()}"
        resumed = run(resume_argv(fold(list(self.drained))), QUICK_TIMEOUT)
        if not resumed.ok:
            return f"cannot resume the node inside reservation {self.name}: {resumed.describe_failure()}"
        return None

    def allocate(self, run: RunCommand, client: SlurmRunner, argv: list[str], timeout: float,
                 job_name: str) -> tuple[CommandResult, str]:
        """Run ``argv`` (salloc), given up as soon as a resumed node is drained again meanwhile.

        A resumed node is not schedulable for a moment (``idle*``); a health check
        that finds it still failing drains it again, and the allocation could never
        start. Returns salloc's result and, in that case, why it was cancelled.
        """
        with ThreadPoolExecutor(max_workers=1) as pool:
            pending = pool.submit(run, argv, timeout)
            while True:
                try:
                    return pending.result(timeout=POLL_S), ""
                except FutureTimeout:
                    pass
                current, _ = read_nodes(list(self.drained), timeout=QUICK_TIMEOUT, client=client)
                again = {n: info.reason for n, info in current.items() if info.drained}
                if again:
                    run(scancel_argv(job_name=job_name), QUICK_TIMEOUT)
                    reasons = "; ".join(f"{n}: {r}" for n, r in again.items())
                    return pending.result(), f"drained again while waiting to be rechecked ({reasons})"

    def close(self, run: RunCommand, client: SlurmRunner) -> None:
        """Drain each resumed node again with the reason it had, then drop the reservation.

        A node drained again meanwhile keeps that newer reason. If a drain fails
        the reservation is kept, so the node still takes no job.
        """
        restored = True
        current, error = read_nodes(list(self.drained), timeout=QUICK_TIMEOUT, client=client)
        by_reason: dict[str, list[str]] = {}
        for node, reason in self.drained.items():
            info = current.get(node)
            if error is None and info is not None and info.drained:
                continue
            by_reason.setdefault(reason, []).append(node)
        for reason, nodes in by_reason.items():
            restored &= run(drain_argv(fold(nodes), reason), QUICK_TIMEOUT).ok
        if restored:
            run(delete_reservation_argv(self.name), QUICK_TIMEOUT)


def plan_recheck(name: str, nodes: Sequence[str], current: dict[str, SlurmNode]) -> Recheck | None:
    """A recheck over all ``nodes`` when some of them are burnin-drained and recheckable."""
    drained = {n: current[n].reason for n in nodes if n in current and recheckable(current[n])}
    return Recheck(name, list(nodes), drained) if drained else None
