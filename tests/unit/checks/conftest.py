"""A healthy node's facts, gathered once per session by the real collector from a simulated node."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from checks_support import NODE, TOPOLOGY

from burnin.checks.storage import collector_sources
from burnin.sim import build_rack


@pytest.fixture(scope="session")
def healthy_facts() -> Iterator[dict[str, Any]]:
    """The facts document of a healthy simulated H100 node (do not change: copy it)."""
    shm = Path("/dev/shm")
    base = Path(tempfile.mkdtemp(prefix="burnin-check-tests-",
                                 dir=shm if shm.is_dir() and os.access(shm, os.W_OK) else None))
    try:
        node, = build_rack(base, TOPOLOGY, [NODE])
        env = {**os.environ, **node.environment(), "LC_ALL": "C"}
        # as `burnin run` calls it: all sources, plus the storage targets whose routes STO-01 judges, each source
        # given half the run's 120 s (the SDC workload imports torch: seconds, more on a loaded machine)
        sources = collector_sources("all", [TOPOLOGY])
        argv = [sys.executable, "-m", "burnin.collector", "--root", str(node.root), "--sources", sources,
                "--timeout", "60"]
        proc = subprocess.run(argv,
                              env=env, capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode == 0, proc.stderr
        data: dict[str, Any] = json.loads(proc.stdout)
        assert all(status["ok"] for status in data["sources"].values()), data["sources"]
        yield data
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def facts(healthy_facts: dict[str, Any]) -> dict[str, Any]:
    """A private copy of the healthy facts, for one test to change."""
    return copy.deepcopy(healthy_facts)
