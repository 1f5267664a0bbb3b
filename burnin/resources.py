"""Where the suites and topologies that ship with burnin live.

A wheel carries them under ``burnin/_data`` (see pyproject's force-include); a
source checkout or editable install keeps them at the repository root.
"""

from __future__ import annotations

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
