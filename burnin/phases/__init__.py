"""Active measurement phases, found by the suite they measure for (``burnin run --suite NAME``).

A phase runs between gathering and judging: it launches work on the nodes
through the launcher its context hands it (:meth:`PhaseContext.launcher`, a
:class:`burnin.launch.base.Launcher`) and records what it measured into each
node's facts, which the suite's checks then judge. The fabric suite's phase runs nccl-tests and nvbandwidth; the
megatron suite's runs a short training job and the placement probe; the node
suite's launches nothing and counts the fleet's inventory for INV-11.

Adding a phase is one module with a :class:`Phase` subclass named ``PHASE`` and
one line in :data:`PHASES` (docs/architecture.md). Every ``burnin run`` reads
every phase's options, so a phase module imports its heavy parts inside
:meth:`Phase.run`.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from burnin.dispatch.base import Dispatcher
    from burnin.facts import Facts
    from burnin.launch.base import Launcher
    from burnin.topology.model import Topology

# suite name -> module holding PHASE
PHASES: dict[str, str] = {
    "node": "burnin.phases.fleet",
    "fabric": "burnin.phases.fabric",
    "megatron": "burnin.phases.megatron",
    "storage": "burnin.phases.storage",
}


DRY_RUN_REASON = "dry run: not measured (--dry-run printed the commands and launched none)"
"""Why every check of a phase is incomplete after ``burnin run --dry-run``: the phase's launcher printed the plan
the phase declared when it held its nodes, and held and launched nothing."""


@dataclass
class PhaseContext:
    """What a phase works with: the dispatcher, the gathered facts (it adds to them), the node type, the output."""

    dispatcher: Dispatcher
    facts: dict[str, Facts]
    topology: Topology
    out_dir: Path
    dry_run: bool = False
    """``--dry-run``: :meth:`launcher` hands out a launcher that prints what it would start (``say``), starts
    nothing and refuses to hold the nodes with :data:`DRY_RUN_REASON`, which the phase records for every node."""
    say: Callable[[str], None] = field(default=print)
    """Where a dry run prints the commands."""

    @property
    def reachable(self) -> list[str]:
        """The nodes whose facts were gathered (an unreachable node is measured by nothing)."""
        return [node for node, node_facts in self.facts.items() if not node_facts.unreachable]

    def launcher(self, log: str | None = None) -> Launcher:
        """The dispatcher's launcher for these nodes, its commands logged to ``OUT/<log>``; under ``--dry-run`` one
        that prints what it would start and starts nothing (the phase runs the same code either way)."""
        from burnin.launch.log import CommandLog

        launcher = self.dispatcher.launcher(self.facts, log=CommandLog(self.out_dir / log) if log else None)
        if not self.dry_run:
            return launcher
        from burnin.launch.dryrun import DryRunLauncher

        return DryRunLauncher(launcher, self.say, DRY_RUN_REASON)


class Phase:
    """One active measurement phase. Subclasses set :attr:`suite` and implement :meth:`run`."""

    suite: str = ""
    """The suite whose checks judge what this phase measures (``--suite NAME`` runs it)."""

    def add_arguments(self, group: argparse._ArgumentGroup) -> None:
        """The phase's own options (``--fabric-config``); none by default."""

    def options(self, args: argparse.Namespace, *, running: bool) -> Any:
        """Check the phase's options and turn them into what :meth:`run` takes.

        ``running``: whether this run runs the phase's suite; an option given for a
        suite that does not run is a usage error (say which ``--suite`` to add).
        """
        return None

    def run(self, context: PhaseContext, options: Any) -> None:
        """Measure and record the results into ``context.facts`` (one section per node).

        With ``context.dry_run`` nothing is launched on any node: the phase prints each command instead
        and records :data:`DRY_RUN_REASON` as every node's section."""
        raise NotImplementedError


@dataclass(frozen=True)
class PhaseRun:
    """A phase this run runs, with its checked options."""

    phase: Phase
    options: Any = None


def suite_name(suite: str) -> str:
    """A suite's name: a shipped suite's own, or the folder name of a site suite passed as a path."""
    return Path(suite).name


def load_phase(suite: str) -> Phase | None:
    """The registered phase of ``suite`` (None: the suite has no phase)."""
    target = PHASES.get(suite_name(suite))
    if target is None:
        return None
    phase: Phase = importlib.import_module(target).PHASE
    return phase


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Each registered phase's options, in a group of its own."""
    for suite in PHASES:
        phase = load_phase(suite)
        if phase is not None:
            phase.add_arguments(parser.add_argument_group(f"{suite} suite"))


def phases_for(args: argparse.Namespace, suites: Sequence[str]) -> list[PhaseRun]:
    """The phases of ``suites``, in the order given, each with its options checked; every registered phase
    also checks that its options are not given to a run without its suite."""
    running = {suite_name(s) for s in suites}
    runs: dict[str, PhaseRun] = {}
    for suite in PHASES:
        phase = load_phase(suite)
        if phase is None:
            continue
        options = phase.options(args, running=suite in running)
        if suite in running:
            runs[suite] = PhaseRun(phase, options)
    return [runs[name] for name in dict.fromkeys(suite_name(s) for s in suites) if name in runs]

