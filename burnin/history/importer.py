"""``burnin history import PATH...``: past run folders and watch journals into the history database.

The folders are read as :mod:`.load` reads them (the same skips and warnings); each run becomes a run of kind
``import`` keyed by its folder, with its verdicts (from ``verdicts.json``, where it kept one) and its gate
decisions, and each drain or eviction of a journal becomes a gate action. Importing the same folder or journal
again adds nothing; a folder a run already recorded live is not imported twice either.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from burnin.history.load import Inputs, collect
from burnin.history.recorder import stderr_line, verdict_row
from burnin.history.records import Observation
from burnin.history.store import Store, Target, default_path
from burnin.runfiles import VERDICTS_FILE


@dataclass
class Imported:
    inputs: Inputs
    runs: int = 0
    runs_known: int = 0
    verdicts: int = 0
    actions: int = 0
    actions_known: int = 0


def _verdict_rows(folder: Path) -> list[tuple[str, str, str, float | None, str | None, str, str, str]]:
    """The folder's verdicts.json as rows (none when it has none or it is not readable)."""
    try:
        records = json.loads((folder / VERDICTS_FILE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return []
    if not isinstance(records, list):
        return []
    return [row for record in records if isinstance(record, dict) and (row := verdict_row(record)) is not None]


def import_paths(store: Store, paths: Sequence[Path], journals: Iterable[Path] = (), *,
                 now: float | None = None, kind: str = "import") -> Imported:
    """Read ``paths`` and ``journals`` (UsageError on a file that is not burnin's) and add what is new, each run
    as a run of ``kind`` (``soak``: a soak recording its own verdicts as it ends)."""
    inputs = collect(paths, journals, now=now)
    result = Imported(inputs)
    by_origin: dict[str, list[Observation]] = defaultdict(list)
    for observation in inputs.observations:
        by_origin[observation.origin].append(observation)
    for summary in inputs.runs:
        folder = Path(summary["path"])
        origin = str(folder.resolve())
        if store.run_with_origin(origin) is not None or store.db.execute(
                "SELECT 1 FROM runs WHERE out_dir = ?", (origin,)).fetchone():
            result.runs_known += 1
            continue
        observations = by_origin.get(summary["path"], [])
        run = store.add_run(kind=kind, started=float(summary["at"]), out_dir=origin, nodes=len(observations),
                            origin=origin)
        result.verdicts += store.add_verdicts(run, _verdict_rows(folder))
        store.finish_run(run, finished=float(summary["at"]), decisions=[
            (o.node, o.admitted, o.failed, o.incomplete, o.reason) for o in observations])
        result.runs += 1
    for observation in inputs.observations:
        if observation.source != "watch":
            continue
        key = f"{observation.origin}|{observation.node}|{observation.at!r}|{','.join(observation.failed)}"
        if store.add_action(at=observation.at, node=observation.node, action="drain",
                            check_ids=observation.failed, reason=observation.reason, source=observation.origin,
                            origin=key):
            result.actions += 1
        else:
            result.actions_known += 1
    return result


def record_finished(out_dir: Path, *, kind: str, path: Target | None = None,
                    warn: Callable[[str], None] = stderr_line) -> bool:
    """Record a run folder whose verdicts were written at its end (a soak: its gate.json and verdicts.json) as a
    run of ``kind``; once only (keyed by the folder: a resumed soak that ends again adds nothing). Never raises:
    a history that cannot be used is one warning line, as for a run. True when something was recorded."""
    try:
        target = path if path is not None else default_path()
        if target is None:
            return False
        with Store(target) as store:
            found = import_paths(store, [out_dir], kind=kind)
    except Exception as exc:  # noqa: BLE001 - the history never costs a soak its verdicts
        warn(f"burnin: history: not recorded: {exc}")
        return False
    return found.runs > 0
