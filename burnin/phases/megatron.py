"""The megatron suite's phase: the placement probe and a short Megatron-LM run on every node and group.

The measurement itself is :mod:`burnin.megatron.phase`; this module registers it
and reads its option (``--megatron-config FILE``, docs/megatron.md).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from burnin.errors import UsageError
from burnin.phases import Phase, PhaseContext


class MegatronPhase(Phase):
    suite = "megatron"

    def add_arguments(self, group: argparse._ArgumentGroup) -> None:
        group.add_argument("--megatron-config", type=Path, metavar="FILE",
                           help="megatron: site settings YAML (script or container, model shape, launcher; "
                                "see docs/megatron.md)")

    def options(self, args: argparse.Namespace, *, running: bool) -> Any:
        config: Path | None = getattr(args, "megatron_config", None)
        if not running:
            if config is not None:
                raise UsageError("--megatron-config applies to the megatron suite only: add --suite megatron")
            return None
        if config is not None and not config.is_file():
            raise UsageError(f"--megatron-config {config}: no such file")
        from burnin.megatron.config import load_megatron_settings
        from burnin.megatron.phase import MegatronOptions

        load_megatron_settings(config)  # a mistake in the file is reported before any node is touched
        return MegatronOptions(config)

    def run(self, context: PhaseContext, options: Any) -> None:
        from burnin.megatron.alone import passed_alone
        from burnin.megatron.phase import LOG_FILE, run_megatron_phase

        run_megatron_phase(context.launcher(LOG_FILE), context.facts, topology=context.topology,
                           out_dir=context.out_dir, options=options, passed_alone=passed_alone)


PHASE = MegatronPhase()
