"""The transport seam: run an argv on a node, get a :class:`CommandResult` back."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class CommandResult:
    """What one command did on one node.

    ``exit_status`` is None when the command never finished (timeout) or never
    started (connect failure); ``error`` then says why in one line.
    """

    node: str
    argv: tuple[str, ...]
    exit_status: int | None
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.exit_status == 0 and self.error is None

    def tail(self, lines: int = 5) -> str:
        """The last lines of stderr (or stdout), for reasons and reports."""
        text = self.stderr.strip() or self.stdout.strip()
        return "\n".join(text.splitlines()[-lines:])

    def describe_failure(self) -> str:
        """One line saying why this command did not succeed."""
        if self.error:
            return self.error
        if self.timed_out:
            return f"{self.argv[0]} timed out after {self.duration_s:.1f} s"
        tail = self.tail(1)
        if self.exit_status is not None and self.exit_status < 0:
            import signal

            try:
                name = signal.Signals(-self.exit_status).name
            except ValueError:
                name = f"signal {-self.exit_status}"
            return f"{self.argv[0]} was killed by {name}" + (f": {tail}" if tail else "")
        return f"{self.argv[0]} exited {self.exit_status}" + (f": {tail}" if tail else "")


class Transport(Protocol):
    """Runs commands on nodes. Implementations: local (incl. simulated nodes), ssh, slurm."""

    name: str

    def run(
        self,
        node: str,
        argv: Sequence[str],
        *,
        timeout: float,
        stdin: bytes | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult: ...

    def close(self) -> None: ...
