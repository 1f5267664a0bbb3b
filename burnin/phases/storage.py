"""The storage suite's phase: STO-04 pings every storage target with don't-fragment packets that fill the
storage MTU, then STO-03 writes and reads each storage mount while sampling the fabric byte counters.

The measurements themselves are :mod:`burnin.storage.pathmtu` and
:mod:`burnin.storage.measure`; this module registers them and reads the
phase's option (``--storage-config FILE``, docs/storage.md). The pings go
first, so their few packets are not counted in STO-03's byte counters.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from burnin.errors import UsageError
from burnin.phases import Phase, PhaseContext

ALLOCATION_WAIT_S = 300.0
"""How long the storage suite waits for its Slurm allocation."""


class StoragePhase(Phase):
    suite = "storage"

    def add_arguments(self, group: argparse._ArgumentGroup) -> None:
        group.add_argument("--storage-config", type=Path, metavar="FILE",
                           help="storage: site settings YAML (tool auto|fio|dd, size_mib, timeout_s; "
                                "see docs/storage.md)")

    def options(self, args: argparse.Namespace, *, running: bool) -> Any:
        config: Path | None = getattr(args, "storage_config", None)
        if not running:
            if config is not None:
                raise UsageError("--storage-config applies to the storage suite only: add --suite storage")
            return None
        if config is not None and not config.is_file():
            raise UsageError(f"--storage-config {config}: no such file")
        from burnin.storage.measure import load_storage_settings

        return load_storage_settings(config)

    def run(self, context: PhaseContext, options: Any) -> None:
        launcher = context.job_launcher()
        if launcher.transport is not None or launcher.slurm is None or context.dry_run or not context.reachable \
                or context.topology.storage is None:
            self._measure(context, options, launcher.transport, launcher.name)
            return
        # Through Slurm: one allocation of the nodes (or the one burnin runs in), a step per command.
        from burnin.storage.measure import phase_time_limit
        from burnin.transport.slurm import SlurmStepTransport

        allocation = launcher.slurm.allocation(context.reachable, label="storage", exclusive=False,
                                               tasks_per_node=1, purpose="the storage suite")
        try:
            failure = allocation.open(time_limit_s=phase_time_limit(context.topology, options),
                                      wait_s=ALLOCATION_WAIT_S, slack_s=60.0)
            if failure is not None or allocation.job_id is None:
                self._measure(context, options, None, failure or "the Slurm allocation")
                return
            steps = SlurmStepTransport(launcher.slurm.client, allocation.job_id, job_name="burnin-storage")
            self._measure(context, options, steps, launcher.name)
        finally:
            allocation.close()

    @staticmethod
    def _measure(context: PhaseContext, options: Any, transport: Any, launcher_name: str) -> None:
        from burnin.storage.measure import run_storage_phase
        from burnin.storage.pathmtu import run_pathmtu_phase

        run_pathmtu_phase(transport, context.facts, context.reachable, topology=context.topology,
                          launcher_name=launcher_name, say=context.say, dry_run=context.dry_run)
        run_storage_phase(transport, context.facts, context.reachable, topology=context.topology,
                          settings=options, launcher_name=launcher_name, say=context.say, dry_run=context.dry_run)


PHASE = StoragePhase()
