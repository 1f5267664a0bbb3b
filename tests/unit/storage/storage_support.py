"""Helpers of the storage-fabric tests (a module of its own: test modules cannot import conftest reliably)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from burnin.checks.storage import collector_sources
from burnin.sim import SimNode
from burnin.topology.model import StorageRouting, Topology

Gather = Callable[..., dict[str, Any]]


def collect(node: SimNode, topology: Topology, sources: str | None = None,
            env: dict[str, str] | None = None) -> dict[str, Any]:
    """The facts of ``node`` as `burnin run` gathers them (its collector argv, the node's environment)."""
    argv = [sys.executable, "-m", "burnin.collector", "--root", str(node.root),
            "--sources", sources or collector_sources("all", [topology]), "--timeout", "30"]
    full = {**os.environ, **node.environment(), "LC_ALL": "C", **(env or {})}
    for key in [k for k in full if k.startswith("NCCL_") and (env is None or k not in env)]:
        del full[key]  # the test's own environment is not the node's
    proc = subprocess.run(argv, env=full, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    data: dict[str, Any] = json.loads(proc.stdout)
    return data


def with_routing(topology: Topology, routing: StorageRouting, name: str) -> Topology:
    assert topology.storage is not None
    return dataclasses.replace(topology, name=name, storage=dataclasses.replace(topology.storage, routing=routing))
