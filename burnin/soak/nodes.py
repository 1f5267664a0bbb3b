"""The soak's one seam to the nodes: run a command on some nodes, take a sample of the nodes.

:class:`SoakNodes` is all the scheduler knows of nodes. :func:`open_nodes`
builds it from whatever dispatcher ``--sim`` / ``--via`` chose (the registry,
:mod:`burnin.dispatch.registry`), from what the dispatcher's job launcher
offers, never from the dispatcher's type:

- a ``transport`` (simulated nodes, SSH): :class:`DispatcherNodes`, commands
  through the transport, samples through the dispatcher's own collector run
  (``gather``);
- ``slurm`` (srun steps): :class:`burnin.soak.slurm_nodes.SlurmNodes`, one
  allocation for the whole soak, a step per node and command, one collector
  step per sample.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from burnin.facts import Facts
from burnin.transport.base import CommandResult

if TYPE_CHECKING:
    from burnin.dispatch.base import Dispatcher
    from burnin.transport.base import Transport

SAMPLE_SOURCES = "nvml,gpu-telemetry,host-health,kernel-events,dmon,infiniband"


class SoakNodes(Protocol):
    nodes: list[str]

    def run(self, nodes: Sequence[str], argv: Sequence[str], *, timeout: float,
            stdin: bytes | None = None) -> dict[str, CommandResult]:
        """Run ``argv`` on every node of ``nodes`` at once; one result each (never raises for one node)."""

    def sample(self, *, timeout: float, nodes: Sequence[str] | None = None) -> dict[str, Facts]:
        """A monitoring sample of ``nodes`` (default: every node; an unreachable node gets Facts saying why).

        Nodes no longer soaked may be sampled too; the caller reads the ones it asked for.
        """

    def close(self) -> None: ...


def open_nodes(dispatcher: Dispatcher, *, fanout: int, hold_s: float, log_file: Path | None = None) -> SoakNodes:
    """The soak's nodes through ``dispatcher``, by what its job launcher offers.

    ``hold_s``: how long the soak may still need the nodes (a Slurm allocation's time limit).
    The caller closes the result, then the dispatcher.
    """
    from burnin.dispatch.base import launcher_of

    launcher = launcher_of(dispatcher, {})
    if launcher.transport is not None:
        return DispatcherNodes(dispatcher, launcher.transport, fanout=fanout)
    if launcher.slurm is not None:
        from burnin.soak.slurm_nodes import SlurmNodes

        nodes = SlurmNodes(launcher.slurm, dispatcher.nodes, log_file=log_file)
        nodes.open(time_limit_s=hold_s)
        return nodes
    from burnin.errors import UsageError

    raise UsageError(f"the {launcher.name} dispatcher offers neither a transport nor Slurm steps: "
                     "burnin soak cannot run its stages there")


class DispatcherNodes:
    """A dispatcher whose launcher offers a ``transport`` (sim, ssh) as the soak's nodes."""

    def __init__(self, dispatcher: Dispatcher, transport: Transport, *, fanout: int = 64) -> None:
        self._dispatcher = dispatcher
        self._transport = transport
        self._fanout = fanout
        self.nodes: list[str] = list(dispatcher.nodes)

    def run(self, nodes: Sequence[str], argv: Sequence[str], *, timeout: float,
            stdin: bytes | None = None) -> dict[str, CommandResult]:
        if not nodes:
            return {}

        def one(node: str) -> CommandResult:
            try:
                result: CommandResult = self._transport.run(node, list(argv), timeout=timeout, stdin=stdin)
            except Exception as exc:  # noqa: BLE001 - one node's transport failure must not stop the soak
                return CommandResult(node, tuple(argv), None, "", "", 0.0, error=f"{type(exc).__name__}: {exc}")
            return result

        with ThreadPoolExecutor(max_workers=max(1, min(self._fanout, len(nodes)))) as pool:
            return dict(zip(nodes, pool.map(one, nodes), strict=True))

    def sample(self, *, timeout: float, nodes: Sequence[str] | None = None) -> dict[str, Facts]:
        """The dispatcher's gather of every node (its protocol gathers them all)."""
        facts: dict[str, Facts] = self._dispatcher.gather(sources=SAMPLE_SOURCES, timeout=timeout)
        return facts

    def close(self) -> None:
        """Nothing of its own: the transport is the dispatcher's."""
