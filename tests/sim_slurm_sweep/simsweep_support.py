"""Helpers for the sweep's Slurm tier: the cluster handle, jobs of other users, waiting on Slurm's states."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from burnin.transport.slurm import SlurmClient
from burnin_lab.slurm import SWEEP_PARTITION

NODES = [f"sim{i:02d}" for i in range(1, 7)]
WAIT_S = 180.0  # bound on waiting for Slurm or the sweep (a failure limit, never a measurement)
BURNIN = [str(Path(sys.executable).parent / "burnin")]
if not Path(BURNIN[0]).exists():
    BURNIN = [sys.executable, "-m", "burnin.cli.main"]


@dataclass(frozen=True)
class QueuedJob:
    job_id: str
    name: str
    state: str
    nodes: str
    partition: str


@dataclass
class SweepLab:
    state: Path
    env: dict[str, str]
    client: SlurmClient
    most_sweep_jobs: int = 0
    """The most sweep jobs any :meth:`queue` call saw running at once."""
    shims: list[Path] = field(default_factory=list)

    def slurm(self, *argv: str) -> str:
        result = self.client.run(list(argv))
        assert result.ok, result.describe_failure()
        return result.stdout

    def queue(self) -> list[QueuedJob]:
        text = self.slurm("squeue", "--noheader", "--format=%i|%j|%T|%N|%P")
        jobs = [QueuedJob(*line.split("|")) for line in text.splitlines() if line.count("|") == 4]
        self.most_sweep_jobs = max(self.most_sweep_jobs, sum(
            1 for j in jobs if j.name.startswith("burnin-sweep") and j.state == "RUNNING"))
        return jobs

    def job_state(self, job_id: str) -> str:
        return next((j.state for j in self.queue() if j.job_id == job_id), "gone")

    def fault(self, node: str, fault: str) -> None:
        from burnin_lab.common import inject_fault

        inject_fault(self.state, node, fault)

    def sweep_jobs(self) -> list[QueuedJob]:
        return [j for j in self.queue() if j.name.startswith("burnin")]

    def submit(self, name: str, nodes: str, script: str, *, partition: str = "batch") -> str:
        """A job of another user of the cluster (an exclusive batch job on exactly ``nodes``)."""
        from burnin.nodes import expand

        out = self.slurm("sbatch", "--parsable", f"--partition={partition}", f"--nodelist={nodes}",
                         f"--nodes={len(expand(nodes))}", "--exclusive", f"--job-name={name}",
                         f"--output={self.state}/{name}-%j.out", f"--wrap={script}")
        return out.strip().split(";")[0]

    def wait_for(self, what: str, predicate: Callable[[], bool], timeout: float = WAIT_S) -> None:
        """Poll every 0.1 s until ``predicate()``; fail naming ``what`` and the queue."""
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                pytest.fail(f"not {what} within {timeout:g} s; queue: {self.queue()}")
            time.sleep(0.1)

    def sweep(self, out: Path, *args: str, partition: str = SWEEP_PARTITION,
              nodes: str = "sim[01-06]", state_dir: Path | None = None) -> subprocess.Popen[str]:
        """``burnin sweep --nodes sim[01-06] --partition sweep --out OUT ARGS...``, started (not waited for);
        ``state_dir``: burnin's state directory (the breaker's settings) for this sweep."""
        argv = [*BURNIN, "sweep", "--nodes", nodes, "--partition", partition, "--out", str(out),
                "--poll", "0.5", *args]
        env = {**self.env, "BURNIN_STATE_DIR": str(state_dir)} if state_dir is not None else self.env
        return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def node_python(self, node: str, script: str) -> None:
        """Replace the node's ``python3`` (what the collector runs under) with a shell script."""
        shim = self.state / "nodes" / node / "bin" / "python3"
        shim.write_text("#!/bin/sh\n" + script, encoding="utf-8")
        shim.chmod(0o755)
        self.shims.append(shim)

    def reset(self) -> None:
        """No job, no shim, no fault, every node resumed and idle."""
        from burnin.sim import SimNode
        from burnin_lab.common import inject_fault

        for shim in self.shims:
            shim.unlink(missing_ok=True)
        self.shims.clear()
        for job in self.queue():
            self.slurm("scancel", job.job_id)
        for node in NODES:
            if SimNode.load(self.state / "nodes" / node).faults:
                inject_fault(self.state, node, "clear")
        deadline = time.monotonic() + WAIT_S
        while True:
            states = dict(line.split() for line in self.slurm(
                "sinfo", "--noheader", "--Node", f"--partition={SWEEP_PARTITION}", "--format=%N %T").splitlines())
            if all(states.get(n) == "idle" for n in NODES) and not self.queue():
                return
            held = [n for n, s in states.items() if "drain" in s or "down" in s]
            if held:
                self.client.run(["scontrol", "update", f"NodeName={','.join(held)}", "State=RESUME"])
            if time.monotonic() > deadline:
                pytest.fail(f"cluster not idle within {WAIT_S:g} s: {states}")
            time.sleep(0.2)

    def node_reason(self, node: str) -> tuple[str, str]:
        line = self.slurm("scontrol", "--oneliner", "show", "node", node)
        state = line.split("State=", 1)[1].split()[0]
        reason = line.split("Reason=", 1)[1].rsplit(" [", 1)[0] if "Reason=" in line else ""
        return state, reason


def sweep_doc(out: Path) -> dict[str, dict[str, object]]:
    """``sweep.json``'s nodes (read whole: it is replaced atomically)."""
    path = out / "sweep.json"
    if not path.exists():
        return {}
    nodes: dict[str, dict[str, object]] = json.loads(path.read_text(encoding="utf-8"))["nodes"]
    return nodes


def status(out: Path, node: str) -> str:
    return str(sweep_doc(out).get(node, {}).get("status", ""))


def remove_shipped(out: Path) -> list[str]:
    """Remove what the sweep of ``out`` shipped to the nodes (every ``sbcast`` destination in its log): an
    interrupted sweep leaves the collector of the jobs it cancelled where it was, as it says. Returns the files
    that were still there and that ``sweep.json`` does not list in ``left_on_nodes``."""
    log = out / "slurm-commands.log"
    sweep = out / "sweep.json"
    listed = {path for paths in (json.loads(sweep.read_text(encoding="utf-8")).get("left_on_nodes", {}).values()
                                 if sweep.exists() else ()) for path in paths}
    unsaid = []
    for line in log.read_text(encoding="utf-8").splitlines() if log.exists() else ():
        if "$ sbcast " in line:
            path = Path(line.split()[-1])
            if path.exists() and str(path) not in listed:
                unsaid.append(str(path))
            path.unlink(missing_ok=True)
    return unsaid
