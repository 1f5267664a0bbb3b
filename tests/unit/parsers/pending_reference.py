"""Real outputs of tools whose parser is newer than ../shared/reference.

They wait in ``../shared/reference-pending`` (see its SOURCES.md) until a later
revision of shared/ moves them into ``reference``; the parser tests read them
from there, in place. Missing is a failure under CI (``CI`` set).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[3]
# (folder, file-name pattern, tool)
PENDING_TOOL_RULES: list[tuple[str, str, str]] = [
    ("perftest", r".", "perftest"),
    ("nvidia-smi", r"^dmon-", "nvidia-smi-dmon"),
    ("ibdev2netdev", r".", "ibdev2netdev"),
    ("ip", r"^ip-route", "ip-route"),
    ("nccl", r"^nccl-debug-info", "nccl-info"),
    ("slurm", r"^srun-cpu-bind", "cpu-bind"),
]
PENDING_TOOLS = frozenset(tool for _, _, tool in PENDING_TOOL_RULES)


def pending_root() -> Path:
    override = os.environ.get("BURNIN_REFERENCE_DIR")
    reference = Path(override) if override else REPO_ROOT / ".." / "shared" / "reference"
    return reference.parent / "reference-pending"


def pending_files() -> list[Path]:
    """The pending real outputs that a registered parser reads, sorted."""
    root = pending_root()
    folders = [root / folder for folder, _, _ in PENDING_TOOL_RULES]
    missing = [f for f in folders if not f.is_dir()]
    if missing and os.environ.get("CI"):
        pytest.fail(f"pending reference outputs not found at {missing[0]} (CI must have ../shared)")
    return sorted(p for f in folders if f.is_dir() for p in f.rglob("*")
                  if p.is_file() and not p.name.endswith(".md") and not p.name.startswith("."))


def pending_tool(path: Path) -> str | None:
    folder = path.relative_to(pending_root()).parts[0]
    return next((tool for rule_folder, pattern, tool in PENDING_TOOL_RULES
                 if folder == rule_folder and re.search(pattern, path.name)), None)
