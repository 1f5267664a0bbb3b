"""What every dispatcher (sim, ssh, slurm) offers to ``burnin run``.

A dispatcher knows which nodes a run covers, gathers their facts (a launch of
the collector on every node), and builds the :class:`~burnin.launch.base.Launcher`
the active phases (fabric, megatron, storage) and the soak run their work through,
which also says which built-in settings fit the nodes. Phases receive the
launcher, never the dispatcher.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from burnin.facts import Facts

if TYPE_CHECKING:
    from burnin.launch.base import Launcher, Preset
    from burnin.launch.log import CommandLog
    from burnin.topology.model import Topology


class Dispatcher(Protocol):
    """Which nodes a run covers, how their facts are gathered, and how phases reach them."""

    nodes: list[str]
    topology_by_node: dict[str, str]

    def gather(self, *, sources: str, timeout: float, on_done: Callable[[str], None] | None = None
               ) -> dict[str, Facts]: ...

    def launcher(self, facts: Mapping[str, Facts], *, log: CommandLog | None = None) -> Launcher:
        """The launcher for the phases and the soak, given the facts this dispatcher gathered; its commands go to
        ``log`` (None: the dispatcher's own log, where it keeps one)."""

    def close(self) -> None: ...


@dataclass(frozen=True)
class DispatchContext:
    """What ``burnin run`` knows when it opens a dispatcher: the node type, the output folder, the suites."""

    topology: Topology
    topology_ref: str
    out_dir: Path
    suites: tuple[str, ...] = ("node",)
    state_dir: Path | None = None
    """Where a dispatcher keeps what its nodes are made of across runs (``burnin soak --resume``:
    the simulated rack); None: a scratch of its own, removed on close."""


def left_on_nodes(dispatcher: Dispatcher) -> dict[str, list[str]]:
    """After :meth:`Dispatcher.close`: the files its jobs shipped to nodes and could not remove (their allocation
    ended first: cancelled, preempted, timed out), node -> paths. A dispatcher that ships files says so with a
    ``left_on_nodes()`` method of its own (Slurm's); the others ship none (SSH streams the collector through
    stdin, the simulator runs here), and a site's own dispatcher without one is taken at its word."""
    said = getattr(dispatcher, "left_on_nodes", None)
    left: dict[str, list[str]] = said() if callable(said) else {}
    return left


def hold_ended(dispatcher: Dispatcher) -> dict[str, str]:
    """The nodes not measured because the hold on them ended under the run (a Slurm allocation cancelled,
    preempted, timed out before their collector answered), with why: their incomplete verdicts are not their
    doing, so no gate acts on them. A dispatcher that holds nodes says so with a ``hold_ended()`` method of its
    own (Slurm's); empty for the others."""
    said = getattr(dispatcher, "hold_ended", None)
    ended: dict[str, str] = said() if callable(said) else {}
    return ended


@dataclass(frozen=True, slots=True)
class PhaseEnded:
    """Why a phase's hold on a node ended under its steps (``job 7 CANCELLED during the fabric phase``), and the
    facts sections it was to fill there (:attr:`burnin.launch.base.Hold.measures`): the checks that read them
    went unmeasured."""

    why: str
    measures: frozenset[str]


def phase_ended(dispatcher: Dispatcher) -> dict[str, PhaseEnded]:
    """The nodes of a phase's hold (the fabric, storage or Megatron suite's Slurm allocation) that ended under its
    steps: the checks of what that phase measures on them were not measured, and that is not their doing; what
    the gather and the other phases measured stands. A dispatcher whose phases hold nodes says so with a
    ``phase_ended()`` method of its own (Slurm's); empty for the others."""
    said = getattr(dispatcher, "phase_ended", None)
    ended: dict[str, PhaseEnded] = said() if callable(said) else {}
    return ended


def preset_from_facts(facts: Mapping[str, Facts]) -> Preset:
    """``simulated`` when every reachable node's collector ran as a simulated node.

    The collector reads sysfs below the root the simulator sets for a node
    (:mod:`burnin.collector.node_env`) and reports it as ``root``; a real node reports ``/``.
    """
    reachable = [f for f in facts.values() if not f.unreachable]
    simulated = bool(reachable) and all(str(f.data.get("root", "/")) != "/" for f in reachable)
    return "simulated" if simulated else "production"


def simulated_time_of(dispatcher: object, duration_s: float) -> Callable[[float], None] | None:
    """The hook of a dispatcher whose nodes live on a simulated clock, else None.

    Such a dispatcher offers ``simulated_time(duration_s)``: a function a simulated
    clock calls with each new time (seconds since the start of a run lasting
    ``duration_s``), which brings its nodes to that time. ``burnin soak`` runs on
    that clock when it is offered, on the wall clock otherwise.
    """
    offer = getattr(dispatcher, "simulated_time", None)
    if not callable(offer):
        return None
    hook: Callable[[float], None] = offer(duration_s)
    return hook
