"""Reading past runs (``gate.json``, ``run.json``) and the watch's journal into observations.

A path is a run folder (it holds ``gate.json``), a ``gate.json`` itself, or a
folder of run folders (``reports/``). A run folder without ``gate.json`` (a run
interrupted before its verdicts) and a partial or interrupted run (its gate
admits nobody, so it says nothing about the nodes) are skipped with the reason.
A file that is not what it should be (unreadable, not JSON, not burnin's) is a
user mistake: :class:`burnin.errors.UsageError` naming the file.

Within files that are burnin's, one bad record is skipped with a warning naming
the file and the record, and the rest is read: a run whose time is impossible
(before 2000, or in the future: a clock set wrong), a journal line that is torn
(the watch stopped while writing it) or not an entry, an entry with an
impossible time. A node admitted although its checks failed is counted as the
rejection its checks say, and reported as inconsistent.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from burnin.errors import UsageError
from burnin.history.records import Inconsistent, Observation, Skipped, finite_time, impossible_time, parse_stamp
from burnin.runfiles import GATE_FILE
from burnin.text import printable

RUN_FILE = "run.json"
JOURNAL_FILE = "events.jsonl"
OUT_OF_POOL_ACTIONS = ("drain", "evict")


@dataclass
class Inputs:
    """Everything read: observations, the runs they came from, and what was skipped."""

    observations: list[Observation] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    """One summary per run read: path, time, nodes, rejected."""
    journals: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    inconsistent: list[Inconsistent] = field(default_factory=list)
    """Admitted nodes whose gate.json names failed or unmeasured checks (counted as rejected)."""


def _shown(path: Path) -> str:
    return printable(str(path), limit=200)


def read_json(path: Path) -> Any:
    """A JSON document, or UsageError naming the file and what is wrong with it."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{_shown(path)}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise UsageError(f"{_shown(path)}: not JSON (not UTF-8 text)") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{_shown(path)}: not JSON ({exc})") from None


def _ids(value: object, path: Path, node: str, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise UsageError(f"{_shown(path)}: not a burnin gate.json (node {printable(node, limit=60)}: "
                         f"{key} is not a list of check ids)")
    return tuple(value)


def _decisions(doc: object, path: Path) -> dict[str, dict[str, Any]]:
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), dict):
        raise UsageError(f"{_shown(path)}: not a burnin gate.json (no 'nodes' mapping)")
    nodes: dict[str, dict[str, Any]] = doc["nodes"]
    for node, decision in nodes.items():
        if not isinstance(decision, dict) or not isinstance(decision.get("admitted"), bool):
            raise UsageError(f"{_shown(path)}: not a burnin gate.json (node {printable(node, limit=60)}: "
                             "'admitted' is not true/false)")
    return nodes


def _run_time(gate: dict[str, Any], gate_file: Path) -> tuple[float | None, Path, str]:
    """When the run's verdicts were in, the file and the field that say it: gate.json's ``created``,
    else run.json's start plus its duration."""
    created = parse_stamp(gate.get("created"))
    if created is not None:
        return created, gate_file, "created"
    run_file = gate_file.parent / RUN_FILE
    if not run_file.is_file():
        return None, gate_file, ""
    meta = read_json(run_file)
    if not isinstance(meta, dict):
        raise UsageError(f"{_shown(run_file)}: not a burnin run.json (not a mapping)")
    started = parse_stamp(meta.get("started"))
    duration = finite_time(meta.get("duration_s")) or 0.0
    return None if started is None else started + max(0.0, duration), run_file, "started + duration_s"


def read_run(gate_file: Path, inputs: Inputs, now: float) -> None:
    """One run's decisions as observations (or the reason it was skipped); ``now``: the reader's clock."""
    folder = gate_file.parent
    gate = read_json(gate_file)
    nodes = _decisions(gate, gate_file)
    if gate.get("partial") or gate.get("interrupted"):
        why = "interrupted" if gate.get("interrupted") else "partial (a subset of the checks)"
        inputs.skipped.append(Skipped(str(folder), f"{why} run: its gate admits nobody, so it judged no node"))
        return
    at, source, field_name = _run_time(gate, gate_file)
    if at is None:
        inputs.skipped.append(Skipped(str(folder), "no time: gate.json has no 'created' and no run.json 'started'"))
        return
    wrong = impossible_time(at, now)
    if wrong is not None:
        inputs.skipped.append(Skipped(str(source), f"{field_name} {wrong}: run not read"))
        return
    rejected = 0
    for node, decision in nodes.items():
        failed = _ids(decision.get("failed", []), gate_file, node, "failed")
        incomplete = _ids(decision.get("incomplete", []), gate_file, node, "incomplete")
        reasons = decision.get("reasons")
        reason = reasons[0] if isinstance(reasons, list) and reasons and isinstance(reasons[0], str) else ""
        admitted = bool(decision["admitted"])
        if admitted and (failed or incomplete):  # admitted means every check measured it and passed
            inputs.inconsistent.append(Inconsistent(str(gate_file), node, failed, incomplete))
            admitted = False
        rejected += not admitted
        inputs.observations.append(Observation(node, at, admitted, failed, incomplete, reason, str(folder), "run"))
    inputs.runs.append({"path": str(folder), "at": at, "nodes": len(nodes), "rejected": rejected})


class _BadEntry(ValueError):
    """A journal line that cannot be read as what it says it is (skipped with this reason)."""


def _journal_observation(entry: dict[str, Any], origin: str, now: float) -> Observation | None:
    """A drain or eviction that took the node out of the pool; None for anything else the journal records."""
    if entry.get("action") not in OUT_OF_POOL_ACTIONS or entry.get("out_of_pool") is not True or entry.get("dry_run"):
        return None
    node, check_id, at = entry.get("node"), entry.get("check"), finite_time(entry.get("detected_at"))
    if not isinstance(node, str) or not node or not isinstance(check_id, str) or at is None:
        raise _BadEntry("not a burnin watch journal entry (node, check and detected_at are required)")
    wrong = impossible_time(at, now)
    if wrong is not None:
        raise _BadEntry(f"detected_at {wrong}")
    reason = entry.get("reason") or entry.get("cause") or ""
    return Observation(node, at, False, (check_id,), (), str(reason), origin, "watch")


def read_journal(path: Path, inputs: Inputs, now: float) -> None:
    """The watch's ``events.jsonl`` (or a state folder holding it): each drain or eviction is a rejection.

    A line that is not an entry (a torn last line: the watch stopped while writing it) is skipped
    with a warning naming it; a file in which no line is a JSON object is not a journal (UsageError).
    """
    file = path / JOURNAL_FILE if path.is_dir() else path
    if not file.exists():
        raise UsageError(f"--journal {_shown(path)}: no such file" + (f" ({JOURNAL_FILE} in it)" if path.is_dir()
                                                                       else ""))
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8 text"
        raise UsageError(f"{_shown(file)}: cannot read ({detail})") from None
    lines = text.splitlines()
    taken = objects = not_objects = 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{file}:{number}"
        try:
            entry = json.loads(line)
        except ValueError:
            entry = None
        if not isinstance(entry, dict):
            if number == len(lines) and not text.endswith("\n"):
                inputs.skipped.append(Skipped(where, "torn last line (the watch stopped while writing it?)"))
                continue
            not_objects += 1
            inputs.skipped.append(Skipped(where, "not a JSON object (a burnin watch journal has one per line)"))
            continue
        objects += 1
        try:
            observation = _journal_observation(entry, str(file), now)
        except _BadEntry as exc:
            inputs.skipped.append(Skipped(where, str(exc)))
            continue
        if observation is not None:
            inputs.observations.append(observation)
            taken += 1
    if not_objects and not objects:
        raise UsageError(f"{_shown(file)}: not a burnin watch journal (no line is a JSON object)")
    inputs.journals.append({"path": str(file), "out_of_pool": taken})


def _run_folders(folder: Path) -> list[Path]:
    """The run folders directly inside ``folder`` (those holding a gate.json)."""
    return [child for child in sorted(folder.iterdir()) if child.is_dir() and (child / GATE_FILE).is_file()]


def _looks_like_a_run(folder: Path) -> bool:
    return any((folder / name).exists() for name in (RUN_FILE, "facts", "junit.xml", "verdicts.json"))


def collect(paths: Sequence[Path], journals: Iterable[Path] = (), *, now: float | None = None) -> Inputs:
    """Read every run and journal named; raises UsageError on a file that is not what it should be.

    ``now`` (default: the clock) is the latest time a run or entry may carry, give or take a day.
    """
    inputs = Inputs()
    seen: set[Path] = set()
    clock = time.time() if now is None else now

    def run(gate_file: Path) -> None:
        key = gate_file.resolve()
        if key not in seen:
            seen.add(key)
            read_run(gate_file, inputs, clock)

    for path in paths:
        if not path.exists():
            raise UsageError(f"{_shown(path)}: no such file or folder")
        if path.is_file():
            run(path)
        elif (path / GATE_FILE).is_file():
            run(path / GATE_FILE)
        elif _run_folders(path):
            for child in sorted(path.iterdir()):
                if not child.is_dir():
                    continue
                if (child / GATE_FILE).is_file():
                    run(child / GATE_FILE)
                elif _looks_like_a_run(child):
                    inputs.skipped.append(Skipped(str(child), "no gate.json: the run wrote no verdicts "
                                                              "(stopped before judging?)"))
        else:
            why = "no gate.json: the run wrote no verdicts (stopped before judging?)" if _looks_like_a_run(path) \
                else "no gate.json, and no run folder with one inside"
            inputs.skipped.append(Skipped(str(path), why))
    for journal in journals:
        read_journal(journal, inputs, clock)
    return inputs
