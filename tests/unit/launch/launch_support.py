"""A fake Slurm client for the Slurm launcher's unit tests (the real daemons run in tests/sim_slurm*)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from burnin.nodes import expand
from burnin.transport.base import CommandResult
from burnin.transport.slurm import CONTROLLER


def node_line(name: str, state: str = "IDLE", reason: str = "") -> str:
    why = f" Reason={reason} [root@2024-01-01T00:00:00]" if reason else ""
    return f"NodeName={name} Arch=x86_64 CPUTot=64 State={state} ThreadsPerCore=1{why}"


STATES = "\n".join([node_line("n1"), node_line("n2"), node_line("n3", "IDLE+DRAIN", "bad dimm")])


class FakeSlurm:
    """Slurm's client commands, answered; every argv kept in order."""

    def __init__(self, nodes: str = STATES, *, salloc: bool = True, sample_ok: bool = True,
                 sbcast_ok: bool = True) -> None:
        self.nodes = nodes
        self.salloc = salloc
        self.sample_ok = sample_ok
        self.sbcast_ok = sbcast_ok
        self.calls: list[list[str]] = []
        self.timeouts: list[float] = []

    def run(self, argv: Sequence[str], *, timeout: float = 10.0) -> CommandResult:
        argv = list(argv)
        self.calls.append(argv)
        self.timeouts.append(timeout)
        tool = argv[0]
        if tool == "scontrol":
            return self._ok(argv, stdout=self.nodes)
        if tool == "salloc":
            if not self.salloc:
                return CommandResult(CONTROLLER, tuple(argv), 1, "", "salloc: error: Invalid partition", 0.1)
            return self._ok(argv, stderr="salloc: Granted job allocation 42\n")
        if tool == "sbcast" and not self.sbcast_ok:
            return CommandResult(CONTROLLER, tuple(argv), 1, "", "sbcast: error: No space left on device", 0.1)
        if tool == "srun":
            listed = expand(next(a for a in argv if a.startswith("--nodelist=")).split("=", 1)[1])
            if "--label" in argv:  # a labelled step: every task frames its output with its node and exit
                if not self.sample_ok and len(listed) > 1:
                    return CommandResult(CONTROLLER, tuple(argv), 1, "", "srun: error: Unable to create step", 0.1)
                body = json.dumps({"sources": {}, "from": "{node}"})
                out = "".join(f"{k}: @burnin-node {n}@\n{k}: " + body.replace("{node}", n)
                              + f"\n{k}: @burnin-exit 0@\n" for k, n in enumerate(listed))
                return self._ok(argv, stdout=out)
            return self._ok(argv, stdout=f"ran on {listed[0]}\n")
        return self._ok(argv)

    @staticmethod
    def _ok(argv: list[str], *, stdout: str = "", stderr: str = "") -> CommandResult:
        return CommandResult(CONTROLLER, tuple(argv), 0, stdout, stderr, 0.1)

    def tools(self) -> list[str]:
        return [c[0] if c[0] != "srun" else ("srun-labelled" if "--label" in c else "srun") for c in self.calls]
