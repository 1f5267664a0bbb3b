"""The soak's checkpoint in its output folder, and ``--resume``.

``OUT/soak-state.json`` (written atomically after every sample round and
every stage) holds the soak's position (simulated or real time, the next
stage, each node's status, attempt, events and baseline) and how many lines
of the two logs count. Samples and stage records are appended, one JSON
line each (with their node), to ``OUT/samples.jsonl`` and
``OUT/results.jsonl`` and flushed to disk *before* the state that counts them
is written; a resumed soak keeps exactly the counted lines (a kill between
the two leaves lines the state does not count, which are dropped).

The checkpoint is verified before a soak goes on from it or is judged again
(:meth:`Store.load`): each node's entry carries a running digest of its lines
in each log and a seal (a digest of the entry itself), the whole state a seal
of its own, and the logs are recounted. A checkpoint that does not agree with
its logs (edited, truncated, a line changed) is refused with the node it
concerns, never judged: an edit cannot turn a node that failed into one that
passed.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from burnin.atomic import write_text_atomic
from burnin.errors import UsageError
from burnin.soak.monitor import Event
from burnin.soak.plan import MAX_DURATION_S, hms
from burnin.soak.results import ChunkRecord
from burnin.soak.signals import NodeSample

STATE_FILE = "soak-state.json"
SAMPLES_LOG = "samples.jsonl"
RESULTS_LOG = "results.jsonl"
VERSION = 3
LOGS = (SAMPLES_LOG, RESULTS_LOG)

RUNNING, DONE, FAILED, HELD = "running", "done", "failed", "held"
STATUSES = (RUNNING, DONE, FAILED, HELD)  # held: not soaked, acceptance rejected it (``held`` says why)


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
    held: str = ""  # why the node is not soaked (status held)
    digests: dict[str, str] = field(default_factory=dict)  # log -> running digest of this node's lines in it

    @property
    def fatal(self) -> list[Event]:
        return [e for e in self.events if e.fatal]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "start_t": self.start_t, "attempt": self.attempt,
                "end_t": self.end_t, "events": [e.to_json() for e in self.events], "restarts": self.restarts,
                "samples": self.samples, "results": self.results, "seen": self.seen,
                "baseline": self.baseline.to_json() if self.baseline else None, "last_ok_t": self.last_ok_t,
                "boot_id": self.boot_id, "disks": self.disks, "held": self.held, "digests": self.digests}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> NodeProgress:
        if data.get("status") not in STATUSES:
            raise ValueError(f"status {data.get('status')!r} (expected one of {', '.join(STATUSES)})")
        return cls(name=str(data["name"]), status=data["status"], start_t=_number(data, "start_t"),
                   attempt=int(data["attempt"]), end_t=_number(data, "end_t", optional=True),
                   events=[Event.from_json(e) for e in data.get("events", [])], restarts=list(data.get("restarts", [])),
                   samples=int(data.get("samples", 0)), results=int(data.get("results", 0)),
                   seen=list(data.get("seen", [])),
                   baseline=NodeSample.from_json(data["baseline"]) if data.get("baseline") else None,
                   last_ok_t=_number(data, "last_ok_t", optional=True), boot_id=data.get("boot_id"),
                   disks=data.get("disks"), held=str(data.get("held", "")),
                   digests={str(k): str(v) for k, v in dict(data.get("digests", {})).items()})


def _number(data: Mapping[str, Any], key: str, *, optional: bool = False) -> Any:
    """A finite number from the checkpoint (None where ``optional``); ValueError naming the key otherwise."""
    value = data.get(key) if optional else data[key]
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{key} is {value!r}, not a finite number")
    return float(value)


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
    acceptance: str | None = None  # digest of acceptance/verdicts.json: the node suite run before the soak

    def to_json(self) -> dict[str, Any]:
        return {"version": VERSION, "run_id": self.run_id, "command": self.command, "duration_s": self.duration_s,
                "interval_s": self.interval_s, "now": self.now, "next_sample": self.next_sample,
                "rotation": self.rotation, "dcgm_done": self.dcgm_done, "finished": self.finished,
                "saved_wall": self.saved_wall, "running": self.running, "logged": self.logged,
                "acceptance": self.acceptance, "nodes": {n: p.to_json() for n, p in self.nodes.items()}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SoakState:
        if data.get("version") != VERSION:
            raise UsageError(f"{STATE_FILE} is version {data.get('version')!r}: this burnin resumes version "
                             f"{VERSION} only")
        duration = _number(data, "duration_s")
        if not 0 < duration <= MAX_DURATION_S:
            raise ValueError(f"duration_s {duration!r} is outside 0 to {MAX_DURATION_S:g} s")
        interval = _number(data, "interval_s")
        if interval <= 0:
            raise ValueError(f"interval_s {interval!r} is not above 0")
        nodes = data["nodes"]
        if not isinstance(nodes, dict) or not all(isinstance(p, dict) for p in nodes.values()):
            raise ValueError("nodes is not a table of nodes")
        return cls(command=dict(data["command"]), duration_s=duration, interval_s=interval,
                   nodes={str(n): NodeProgress.from_json(p) for n, p in nodes.items()},
                   now=_number(data, "now"), next_sample=_number(data, "next_sample"), rotation=int(data["rotation"]),
                   dcgm_done=bool(data["dcgm_done"]), finished=bool(data["finished"]),
                   saved_wall=float(data.get("saved_wall", 0.0)), run_id=str(data.get("run_id", "")),
                   running=data.get("running"),
                   logged={str(k): int(v) for k, v in dict(data.get("logged", {})).items()},
                   acceptance=None if data.get("acceptance") is None else str(data["acceptance"]))


def _digest(doc: Any) -> str:
    return hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()


def _chain(digest: str, line: bytes) -> str:
    """The running digest of a node's lines in a log, one more line on."""
    return hashlib.sha256(digest.encode("ascii") + line).hexdigest()


def _sealed(doc: dict[str, Any]) -> dict[str, Any]:
    """The state document with a seal on each node's entry and one on the whole."""
    nodes = {name: {**entry, "seal": _digest(entry)} for name, entry in doc["nodes"].items()}
    whole = {**doc, "nodes": nodes}
    return {**whole, "seal": _digest(whole)}


def _unsealed(doc: dict[str, Any]) -> str | None:
    """What of a loaded document its seals do not vouch for (a node's entry, or the rest), else None."""
    nodes = doc.get("nodes")
    if isinstance(nodes, dict):
        for name, entry in nodes.items():
            if not isinstance(entry, dict) or entry.get("seal") != _digest(
                    {k: v for k, v in entry.items() if k != "seal"}):
                return f"node {name}'s entry"
    if doc.get("seal") != _digest({k: v for k, v in doc.items() if k != "seal"}):
        return "its totals and settings" if isinstance(nodes, dict) else "its node table"
    return None


class Store:
    """The output folder: the state file and the two logs."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir

    @property
    def state_file(self) -> Path:
        return self.out_dir / STATE_FILE

    def save(self, state: SoakState) -> None:
        state.saved_wall = time.time()
        write_text_atomic(self.state_file, json.dumps(_sealed(state.to_json()), separators=(",", ":")) + "\n")

    def load(self) -> SoakState:
        """The checkpoint, verified against its logs (:meth:`verify`); UsageError (exit 2) naming what is wrong."""
        where = f"--resume {self.out_dir}: {STATE_FILE}"
        if not self.state_file.is_file():
            raise UsageError(f"--resume {self.out_dir}: no {STATE_FILE} there (not a soak's output folder)")
        try:
            doc = json.loads(self.state_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UsageError(f"{where} unreadable ({exc})") from None
        if not isinstance(doc, dict):
            raise UsageError(f"{where} is not a soak checkpoint (a JSON {type(doc).__name__}, not an object)")
        if doc.get("version") == VERSION and (unsealed := _unsealed(doc)) is not None:
            raise UsageError(f"{where} does not match what the soak wrote ({unsealed} was changed): refused")
        try:
            state = SoakState.from_json(doc)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise UsageError(f"{where} unreadable ({exc})") from None
        self.verify(state)
        return state

    def verify(self, state: SoakState) -> None:
        """The state agrees with its logs: each node's lines recounted and digested as the state counts them,
        and what its status claims shown by its samples; UsageError naming the node otherwise."""
        where = f"--resume {self.out_dir}: {STATE_FILE}"
        lines: dict[str, dict[str, list[dict[str, Any]]]] = {name: {log: [] for log in LOGS} for name in state.nodes}
        digests: dict[str, dict[str, str]] = {name: {} for name in state.nodes}
        for log in LOGS:
            for raw, record in self._counted(state, log):
                node = record.get("node")
                if node not in state.nodes:
                    raise UsageError(f"{where} does not match {log}: it holds records of {node!r}, "
                                     "a node the soak does not have")
                lines[str(node)][log].append(record)
                digests[str(node)][log] = _chain(digests[str(node)].get(log, ""), raw)
        for name, progress in state.nodes.items():
            samples, results = lines[name][SAMPLES_LOG], lines[name][RESULTS_LOG]
            why = _disagreement(state, progress, samples, results, digests[name])
            if why:
                raise UsageError(f"{where} does not match {SAMPLES_LOG}/{RESULTS_LOG} for node {name}: {why}")

    def append(self, state: SoakState, log: str, records: Iterable[dict[str, Any]]) -> int:
        """Append records to a log and flush them to disk; the state counts (and digests) them from now on."""
        records = list(records)
        rows = [json.dumps(r, separators=(",", ":")) + "\n" for r in records]
        lines = "".join(rows)
        if not lines:
            return 0
        self.out_dir.mkdir(parents=True, exist_ok=True)
        with (self.out_dir / log).open("a", encoding="utf-8") as handle:
            handle.write(lines)
            handle.flush()
            os.fsync(handle.fileno())
        for record, row in zip(records, rows, strict=True):
            progress = state.nodes.get(str(record.get("node")))
            if progress is not None:
                progress.digests[log] = _chain(progress.digests.get(log, ""), row.encode("utf-8"))
        count = lines.count("\n")
        state.logged[log] = state.logged.get(log, 0) + count
        return count

    def read(self, state: SoakState, log: str) -> list[dict[str, Any]]:
        """The counted lines of a log; the file is cut back to them (a kill may have left more)."""
        return [record for _, record in self._counted(state, log)]

    def _counted(self, state: SoakState, log: str) -> list[tuple[bytes, dict[str, Any]]]:
        """The counted lines of a log, as written and as read; the file is cut back to them."""
        keep = state.logged.get(log, 0)
        path = self.out_dir / log
        if not path.exists():
            if keep:
                raise UsageError(f"--resume: {path} is missing ({keep} records expected)")
            return []
        kept: list[tuple[bytes, dict[str, Any]]] = []
        size = 0
        with path.open("rb") as handle:
            for raw in handle:
                if len(kept) == keep or not raw.endswith(b"\n"):
                    break
                kept.append((raw, _record(raw, path, len(kept) + 1)))
                size += len(raw)
        if len(kept) < keep:
            raise UsageError(f"--resume: {path} holds {len(kept)} complete records, the state counts {keep}")
        with path.open("r+b") as handle:
            handle.truncate(size)
        return kept

    def samples(self, state: SoakState) -> dict[str, list[NodeSample]]:
        out: dict[str, list[NodeSample]] = {name: [] for name in state.nodes}
        for number, record in enumerate(self.read(state, SAMPLES_LOG), start=1):
            out.setdefault(record["node"], []).append(_parsed(NodeSample.from_json, record, SAMPLES_LOG, number))
        return out

    def results(self, state: SoakState) -> dict[str, list[ChunkRecord]]:
        out: dict[str, list[ChunkRecord]] = {name: [] for name in state.nodes}
        for number, record in enumerate(self.read(state, RESULTS_LOG), start=1):
            out.setdefault(record["node"], []).append(_parsed(ChunkRecord.from_json, record, RESULTS_LOG, number))
        return out


def _record(raw: bytes, path: Path, number: int) -> dict[str, Any]:
    """One line of a log as a record with its node; UsageError naming the file and line otherwise."""
    try:
        record = json.loads(raw)
    except ValueError as exc:
        raise UsageError(f"--resume: {path} line {number} is not a JSON record ({exc})") from None
    if not isinstance(record, dict) or not isinstance(record.get("node"), str):
        raise UsageError(f"--resume: {path} line {number} is not a record of a node")
    return record


def _parsed(read: Any, record: dict[str, Any], log: str, number: int) -> Any:
    try:
        return read(record)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UsageError(f"--resume: {log} line {number} does not read as a record ({type(exc).__name__}: "
                         f"{exc})") from None


def _disagreement(state: SoakState, progress: NodeProgress, samples: list[dict[str, Any]],
                  results: list[dict[str, Any]], digests: Mapping[str, str]) -> str:
    """Why a node's entry does not agree with its lines in the logs ("" when it does)."""
    for log, count, counted in ((SAMPLES_LOG, len(samples), progress.samples),
                                (RESULTS_LOG, len(results), progress.results)):
        if count != counted:
            return f"{log} holds {count} records of it, the state counts {counted}"
        if digests.get(log, "") != progress.digests.get(log, ""):
            return f"its records in {log} are not the ones the soak wrote"
    if progress.status == FAILED and not progress.fatal:
        return "it is marked failed without the event that failed it"
    if progress.status == HELD and samples:
        return "it is marked held back by acceptance, yet it was sampled"
    end = progress.end_t if progress.end_t is not None else state.now
    if progress.status == DONE and end - progress.start_t + 1e-6 >= state.duration_s:
        due = progress.start_t + state.duration_s - 1e-6
        last = max((float(r.get("t", -1.0)) for r in samples if r.get("attempt") == progress.attempt), default=None)
        if last is None or last < due:
            seen = f"its last sample is at +{hms(last)}" if last is not None else "it has no sample"
            return f"it is marked done after a whole soak (to +{hms(end)}), but {seen}"
    return ""
