"""The soak's checkpoint in its output folder, and ``--resume``.

``OUT/soak-state.json`` (written atomically after every sample round and
every stage) holds the soak's position (simulated or real time, the next
stage, each node's status, attempt, events and baseline) and how many lines
of the two logs count. Samples and stage records are appended, one JSON
line each (with their node), to ``OUT/samples.jsonl`` and
``OUT/results.jsonl`` and flushed to disk *before* the state that counts them
is written; a resumed soak keeps exactly the counted lines (a kill between
the two leaves lines the state does not count, which are dropped).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from burnin.atomic import write_text_atomic
from burnin.errors import UsageError
from burnin.soak.monitor import Event
from burnin.soak.results import ChunkRecord
from burnin.soak.signals import NodeSample

STATE_FILE = "soak-state.json"
SAMPLES_LOG = "samples.jsonl"
RESULTS_LOG = "results.jsonl"
VERSION = 2

RUNNING, DONE, FAILED = "running", "done", "failed"


@dataclass
class NodeProgress:
    name: str
    status: str = RUNNING
    start_t: float = 0.0  # when this attempt's clock started (soak seconds)
    attempt: int = 0
    end_t: float | None = None  # when it finished or failed
    events: list[Event] = field(default_factory=list)  # fatal ones and notes, in order
    restarts: list[str] = field(default_factory=list)  # why its clock restarted, with the time
    samples: int = 0  # its samples so far
    results: int = 0  # its stage records so far
    seen: list[str] = field(default_factory=list)  # kernel-log lines already judged
    baseline: NodeSample | None = None  # this attempt's first readable sample
    last_ok_t: float | None = None  # the last readable sample
    boot_id: str | None = None
    disks: list[str] | None = None

    @property
    def fatal(self) -> list[Event]:
        return [e for e in self.events if e.fatal]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "start_t": self.start_t, "attempt": self.attempt,
                "end_t": self.end_t, "events": [e.to_json() for e in self.events], "restarts": self.restarts,
                "samples": self.samples, "results": self.results, "seen": self.seen,
                "baseline": self.baseline.to_json() if self.baseline else None, "last_ok_t": self.last_ok_t,
                "boot_id": self.boot_id, "disks": self.disks}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> NodeProgress:
        return cls(name=data["name"], status=data["status"], start_t=float(data["start_t"]),
                   attempt=int(data["attempt"]), end_t=data.get("end_t"),
                   events=[Event.from_json(e) for e in data.get("events", [])], restarts=list(data.get("restarts", [])),
                   samples=int(data.get("samples", 0)), results=int(data.get("results", 0)),
                   seen=list(data.get("seen", [])),
                   baseline=NodeSample.from_json(data["baseline"]) if data.get("baseline") else None,
                   last_ok_t=data.get("last_ok_t"), boot_id=data.get("boot_id"), disks=data.get("disks"))


@dataclass
class SoakState:
    command: dict[str, Any]  # what `--resume` needs to rebuild the soak (nodes, faults, settings file, ...)
    duration_s: float
    interval_s: float
    nodes: dict[str, NodeProgress]
    now: float = 0.0
    next_sample: float = 0.0
    rotation: int = 0  # the next stage to run, counting from the first stress stage
    dcgm_done: bool = False
    finished: bool = False
    saved_wall: float = 0.0  # time.time() at the last save (a resumed real soak measures its gap with it)
    run_id: str = ""
    running: dict[str, Any] | None = None  # the stage in progress: stage, seconds, start, due, nodes
    logged: dict[str, int] = field(default_factory=dict)  # lines of samples.jsonl / results.jsonl that count

    def to_json(self) -> dict[str, Any]:
        return {"version": VERSION, "run_id": self.run_id, "command": self.command, "duration_s": self.duration_s,
                "interval_s": self.interval_s, "now": self.now, "next_sample": self.next_sample,
                "rotation": self.rotation, "dcgm_done": self.dcgm_done, "finished": self.finished,
                "saved_wall": self.saved_wall, "running": self.running, "logged": self.logged,
                "nodes": {n: p.to_json() for n, p in self.nodes.items()}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SoakState:
        if data.get("version") != VERSION:
            raise UsageError(f"{STATE_FILE} is version {data.get('version')!r}: this burnin resumes version "
                             f"{VERSION} only")
        return cls(command=dict(data["command"]), duration_s=float(data["duration_s"]),
                   interval_s=float(data["interval_s"]),
                   nodes={n: NodeProgress.from_json(p) for n, p in data["nodes"].items()},
                   now=float(data["now"]), next_sample=float(data["next_sample"]), rotation=int(data["rotation"]),
                   dcgm_done=bool(data["dcgm_done"]), finished=bool(data["finished"]),
                   saved_wall=float(data.get("saved_wall", 0.0)), run_id=str(data.get("run_id", "")),
                   running=data.get("running"), logged={k: int(v) for k, v in data.get("logged", {}).items()})


class Store:
    """The output folder: the state file and the two logs."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir

    @property
    def state_file(self) -> Path:
        return self.out_dir / STATE_FILE

    def save(self, state: SoakState) -> None:
        state.saved_wall = time.time()
        write_text_atomic(self.state_file, json.dumps(state.to_json(), separators=(",", ":")) + "\n")

    def load(self) -> SoakState:
        if not self.state_file.is_file():
            raise UsageError(f"--resume {self.out_dir}: no {STATE_FILE} there (not a soak's output folder)")
        try:
            return SoakState.from_json(json.loads(self.state_file.read_text(encoding="utf-8")))
        except (ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"--resume {self.out_dir}: {STATE_FILE} unreadable ({exc})") from None

    def append(self, state: SoakState, log: str, records: Iterable[dict[str, Any]]) -> int:
        """Append records to a log and flush them to disk; the state counts them from now on."""
        lines = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records)
        if not lines:
            return 0
        self.out_dir.mkdir(parents=True, exist_ok=True)
        with (self.out_dir / log).open("a", encoding="utf-8") as handle:
            handle.write(lines)
            handle.flush()
            os.fsync(handle.fileno())
        count = lines.count("\n")
        state.logged[log] = state.logged.get(log, 0) + count
        return count

    def read(self, state: SoakState, log: str) -> list[dict[str, Any]]:
        """The counted lines of a log; the file is cut back to them (a kill may have left more)."""
        keep = state.logged.get(log, 0)
        path = self.out_dir / log
        if not path.exists():
            if keep:
                raise UsageError(f"--resume: {path} is missing ({keep} records expected)")
            return []
        kept: list[dict[str, Any]] = []
        size = 0
        with path.open("rb") as handle:
            for raw in handle:
                if len(kept) == keep or not raw.endswith(b"\n"):
                    break
                kept.append(json.loads(raw))
                size += len(raw)
        if len(kept) < keep:
            raise UsageError(f"--resume: {path} holds {len(kept)} complete records, the state counts {keep}")
        with path.open("r+b") as handle:
            handle.truncate(size)
        return kept

    def samples(self, state: SoakState) -> dict[str, list[NodeSample]]:
        out: dict[str, list[NodeSample]] = {name: [] for name in state.nodes}
        for record in self.read(state, SAMPLES_LOG):
            out.setdefault(record["node"], []).append(NodeSample.from_json(record))
        return out

    def results(self, state: SoakState) -> dict[str, list[ChunkRecord]]:
        out: dict[str, list[ChunkRecord]] = {name: [] for name in state.nodes}
        for record in self.read(state, RESULTS_LOG):
            out.setdefault(record["node"], []).append(ChunkRecord.from_json(record))
        return out
