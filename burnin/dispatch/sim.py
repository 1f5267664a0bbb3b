"""Dispatch to simulated nodes: the local transport with each node's environment.

The collector runs as a real process with the node's shim PATH, NVML library
and sysfs root, exactly the code path of a real node.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from burnin.facts import Facts
from burnin.runner import gather
from burnin.sim import SimNode, build_rack, parse_fault_spec
from burnin.topology.model import Topology
from burnin.transport.local import LocalTransport

COLLECTOR_ARGV = (sys.executable, "-m", "burnin.collector")


def parse_fault_args(values: list[str], names: list[str]) -> dict[str, list[object]]:
    """``["sim03:nvlink-down", "sim06:ib-rate-200@mlx5_1"]`` → faults per node."""
    from burnin.errors import UsageError

    faults: dict[str, list[object]] = {}
    for value in values:
        node, sep, spec = value.partition(":")
        if not sep or not spec:
            raise UsageError(f"--fault {value!r}: expected NODE:FAULT, e.g. sim03:nvlink-down")
        if node not in names:
            raise UsageError(f"--fault {value!r}: no simulated node {node!r} (nodes: {names[0]}..{names[-1]})")
        faults.setdefault(node, []).append(parse_fault_spec(spec))
    return faults


SCRATCH_PREFIX = "burnin-sim-"
# Scratch folders this process made and has not removed yet: an interrupt or a
# crash removes them (remove_scratch) even when no dispatcher owns them yet.
_SCRATCH: set[Path] = set()
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def scratch_dir() -> Path:
    """A private folder for a throw-away rack: on tmpfs when there is one (1,500 files a node).

    Named ``burnin-sim-<pid>-*``, so what a run left behind can be told from another run's rack.
    """
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK) else None
    # No signal between creating the folder and recording it: an interrupt must find it.
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        path = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-", dir=base))
        _SCRATCH.add(path)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    return path


def remove_scratch(path: Path | None = None) -> None:
    """Remove ``path`` (default: every scratch folder this process made and still holds)."""
    for folder in [path] if path is not None else sorted(_SCRATCH):
        shutil.rmtree(folder, ignore_errors=True)
        _SCRATCH.discard(folder)


class SimDispatcher:
    """N simulated nodes built under ``state_dir`` from a topology and faults.

    With ``owned=True`` the state folder is removed by :meth:`close`.
    """

    def __init__(self, state_dir: Path, topology: Topology, names: list[str],
                 faults: Mapping[str, list[object]], *, owned: bool = False) -> None:
        self.nodes = names
        self._state_dir = state_dir
        self._owned = owned
        self.topology_by_node: dict[str, str] = {}
        try:
            rack = build_rack(state_dir, topology, names, dict(faults))  # type: ignore[arg-type]
        except BaseException:
            if owned:
                remove_scratch(state_dir)
            raise
        self._sim: dict[str, SimNode] = {node.name: node for node in rack}
        # A throw-away rack also holds its nodes' temporary files (tools' mktemp), so they go with it.
        self._tmp: dict[str, str] = {}
        if owned:
            (state_dir / "tmp").mkdir(exist_ok=True)
            self._tmp = {"TMPDIR": str(state_dir / "tmp")}
        self._transport = LocalTransport(node_env=lambda name: {**self._sim[name].environment(), **self._tmp})

    def gather(self, *, sources: str = "all", timeout: float = 60.0,
               on_done: Callable[[str], None] | None = None) -> dict[str, Facts]:
        argv = [*COLLECTOR_ARGV, "--sources", sources, "--timeout", str(max(1.0, timeout / 2))]
        return gather(self._transport, self.nodes, argv, timeout=timeout, fanout=8, on_done=on_done)

    @property
    def transport(self) -> LocalTransport:
        """The local transport with each node's environment (the fabric phase runs through it)."""
        return self._transport

    def close(self) -> None:
        self._transport.close()
        if self._owned:
            remove_scratch(self._state_dir)
