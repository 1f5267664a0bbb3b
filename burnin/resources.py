"""Where the suites and topologies that ship with burnin live, and where it keeps what it can rebuild.

A wheel carries them under ``burnin/_data`` (see pyproject's force-include); a
source checkout or editable install keeps them at the repository root.
"""

from __future__ import annotations

import os
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """Folder ``name`` (``suites`` or ``topologies``) of this installation."""
    packaged = _PACKAGE_DIR / "_data" / name
    if packaged.is_dir():
        return packaged
    return _PACKAGE_DIR.parent / name


def suites_dir() -> Path:
    return data_dir("suites")


def topologies_dir() -> Path:
    return data_dir("topologies")


def cache_dir(name: str) -> Path:
    """``$XDG_CACHE_HOME/burnin/<name>`` (default ``~/.cache``): what burnin rebuilds when it is missing (the
    validated topologies, the collector zipapp, the simulated NVML library). RuntimeError: no home to find."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "burnin" / name
