"""Ask the breaker before taking nodes out: the claim file, Slurm's drains, the budget, the held log.

:func:`guard` is what every drain goes through (the Slurm gate, so ``burnin run/soak/sweep --gate slurm``
and ``burnin probe --drain``; the watch's drain and evict). It holds the claim file for as long as the
caller's ``with`` block runs, so the drains the caller sends inside it are in Slurm before another
process on this host reads the budget. It never admits or resumes anything: it only withholds drains.
When it cannot tell the budget (Slurm unreadable, a broken settings file) it holds every drain.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from burnin.breaker import state
from burnin.breaker.budget import Budget, Fleet, admit, budget, parse_fleet
from burnin.errors import UsageError
from burnin.text import printable
from burnin.transport.slurm import QUICK_TIMEOUT, SlurmClient, SlurmRunner

HELD = "held by the breaker"
FleetReader = Callable[[], "tuple[Fleet | None, str | None]"]
RECORDED = "record mode"


def fleet_argv() -> list[str]:
    """Every node, one line each, with its state and drain reason (and the reason's time)."""
    return ["scontrol", "--oneliner", "show", "node"]


@dataclass(slots=True)
class Admission:
    """The breaker's answer: the nodes that may be taken out, and the cause for each one held."""

    allowed: list[str]
    held: dict[str, str] = field(default_factory=dict)
    recorded: dict[str, str] = field(default_factory=dict)  # record-mode checks: the drain is only recorded
    budget: Budget | None = None
    notes: list[str] = field(default_factory=list)  # the claim file or held log could not be written

    def withheld(self) -> dict[str, str]:
        """Every node not drained: record mode or the budget."""
        return {**self.recorded, **self.held}

    def line(self, node: str) -> str:
        """The one-line log of a node held or recorded only."""
        if node in self.recorded:
            return f"{node}: {RECORDED} ({self.recorded[node]}); still rejected, not drained (burnin breaker status)"
        return f"{node}: {HELD} ({self.held[node]}); still rejected, not drained (burnin breaker status)"


def read_fleet(client: SlurmRunner, timeout: float) -> tuple[Fleet | None, str | None]:
    result = client.run(fleet_argv(), timeout=timeout)
    if not result.ok:
        return None, result.describe_failure()
    return parse_fleet(result.stdout), None


@contextlib.contextmanager
def guard(nodes: Sequence[str], *, by: str, reasons: Mapping[str, str] | None = None,
          checks: Mapping[str, tuple[str, ...] | None] | None = None, client: SlurmRunner | None = None,
          timeout: float = QUICK_TIMEOUT, dry_run: bool = False, folder: Path | None = None,
          clock: Callable[[], float] = time.time, fleet: FleetReader | None = None) -> Iterator[Admission]:
    """Decide which of ``nodes`` may be taken out now; keep the claim file while the caller drains them.

    ``by`` names the caller in the held log (``gate``, ``watch``); ``reasons`` the drain reason of each
    node, ``checks`` the check ids it names (a node whose every check is in record mode is only
    recorded). With ``dry_run`` the held log is not written. ``fleet`` reads the shared state of a scheduler
    other than Slurm (the Kubernetes gate: burnin's taints); by default Slurm's drains through ``client``.
    """
    if not nodes:
        yield Admission([])
        return
    folder = folder or state.directory()
    with state.claim(nodes, by, folder) as problem:
        reader = fleet or (lambda: read_fleet(client or SlurmClient(), timeout))
        admission = _decide(nodes, checks or {}, reader, "taints" if fleet else "drains in Slurm", folder, clock())
        if problem:
            admission.notes.append(f"breaker: {problem}; deciding without it")
        if admission.withheld() and not dry_run:
            now = clock()
            error = state.record_held([{"at": round(now, 3), "node": node, "by": by, "cause": cause,
                                        "mode": "record" if node in admission.recorded else "held",
                                        "reason": (reasons or {}).get(node, "")}
                                       for node, cause in admission.withheld().items()], folder)
            if error:
                admission.notes.append(f"breaker: held nodes not recorded: {error}")
        yield admission


def _decide(nodes: Sequence[str], checks: Mapping[str, tuple[str, ...] | None], reader: FleetReader, what: str,
            folder: Path, now: float) -> Admission:
    try:
        settings, allowance = state.load(folder)
    except UsageError as exc:
        return Admission([], dict.fromkeys(nodes, f"its settings cannot be read: {exc}"))
    fleet, error = reader()
    if fleet is None:
        cause = f"burnin's {what} cannot be read: {printable(error or '', limit=200)}"
        return Admission([], dict.fromkeys(nodes, cause))
    recorded = {node: f"{','.join(ids or ())} would take it out" for node in nodes
                if settings.record_only(ids := checks.get(node))}
    plan = budget(fleet, settings, now, allowance)
    allowed, held = admit(plan, [node for node in nodes if node not in recorded], now)
    return Admission(allowed, held, recorded, plan)
