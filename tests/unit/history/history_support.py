"""Hand-built run folders and watch journals for the history tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def decision(admitted: bool = True, failed: tuple[str, ...] = (), incomplete: tuple[str, ...] = (),
             reasons: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"admitted": admitted, "failed": list(failed), "incomplete": list(incomplete),
            "reasons": list(reasons) or [f"{c} broke" for c in failed + incomplete]}


def write_run(folder: Path, created: str | None, nodes: dict[str, dict[str, Any]], **extra: Any) -> Path:
    """A run folder with a gate.json as burnin writes it (``created`` None: left out)."""
    folder.mkdir(parents=True, exist_ok=True)
    gate: dict[str, Any] = {"topology": "hgx-h100-8gpu", "partial": False, "interrupted": False, **extra,
                            "nodes": nodes}
    if created is not None:
        gate["created"] = created
    (folder / "gate.json").write_text(json.dumps(gate), encoding="utf-8")
    return folder


def healthy(*names: str) -> dict[str, dict[str, Any]]:
    return {name: decision() for name in names}


def journal_entry(node: str, at: object, check: str | None = "GPU-04", action: str = "evict",
                  **extra: Any) -> dict[str, Any]:
    entry = {"node": node, "source": "nvml", "kind": "xid", "check": check, "class": action, "action": action,
             "cause": "Xid 79 on gpu3", "reason": f"burnin: {check} Xid 79 on gpu3", "detected_at": at,
             "acted_at": at, "out_of_pool": True, "dry_run": False}
    entry.update(extra)
    return entry


def write_journal(path: Path, entries: list[dict[str, Any]], *, extra_lines: tuple[str, ...] = ()) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(e) + "\n" for e in entries) + "".join(extra_lines), encoding="utf-8")
    return path
