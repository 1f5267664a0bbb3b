"""The ``sdc`` source: burnin's silent-data-corruption workload (GPU-14) run with this node's python.

The workload (:mod:`burnin.collector.sdc_workload`: standard library plus torch) runs in a process of its
own, started with the interpreter that runs the collector (the node's ``python3``; the collector zipapp
carries the workload's source), so a CUDA fault or a hang stays out of the collector and the source's
timeout bounds it. torch is imported once per node, not per GPU: one process tests every GPU.

The record is the tool record of :func:`burnin.collector.commands.run_tool` (argv shown without the
source text) with the workload's JSON on stdout; the controller reads it (:mod:`burnin.checks.sdc`).
``sdc-size=N`` among the collector's sources sets the matrices' size (the topology's ``sdc.size``).
"""

from __future__ import annotations

import os
import pkgutil
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

SIZE_ITEM = "sdc-size="
DEFAULT_SIZE = 1024
REPEAT = 2


def split_items(sources: Sequence[str]) -> tuple[tuple[str, ...], int]:
    """``--sources`` items -> (the other items, the SDC size)."""
    size = DEFAULT_SIZE
    rest: list[str] = []
    for item in sources:
        if item.startswith(SIZE_ITEM) and item[len(SIZE_ITEM):].isdigit() and int(item[len(SIZE_ITEM):]) > 0:
            size = int(item[len(SIZE_ITEM):])
        else:
            rest.append(item)
    return tuple(rest), size


def workload_source() -> str:
    """The workload's text (read from the package, or from the zipapp the collector travelled in)."""
    data = pkgutil.get_data("burnin.collector", "sdc_workload.py")
    if data is None:
        raise OSError("the SDC workload is not in the collector package")
    return data.decode("utf-8")


def collect_sdc(size: int, timeout: float) -> dict[str, Any]:
    shown = [sys.executable or "python3", "-c", "<burnin SDC workload>", "--size", str(size), "--repeat", str(REPEAT)]
    record: dict[str, Any] = {"argv": shown, "exit_status": None, "stdout": "", "stderr": "", "error": None}
    if not sys.executable:
        record["error"] = "the collector's python has no path to start the SDC workload with"
        return record
    argv = [sys.executable, "-c", workload_source(), "--size", str(size), "--repeat", str(REPEAT)]
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL,
                              env={**os.environ, "LC_ALL": "C"})
    except subprocess.TimeoutExpired as exc:
        record["error"] = f"the SDC workload timed out after {timeout:g} s"
        record["stdout"] = (exc.stdout or b"").decode("utf-8", "replace")[-4000:]
        return record
    except OSError as exc:
        record["error"] = f"cannot run the SDC workload: {exc.strerror or exc}"
        return record
    record["exit_status"] = proc.returncode
    record["stdout"] = proc.stdout.decode("utf-8", "replace")[-200_000:]
    record["stderr"] = proc.stderr.decode("utf-8", "replace")[-4000:]
    return record
