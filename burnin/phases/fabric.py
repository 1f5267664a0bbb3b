"""The fabric suite's phase: nccl-tests, nvbandwidth and ib_write_bw on every node, then multi-node runs.

The measurement itself is :mod:`burnin.fabric.phase`; this module registers it
and reads its options (``--fabric-config FILE``, ``--localize``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from burnin.errors import UsageError
from burnin.phases import Phase, PhaseContext


class FabricPhase(Phase):
    suite = "fabric"

    def add_arguments(self, group: argparse._ArgumentGroup) -> None:
        group.add_argument("--localize", action="store_true",
                           help="fabric: name bad nodes by pairwise runs even when the multi-node run passes")
        group.add_argument("--fabric-config", type=Path, metavar="FILE",
                           help="fabric: site settings YAML (tools, launcher, sizes; see docs/fabric.md)")

    def options(self, args: argparse.Namespace, *, running: bool) -> Any:
        config: Path | None = getattr(args, "fabric_config", None)
        localize = bool(getattr(args, "localize", False))
        if not running:
            for flag, given in (("--fabric-config", config is not None), ("--localize", localize)):
                if given:
                    raise UsageError(f"{flag} applies to the fabric suite only: add --suite fabric")
            return None
        if config is not None and not config.is_file():
            raise UsageError(f"--fabric-config {config}: no such file")
        from burnin.fabric.phase import FabricOptions

        return FabricOptions(config, localize)

    def run(self, context: PhaseContext, options: Any) -> None:
        from burnin.checks.fabric import failed_alone
        from burnin.fabric.phase import LOG_FILE, run_fabric_phase

        run_fabric_phase(context.launcher(LOG_FILE), context.facts, topology=context.topology,
                         out_dir=context.out_dir, options=options, failed_alone=failed_alone)


PHASE = FabricPhase()
