"""The storage suite's phase: STO-04 pings every storage target with don't-fragment packets that fill the
storage MTU, then STO-03 writes and reads each storage mount while sampling the fabric byte counters.

The measurements themselves are :mod:`burnin.storage.phase` (:mod:`burnin.storage.pathmtu`,
:mod:`burnin.storage.measure`); this module registers them and reads the
phase's option (``--storage-config FILE``, docs/storage.md).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from burnin.errors import UsageError
from burnin.phases import Phase, PhaseContext


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
        from burnin.storage.phase import run_storage_phase

        run_storage_phase(context.launcher(), context.facts, context.reachable, topology=context.topology,
                          settings=options)


PHASE = StoragePhase()
