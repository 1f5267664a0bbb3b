"""Tool outputs gathered as raw text; the controller's pure parsers read them."""

from __future__ import annotations

import os
import subprocess
import time
from collections import deque
from collections.abc import Mapping, Sequence

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing on every collector start
if TYPE_CHECKING:
    from typing import Any

Record = dict[str, "Any"]
"""A tool's record: ``argv``, ``exit_status`` (None: it did not end by itself), ``stdout``, ``stderr``, ``error``."""

TOOLS_AT_ONCE = 4
"""How many tools :func:`run_tools` has running at a time by default."""


def run_tool(argv: list[str], timeout: float) -> Record:
    """Run one tool found on PATH; record its output or why it could not run."""
    return run_tools({"tool": argv}, timeout)["tool"]


def tools_time(source_timeout: float) -> float:
    """What a source's tools may take together: nine tenths of the source's own time, the rest to read files."""
    return max(0.1, source_timeout) * 0.9


def run_tools(jobs: Mapping[str, Sequence[str]], timeout: float, *, at_once: int = TOOLS_AT_ONCE) -> dict[str, Record]:
    """Each job's record (as :func:`run_tool` makes it), the tools side by side, at most ``at_once`` running,
    all within ``timeout`` together; in the jobs' order.

    No thread each: every tool is started, then read to its end in turn, and one with more to say than a pipe
    holds waits for its turn (the probe's storage source ran its three ``ip`` in three threads, which cost more
    CPU than the tools). A tool whose turn to start comes after the time is spent is not run, and says so.
    """
    deadline = time.monotonic() + timeout
    waiting = deque(jobs.items())
    running: deque[tuple[str, Record | tuple[Record, subprocess.Popen[bytes]]]] = deque()
    records: dict[str, Record] = {}
    try:
        while waiting or running:
            while waiting and len(running) < max(1, at_once):
                key, argv = waiting.popleft()
                if deadline - time.monotonic() <= 0.05:
                    records[key] = _record(list(argv), error=f"{argv[0]} not run: the {timeout:g} s its tools "
                                                              "had were spent")
                else:
                    running.append((key, _start(list(argv))))
            if running:
                key, started = running[0]
                records[key] = started if isinstance(started, dict) else _finish(*started, deadline, timeout)
                running.popleft()
    except BaseException:  # interrupted (the one being read included): the tools still running go with it
        for _, started in running:
            if not isinstance(started, dict) and started[1].poll() is None:
                started[1].kill()
                started[1].wait()
        raise
    return {key: records[key] for key in jobs}


def _record(argv: list[str], *, error: str | None = None) -> Record:
    return {"argv": argv, "exit_status": None, "stdout": "", "stderr": "", "error": error}


def _start(argv: list[str]) -> Record | tuple[Record, subprocess.Popen[bytes]]:
    """The tool started (its record to fill in and its process), or its record saying why it could not start."""
    record = _record(argv)
    if not _on_path(argv[0]):
        record["error"] = f"{argv[0]}: command not found"
        return record
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env={**os.environ, "LC_ALL": "C"})
    except OSError as exc:
        record["error"] = f"cannot run {argv[0]}: {exc.strerror or exc}"
        return record
    return record, proc


def _on_path(tool: str) -> bool:
    """Whether ``tool`` names an executable file (a path), or one is in a folder of PATH: what ``shutil.which``
    answers, without the 2.4 ms of imports ``shutil`` costs every collector start (its archive modules)."""
    folders = [""] if "/" in tool else os.get_exec_path()
    for folder in folders:
        path = os.path.join(folder, tool)
        if os.access(path, os.X_OK) and not os.path.isdir(path):
            return True
    return False


def _finish(record: Record, proc: subprocess.Popen[bytes], deadline: float, timeout: float) -> Record:
    """``record`` with what the tool printed and how it ended; killed (and said so) when ``deadline`` passes."""
    argv = record["argv"]
    try:
        stdout, stderr = proc.communicate(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, _ = proc.communicate()
        record["error"] = f"{argv[0]} timed out after {timeout:g} s"
        record["stdout"] = stdout.decode("utf-8", "replace")[-4000:]
        return record
    record["exit_status"] = proc.returncode
    record["stdout"] = stdout.decode("utf-8", "replace")
    record["stderr"] = stderr.decode("utf-8", "replace")[-4000:]
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
