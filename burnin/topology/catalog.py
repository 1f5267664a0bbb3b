"""Where topology files are found: site folders ($BURNIN_TOPOLOGY_PATH), then built-ins."""

from __future__ import annotations

import os
from pathlib import Path

from burnin.errors import UsageError
from burnin.resources import topologies_dir


def search_dirs() -> list[Path]:
    dirs = [Path(p) for p in os.environ.get("BURNIN_TOPOLOGY_PATH", "").split(os.pathsep) if p]
    dirs.append(topologies_dir())
    return dirs


def list_topologies() -> dict[str, Path]:
    """Known topology names (file stems) and their files; site dirs shadow built-ins."""
    found: dict[str, Path] = {}
    for directory in reversed(search_dirs()):
        if directory.is_dir():
            for file in sorted(directory.glob("*.yaml")):
                found[file.stem] = file
    return dict(sorted(found.items()))


def resolve(name_or_file: str) -> Path:
    """The file for a topology name (``hgx-h100-8gpu``) or path."""
    candidate = Path(name_or_file)
    if candidate.suffix in (".yaml", ".yml") or os.sep in name_or_file:
        if not candidate.exists():
            raise UsageError(f"topology file not found: {name_or_file}")
        return candidate
    known = list_topologies()
    if name_or_file not in known:
        names = ", ".join(known) or "none"
        raise UsageError(f"unknown topology {name_or_file!r} (known: {names})")
    return known[name_or_file]
