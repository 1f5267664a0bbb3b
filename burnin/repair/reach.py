"""How the repair reaches a node: the dispatchers ``burnin run`` uses (``--via sim|ssh|slurm``).

A command on the node is one :meth:`Launcher.per_node` through the node's dispatcher's launcher (held for it,
then released); the acceptance is :func:`burnin.session.execute` over the node alone, with the site's suites
and their phases, exactly as ``burnin run`` judges (its results in the attempt's folder).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from burnin.launch.base import Hold, NodeCommand, not_started, slack

if TYPE_CHECKING:
    from burnin.dispatch.base import Dispatcher
    from burnin.phases import PhaseRun
    from burnin.session import RunResult
    from burnin.transport.base import CommandResult

Opener = Callable[[list[str], Path], "Dispatcher"]
"""Opens a dispatcher over the named nodes, writing what it keeps (logs) in the folder."""


class DispatcherReach:
    """Commands and acceptance runs on nodes through dispatchers opened by ``opener``."""

    def __init__(self, opener: Opener, *, topology: str, suites: Sequence[str], keyword: str | None,
                 phases: Sequence[PhaseRun], work_dir: Path, gather_timeout: float = 120.0) -> None:
        self._open = opener
        self._topology = topology
        self._suites = tuple(suites)
        self._keyword = keyword
        self._phases = list(phases)
        self._work = work_dir
        self._timeout = gather_timeout

    def run(self, node: str, argv: Sequence[str], timeout_s: float) -> CommandResult:
        from burnin.errors import BurninError

        try:
            dispatcher = self._open([node], self._work / node)
        except BurninError as exc:
            return not_started(node, argv, f"cannot reach {node}: {exc}")
        try:
            launcher = dispatcher.launcher({})
            command = NodeCommand(node, tuple(argv), timeout_s)
            failure = launcher.hold([node], Hold("repair", f"a repair step on {node}",
                                                 time_limit_s=timeout_s + slack(timeout_s)), [command])
            if failure:
                return not_started(node, argv, failure)
            try:
                return launcher.per_node([command])[node]
            finally:
                launcher.release()
        finally:
            dispatcher.close()

    def accept(self, node: str, out_dir: Path) -> RunResult:
        from burnin.session import execute

        dispatcher = self._open([node], out_dir)
        try:
            return execute(dispatcher, topology=self._topology, out_dir=out_dir, suites=self._suites,
                           keyword=self._keyword, timeout=self._timeout, phases=self._phases, say=lambda _: None)
        finally:
            dispatcher.close()
