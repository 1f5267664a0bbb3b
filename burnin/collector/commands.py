"""Tool outputs gathered as raw text; the controller's pure parsers read them."""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any


def run_tool(argv: list[str], timeout: float) -> dict[str, Any]:
    """Run one tool found on PATH; record its output or why it could not run."""
    record: dict[str, Any] = {"argv": argv, "exit_status": None, "stdout": "", "stderr": "", "error": None}
    if shutil.which(argv[0]) is None:
        record["error"] = f"{argv[0]}: command not found"
        return record
    try:
        proc = subprocess.run(
            argv, capture_output=True, timeout=timeout, check=False,
            stdin=subprocess.DEVNULL, env={**os.environ, "LC_ALL": "C"},
        )
    except subprocess.TimeoutExpired as exc:
        record["error"] = f"{argv[0]} timed out after {timeout:g} s"
        record["stdout"] = (exc.stdout or b"").decode("utf-8", "replace")[-4000:]
        return record
    except OSError as exc:
        record["error"] = f"cannot run {argv[0]}: {exc.strerror or exc}"
        return record
    record["exit_status"] = proc.returncode
    record["stdout"] = proc.stdout.decode("utf-8", "replace")
    record["stderr"] = proc.stderr.decode("utf-8", "replace")[-4000:]
    return record


def nvidia_smi_topo(root: str, timeout: float) -> dict[str, Any]:
    return run_tool(["nvidia-smi", "topo", "-m"], timeout)


def ibstat(root: str, timeout: float) -> dict[str, Any]:
    return run_tool(["ibstat"], timeout)


# Kernel-log lines that GPU/HCA checks read; the rest stays on the node.
_KERNEL_LOG_KEEP = ("NVRM", "Xid", "SXid", "AER", "mlx5", "nvidia", "pcieport", "NVSwitch")


def _kept(line: str) -> bool:
    """Whether the line holds one of _KERNEL_LOG_KEEP ("SXid" holds "Xid"). Spelled out: a node's log has
    thousands of lines, and this costs a third of ``any(key in line for key in _KERNEL_LOG_KEEP)``."""
    return ("Xid" in line or "NVRM" in line or "AER" in line or "mlx5" in line or "nvidia" in line
            or "pcieport" in line or "NVSwitch" in line)


def dmesg(root: str, timeout: float) -> dict[str, Any]:
    record = run_tool(["dmesg"], timeout)
    lines = record["stdout"].splitlines()
    kept = [line for line in lines if _kept(line)]
    record["stdout"] = "\n".join(kept) + ("\n" if kept else "")
    record["lines_total"] = len(lines)
    return record


def lspci(root: str, timeout: float) -> dict[str, Any]:
    return run_tool(["lspci", "-vvv"], timeout)


def fabricmanager(root: str, timeout: float) -> dict[str, Any]:
    # `systemctl is-active` exits non-zero for inactive units: that is data, not an error.
    return run_tool(["systemctl", "is-active", "nvidia-fabricmanager"], timeout)
