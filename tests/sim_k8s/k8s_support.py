"""Shared by the Kubernetes tier's tests: the CLI with a user's kubeconfig, and reading burnin's marks on a Node."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from burnin.gate.kubernetes import CONDITION, TAINT_KEY
from burnin_lab.k8s import K8sLab

CLI = [sys.executable, "-m", "burnin.cli.main"]


def burnin(lab: K8sLab, *args: str, user: str = "burnin-gate", env: dict[str, str] | None = None,
           timeout: float = 900) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "KUBECONFIG": str(lab.kubeconfig(user)), **(env or {})}
    full.pop("KUBERNETES_SERVICE_HOST", None)
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, check=False, env=full)


def our_taints(lab: K8sLab, node: str) -> list[dict[str, Any]]:
    return [t for t in lab.taints(node) if t.get("key") == TAINT_KEY]


def our_condition(lab: K8sLab, node: str) -> dict[str, Any] | None:
    return lab.condition(node, CONDITION)


def env_file(path: Path) -> dict[str, str]:
    return {"KUBECONFIG": str(path)}
