"""The handle the sim-slurm-watch tests get: jobs, node states, faults and the watch journals."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from burnin.gate.slurm import SlurmNode, read_nodes
from burnin.nodes import expand
from burnin.transport.slurm import SlurmClient

NODES = ["sim01", "sim02", "sim03", "sim04"]
WAIT_S = 120.0  # bound on waiting for Slurm (a failure limit, never a measurement)
T = TypeVar("T")
_FIELD = re.compile(r"(\w+)=(\S*)")


@dataclass(frozen=True)
class Job:
    id: str
    state: str
    nodes: tuple[str, ...]
    restarts: int


@dataclass
class WatchLab:
    state: Path
    client: SlurmClient

    def slurm(self, *argv: str) -> str:
        result = self.client.run(list(argv))
        assert result.ok, result.describe_failure()
        return result.stdout

    def nodes(self) -> dict[str, SlurmNode]:
        found, error = read_nodes(NODES, client=self.client)
        assert error is None, error
        return found

    def submit(self, *args: str) -> str:
        out = self.state / "jobs"
        out.mkdir(exist_ok=True)
        return self.slurm("sbatch", "--parsable", f"--output={out}/job-%j.out", *args).strip().split(";")[0]

    def job(self, job_id: str) -> Job:
        fields = dict(_FIELD.findall(self.slurm("scontrol", "--oneliner", "show", "job", job_id)))
        node_list = fields.get("NodeList", "")
        nodes = tuple(expand(node_list)) if node_list and node_list != "(null)" else ()
        return Job(job_id, fields.get("JobState", "?"), nodes, int(fields.get("Restarts", "0")))

    def fault(self, node: str, fault: str) -> None:
        from burnin_lab.common import inject_fault

        inject_fault(self.state, node, fault)

    def journal(self, node: str) -> list[dict[str, Any]]:
        """The node's journal entries; a last line still being written is not one yet."""
        path = self.state / "slurm" / "watch" / node / "events.jsonl"
        text = path.read_text() if path.exists() else ""
        return [json.loads(line) for line in text[:text.rfind("\n") + 1].splitlines()]

    def watch_log(self, node: str) -> str:
        path = self.state / "slurm" / "log" / f"watch-{node}.log"
        return path.read_text() if path.exists() else ""

    def wait_listening(self, node: str) -> None:
        """Until the node's watch hears both of its sources: its NVML event set is registered (session 1 or a
        later one) and its kernel-log thread has looked for the node's log (none until a fault first writes it,
        read from its start from then on). The lab starts the watches without waiting for either: a fault
        injected before is heard by neither (NVML delivers no event from before its set, and a log already
        there at the first look is history, skipped)."""
        self.wait_for(f"{node}'s watch listening", lambda: all(
            mark in self.watch_log(node) for mark in (" (session ", "No such file")), timeout=WAIT_S)

    def wait_for(self, what: str, probe: Callable[[], T | None], timeout: float) -> T:
        deadline = time.monotonic() + timeout
        last: T | None = None
        while time.monotonic() < deadline:
            last = probe()
            if last:
                return last
            time.sleep(0.1)
        pytest.fail(f"not {what} within {timeout:g} s (last: {last!r}); nodes: "
                    f"{ {n: (s.state, s.reason) for n, s in self.nodes().items()} }")

    def reset(self) -> None:
        """No jobs, no faults, every node resumed and idle."""
        from burnin.sim import SimNode

        self.client.run(["scancel", "--user=root"])
        for node in NODES:
            if SimNode.load(self.state / "nodes" / node).faults:
                self.fault(node, "clear")
        # Slurm refuses to resume a node while it is not responding: until it takes.
        deadline = time.monotonic() + WAIT_S
        while drained := [n for n, s in self.nodes().items() if s.drained or "DOWN" in s.flags]:
            result = self.client.run(["scontrol", "update", f"NodeName={','.join(drained)}", "State=RESUME"])
            if result.ok:
                break
            if time.monotonic() > deadline:
                pytest.fail(f"could not resume {drained} within {WAIT_S:g} s: {result.describe_failure()}")
            time.sleep(0.5)
        self.wait_for("idle", lambda: all(s.state == "IDLE" for s in self.nodes().values()), timeout=WAIT_S)
