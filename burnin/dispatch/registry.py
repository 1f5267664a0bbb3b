"""Dispatchers found by ``--via NAME`` (``--sim N`` is the simulated one).

Each registered module offers:

- ``USAGE``: how a user selects it, for the "no nodes" message;
- ``add_arguments(group)``: its own options (read on every ``burnin run``: keep the
  module's heavy imports inside its functions);
- ``open_dispatcher(args, context) -> Dispatcher``: the dispatcher for the parsed
  options (:class:`burnin.dispatch.base.DispatchContext` carries the node type,
  the output folder and the suites);
- optionally ``implied(args) -> bool``: its options select it without ``--via``;
- optionally ``refuse_unused(args)``: a UsageError when its options are given to
  another dispatcher's run.

Adding a dispatcher is that module plus one line in :data:`DISPATCHERS`
(docs/architecture.md).
"""

from __future__ import annotations

import argparse
import importlib
from types import ModuleType
from typing import TYPE_CHECKING

from burnin.errors import UsageError

if TYPE_CHECKING:
    from burnin.dispatch.base import DispatchContext, Dispatcher

# --via name -> module
DISPATCHERS: dict[str, str] = {
    "sim": "burnin.dispatch.sim",
    "ssh": "burnin.dispatch.ssh",
    "slurm": "burnin.dispatch.slurm",
}


def _module(name: str) -> ModuleType:
    return importlib.import_module(DISPATCHERS[name])


def add_arguments(group: argparse._ArgumentGroup) -> None:
    """``--via`` and every registered dispatcher's own options."""
    group.add_argument("--via", choices=tuple(DISPATCHERS), default=None,
                       help="how to reach the nodes: " + ", ".join(DISPATCHERS))
    for name in DISPATCHERS:
        _module(name).add_arguments(group)


def selected(args: argparse.Namespace) -> str | None:
    """The dispatcher ``--via`` names, else the one whose options imply it (``--sim``)."""
    via: str | None = getattr(args, "via", None)
    if via is not None:
        return via
    implied = [name for name in DISPATCHERS if getattr(_module(name), "implied", lambda a: False)(args)]
    return implied[0] if implied else None


def choose(args: argparse.Namespace) -> str:
    """The selected dispatcher's name; a UsageError when none is, or another one's options are given."""
    name = selected(args)
    for other in DISPATCHERS:
        if other != name:
            refuse = getattr(_module(other), "refuse_unused", None)
            if refuse is not None:
                refuse(args)
    if name is None:
        ways = "; ".join(str(getattr(_module(n), "USAGE", f"--via {n}")) for n in DISPATCHERS)
        raise UsageError(f"no nodes: pass {ways}")
    return name


def open_dispatcher(args: argparse.Namespace, context: DispatchContext) -> Dispatcher:
    """The selected dispatcher, opened for the parsed options; a UsageError before any node is touched."""
    dispatcher: Dispatcher = _module(choose(args)).open_dispatcher(args, context)
    return dispatcher
