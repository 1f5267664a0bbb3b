"""The ``sdc`` source: burnin's silent-data-corruption workload (GPU-14) run with this node's python.

The workload (:mod:`burnin.collector.sdc_workload`: standard library plus torch) runs in a process of its
own, started with the interpreter that runs the collector (the node's ``python3``; the collector zipapp
carries the workload's source; a simulated node names its own: :func:`burnin.collector.node_env.sdc_python`),
so a CUDA fault or a hang stays out of the collector and the source's timeout bounds it. torch is imported
once per node, not per GPU: one process tests every GPU.

The record is the tool record of :func:`burnin.collector.commands.run_tool` (its argv shown without
the source text) with the workload's JSON on stdout; the controller reads it (:mod:`burnin.checks.sdc`).
``sdc-size=N`` among the collector's sources sets the matrices' size (the topology's ``sdc.size``).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence

from burnin.collector import node_env
from burnin.collector.commands import run_tool

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing on every collector start
if TYPE_CHECKING:
    from typing import Any

WORKLOAD = "burnin.collector.sdc_workload"
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
    """The workload's text, from the loader that imports the collector: the package's files, the zipapp
    Slurm ships, or the zip the SSH bootstrap holds in memory (each answers ``get_source``)."""
    spec = importlib.util.find_spec(WORKLOAD)
    get_source = getattr(spec.loader, "get_source", None) if spec is not None else None
    source = get_source(WORKLOAD) if get_source is not None else None
    if not source:
        raise OSError(f"the SDC workload ({WORKLOAD}) is not in the collector package")
    return str(source)


def collect_sdc(size: int, timeout: float) -> dict[str, Any]:
    args = ["--size", str(size), "--repeat", str(REPEAT)]
    python = node_env.sdc_python()
    record = run_tool([python, "-c", workload_source(), *args], timeout)
    record["argv"] = [python, "-c", "<burnin SDC workload>", *args]  # the facts keep no copy of the source
    if record["error"] and "timed out" in record["error"]:
        record["error"] = f"the SDC workload timed out after {timeout:g} s"
    return record
