"""The soak's one seam to the nodes: run a command on some nodes, take a sample of every node.

:class:`SoakNodes` is all the scheduler knows of nodes. :class:`DispatcherNodes`
implements it for any dispatcher that offers a transport (simulated nodes,
SSH): commands go through the transport, samples through the dispatcher's own
collector run (``gather``) with the sources below. A dispatcher refactor
rewires this class only.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from burnin.facts import Facts
from burnin.transport.base import CommandResult

SAMPLE_SOURCES = "nvml,gpu-telemetry,host-health,kernel-events,dmon,infiniband"


class SoakNodes(Protocol):
    nodes: list[str]

    def run(self, nodes: Sequence[str], argv: Sequence[str], *, timeout: float,
            stdin: bytes | None = None) -> dict[str, CommandResult]:
        """Run ``argv`` on every node of ``nodes`` at once; one result each (never raises for one node)."""

    def sample(self, *, timeout: float) -> dict[str, Facts]:
        """Every node's monitoring sample (an unreachable node gets Facts saying why)."""

    def close(self) -> None: ...


class DispatcherNodes:
    """A dispatcher with a ``transport`` (sim, ssh) as the soak's nodes."""

    def __init__(self, dispatcher: Any, *, fanout: int = 64) -> None:
        transport = getattr(dispatcher, "transport", None)
        if transport is None:
            from burnin.errors import UsageError

            raise UsageError(f"{type(dispatcher).__name__} offers no transport: burnin soak runs over --sim or "
                             "--via ssh")
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

    def sample(self, *, timeout: float) -> dict[str, Facts]:
        facts: dict[str, Facts] = self._dispatcher.gather(sources=SAMPLE_SOURCES, timeout=timeout)
        return facts

    def close(self) -> None:
        self._dispatcher.close()
