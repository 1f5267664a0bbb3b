"""``--dry-run``: a launcher that prints what it would start and starts nothing, not even an allocation.

Every caller declares what it will start when it holds its nodes (``plan``, see
:meth:`burnin.launch.base.Launcher.hold`). This launcher prints that plan the way the launcher it stands
for would start it (srun steps, ``[nodes] argv`` over a transport, mpirun from the first node) and refuses
the hold with its reason, so the caller records that reason for every node, as for any launcher that could
not hold its nodes: every check of the suite is then incomplete, saying the commands were printed.
Anything asked of it afterwards is not started either.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence

from burnin.launch.base import (
    Each,
    Hold,
    JobSpec,
    Launcher,
    NodeCommand,
    Note,
    PlanItem,
    Shown,
    SrunOptions,
    not_started,
)
from burnin.transport.base import CommandResult


def shown_line(where: str, argv: Sequence[str]) -> str:
    """``[nodes] argv`` (or the argv alone where burnin runs it) as a shell would take it."""
    return f"{where} {shlex.join(argv)}".strip()


class DryRunLauncher:
    """Stands for ``inner``: prints its plan, starts nothing; every result is a command not started (``reason``)."""

    def __init__(self, inner: Launcher, say: Callable[[str], None], reason: str) -> None:
        self.name = inner.name
        self.form = inner.form
        self.preset = inner.preset
        self._inner = inner
        self._say = say
        self.reason = reason

    def hold(self, nodes: Sequence[str], how: Hold, plan: Sequence[PlanItem] = ()) -> str | None:
        if not nodes:
            return None
        held = self._inner.describe_hold(nodes, how)
        if held is not None:
            self._say(f"# {held}")
        for item in plan:
            if isinstance(item, Note):
                self._say(f"# {item.text}")
                continue
            suffix = f" {item.note}" if isinstance(item, Each) and item.note else ""
            for where, argv in self._inner.describe(item):
                self._say(shown_line(where, argv) + suffix)
        return self.reason

    def describe(self, item: PlanItem) -> list[Shown]:
        return self._inner.describe(item)

    def describe_hold(self, nodes: Sequence[str], how: Hold) -> str | None:
        return self._inner.describe_hold(nodes, how)

    def release(self) -> None:
        """Nothing is held."""

    def ended(self) -> str | None:
        return None  # nothing is held

    def close(self) -> None:
        """Nothing was opened (the inner launcher is its dispatcher's)."""

    def note(self, text: str) -> None:
        """Nothing runs, so nothing happens between commands."""

    def per_node(self, commands: Sequence[NodeCommand], *, job: bool = False) -> dict[str, CommandResult]:
        return {c.node: not_started(c.node, c.argv, self.reason) for c in commands}

    def everywhere(self, nodes: Sequence[str], argv: Sequence[str], *, timeout_s: float,
                   srun: SrunOptions | None = None) -> dict[str, CommandResult]:
        return {node: not_started(node, argv, self.reason) for node in nodes}

    def job(self, spec: JobSpec) -> CommandResult:
        return not_started(spec.nodes[0], spec.program, self.reason)

    def collect(self, nodes: Sequence[str], args: Sequence[str], *, timeout_s: float,
                on_done: Callable[[str, CommandResult], None] | None = None) -> dict[str, CommandResult]:
        results = {node: not_started(node, ("collector", *args), self.reason) for node in nodes}
        if on_done is not None:
            for node, result in results.items():
                on_done(node, result)
        return results
