"""What every dispatcher (sim, ssh, slurm) offers to ``burnin run``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from burnin.facts import Facts


class Dispatcher(Protocol):
    nodes: list[str]
    topology_by_node: dict[str, str]

    def gather(self, *, sources: str, timeout: float, on_done: Callable[[str], None] | None = None
               ) -> dict[str, Facts]: ...

    def close(self) -> None: ...
