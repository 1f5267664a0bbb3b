"""Helpers for the sim-slurm tier: the cluster handle tests get from the ``slurm_lab`` fixture."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from burnin.gate.slurm import SlurmNode, read_nodes
from burnin.transport.slurm import SlurmClient

NODES = ["sim01", "sim02", "sim03", "sim04"]
HEALTH_INTERVAL = 10
"""slurmd's HealthCheckInterval: a one-shot `burnin probe --drain` on each node this often, all the lab's life (every
5 s, the four nodes' probes were a sixth of a core)."""
WAIT_S = 120.0  # bound on waiting for Slurm or the health check (a failure limit, never a measurement)
BURNIN = [str(Path(sys.executable).parent / "burnin")]
if not Path(BURNIN[0]).exists():
    BURNIN = [sys.executable, "-m", "burnin.cli.main"]


@dataclass
class SlurmLab:
    state: Path
    env: dict[str, str]
    client: SlurmClient

    def nodes(self) -> dict[str, SlurmNode]:
        found, error = read_nodes(NODES, client=self.client)
        assert error is None, error
        return found

    def scontrol(self, *args: str) -> None:
        result = self.client.run(["scontrol", *args])
        assert result.ok, result.describe_failure()

    def burnin(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*BURNIN, *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout, check=False)

    def fault(self, node: str, fault: str) -> None:
        """Change a running node, as `burnin sim fault` does (in-process: faster)."""
        from burnin_lab.common import inject_fault

        inject_fault(self.state, node, fault)

    def run(self, out: Path, *args: str, nodes: str = "sim[01-04]",
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """`burnin run --via slurm --nodes NODES --out OUT ARGS...`."""
        return self.burnin("run", "--via", "slurm", "--nodes", nodes, "--out", str(out), *args,
                           timeout=timeout)

    def wait_for(self, what: str, predicate: Callable[[dict[str, SlurmNode]], bool],
                 timeout: float = WAIT_S) -> float:
        """Poll node states every 0.1 s; seconds it took (fails with the last states)."""
        started = time.monotonic()
        current: dict[str, SlurmNode] = {}
        while time.monotonic() - started < timeout:
            current = self.nodes()
            if predicate(current):
                return time.monotonic() - started
            time.sleep(0.1)
        pytest.fail(f"not {what} within {timeout:g} s: "
                    f"{ {n: (s.state, s.reason) for n, s in current.items()} }")

    def wait_probes_done(self, nodes: list[str]) -> None:
        """Until the health check running on each of ``nodes`` (if any) has ended, and acted.

        Probes of a node run one at a time, each holding the node's lock (burnin_lab.slurm.probe_lock):
        once the lock is taken here, every probe begun before has ended (its drain, if any, is in
        Slurm), and the ones after read the node as it is now.
        """
        from burnin_lab.slurm import probe_lock

        for node in nodes:
            done = subprocess.run(["flock", "-w", f"{WAIT_S:g}", str(probe_lock(self.state, node)), "true"],
                                  capture_output=True, text=True, timeout=WAIT_S + 30, check=False)
            assert done.returncode == 0, f"{node}'s health check still running after {WAIT_S:g} s: {done.stderr}"

    def reset(self) -> None:
        """Every node healthy, resumed and idle."""
        from burnin.sim import SimNode

        faulted = [n for n in NODES if SimNode.load(self.state / "nodes" / n).faults]
        for node in faulted:
            self.fault(node, "clear")
        # A probe that read a node's state before the clear may still drain it: let it finish first.
        self.wait_probes_done(faulted)
        self.resume_all()
        self.wait_for("idle", lambda nodes: all(s.state == "IDLE" for s in nodes.values()))

    def resume_all(self) -> None:
        """Resume every drained or down node; Slurm refuses while a node is not responding
        (IDLE+DRAIN+NOT_RESPONDING, as just after the cluster started), so until it takes."""
        deadline = time.monotonic() + WAIT_S
        while drained := [n for n, s in self.nodes().items() if s.drained or "DOWN" in s.flags]:
            result = self.client.run(["scontrol", "update", f"NodeName={','.join(drained)}", "State=RESUME"])
            if result.ok:
                return
            if time.monotonic() > deadline:
                pytest.fail(f"could not resume {drained} within {WAIT_S:g} s: {result.describe_failure()}")
            time.sleep(0.5)
