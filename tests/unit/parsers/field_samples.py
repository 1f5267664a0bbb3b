"""Real tool outputs from other people's machines, kept in ``tests/field`` (see its SOURCES.md).

Unlike ``../shared/reference`` these travel with the repository: each file is a capture published
in a public issue, README or documentation page, stored verbatim with the damage the copy carries
(spaces for tabs, ``> `` quote marks, prompts). ``SOURCES.md`` names for each file the parser that
reads it, where it came from, the machine and versions, and its whitespace damage.
"""

from __future__ import annotations

import re
from pathlib import Path

FIELD_DIR = Path(__file__).resolve().parents[2] / "field"
SOURCES = FIELD_DIR / "SOURCES.md"
# "- `file` — `tool` [and `tool`] — source — machine — damage"
_ENTRY = re.compile(r"^- `([^`]+)` — ([^—]+) — (.+)$")
_TOOL = re.compile(r"`([a-z0-9-]+)`")


def field_text(name: str) -> str:
    """One capture, as text (undecodable bytes replaced, as ``burnin parse`` reads files)."""
    return (FIELD_DIR / name).read_bytes().decode("utf-8", errors="replace")


def sources() -> dict[str, tuple[str, ...]]:
    """File name -> the tools (``burnin parse`` names) SOURCES.md says read it."""
    entries: dict[str, tuple[str, ...]] = {}
    for line in SOURCES.read_text(encoding="utf-8").splitlines():
        match = _ENTRY.match(line)
        if match is not None:
            entries[match.group(1)] = tuple(_TOOL.findall(match.group(2)))
    return entries


def captures() -> list[str]:
    """Every capture file in the field folder, sorted."""
    return sorted(p.name for p in FIELD_DIR.iterdir() if p.is_file() and p.name != SOURCES.name)
