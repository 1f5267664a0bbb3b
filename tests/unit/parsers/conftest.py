"""Fixtures for the parser tests: where the real reference outputs live.

The reference outputs are read in place from ``<repo>/../shared/reference``
(``BURNIN_REFERENCE_DIR`` overrides it); they are never copied into the repo.
When the folder is missing the tests that need it are skipped, except under CI
(``CI`` set), where they fail: CI must run them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[3]
# Files in the reference folder that describe the others rather than being tool output.
NOT_OUTPUTS = ("SOURCES.md", "NUMBERS.md")


# (folder, file-name pattern, tool); the first matching rule wins.
TOOL_RULES: list[tuple[str, str, str]] = [
    ("dcgmi", r".", "dcgmi-diag"),
    ("dmesg", r".", "dmesg-xid"),
    ("infiniband", r"^ibstatus", "ibstatus"),
    ("infiniband", r"^ibstat", "ibstat"),
    ("lspci", r".", "lspci"),
    ("megatron", r".", "megatron-log"),
    ("nccl-tests", r".", "nccl-tests"),
    ("numa-lscpu", r"^lscpu", "lscpu"),
    ("numa-lscpu", r"^numactl", "numactl"),
    ("nvbandwidth", r".", "nvbandwidth"),
    ("p2pBandwidthLatencyTest", r".", "p2p-bandwidth"),
    ("nvidia-smi", r"^topo", "nvidia-smi-topo"),
    ("nvidia-smi", r"^nvlink", "nvidia-smi-nvlink"),
    ("nvidia-smi", r"^query", "nvidia-smi-query"),
    ("nvidia-smi", r"^q-|^q\.|^smi-q", "nvidia-smi-q"),
]


def tool_for(path: Path, root: Path) -> str | None:
    """The parser for a reference file, from its top folder and file name."""
    folder = path.relative_to(root).parts[0]
    for rule_folder, pattern, tool in TOOL_RULES:
        if folder == rule_folder and re.search(pattern, path.name):
            return tool
    return None


def reference_root() -> Path:
    override = os.environ.get("BURNIN_REFERENCE_DIR")
    if override:
        return Path(override)
    return REPO_ROOT / ".." / "shared" / "reference"


def is_output_file(path: Path) -> bool:
    name = path.name
    return not (
        name in NOT_OUTPUTS or name.upper().startswith("README") or name.endswith(".md") or name.startswith(".")
    )


def reference_files() -> list[Path]:
    """Every tool output under the reference folder (recursively), sorted."""
    root = reference_root()
    if not root.is_dir():
        return []
    return sorted(p for p in root.rglob("*") if p.is_file() and is_output_file(p))


def _missing(root: Path) -> None:
    message = f"reference outputs not found at {root} (set BURNIN_REFERENCE_DIR)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def ref_dir() -> Path:
    root = reference_root()
    if not root.is_dir():
        _missing(root)
    return root


@pytest.fixture(scope="session")
def ref(ref_dir: Path) -> Callable[[str], str]:
    """Read one reference file by its path relative to the reference folder."""

    def read(relative: str) -> str:
        path = ref_dir / relative
        if not path.is_file():
            pytest.fail(f"reference file {relative} is missing from {ref_dir}")
        return path.read_text(encoding="utf-8", errors="replace")

    return read


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``reference_file`` over every file found in the reference folder."""
    if "reference_file" in metafunc.fixturenames:
        root = reference_root()
        files = reference_files()
        ids = [p.relative_to(root).as_posix() for p in files]
        metafunc.parametrize("reference_file", files, ids=ids)


@pytest.fixture(scope="session")
def tool_rules() -> list[tuple[str, str, str]]:
    return TOOL_RULES


@pytest.fixture(scope="session")
def tool_of(ref_dir: Path) -> Callable[[Path], str | None]:
    """Map a reference file to its parser's tool name (None when no rule matches)."""
    return lambda path: tool_for(path, ref_dir)
