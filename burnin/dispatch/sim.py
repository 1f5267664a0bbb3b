"""Dispatch to simulated nodes: the local transport with each node's environment (``--sim N``).

The collector runs as a real process with the node's shim PATH, NVML library
and sysfs root, exactly the code path of a real node. This is the only
dispatcher that imports the simulator (:mod:`burnin.sim`), and only once a
simulated run starts: ``burnin run --via ssh`` or ``--via slurm`` loads none of it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from burnin.errors import UsageError

if TYPE_CHECKING:  # `burnin run --help` reads add_arguments only: the dispatcher's machinery is imported when used
    from burnin.dispatch.base import DispatchContext
    from burnin.facts import Facts
    from burnin.launch.local import LocalLauncher
    from burnin.launch.log import CommandLog
    from burnin.sim import SimNode
    from burnin.topology.model import Topology
    from burnin.transport.local import LocalTransport

DEFAULT_NODES = 8
USAGE = "--sim [N]"
SIM_JOB_ENV = "BURNIN_SIM_JOB_NODES"
"""Names a simulated job's members: the simulated tools model the group (burnin.sim.fabric, burnin.sim.megatron)."""


def add_arguments(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--sim", nargs="?", type=int, const=DEFAULT_NODES, metavar="N",
                       help=f"run on N simulated nodes sim01..simNN (default {DEFAULT_NODES})")
    group.add_argument("--fault", action="append", default=[], metavar="NODE:FAULT",
                       help="inject a simulator fault, e.g. sim03:nvlink-down (repeatable; see `burnin faults`)")


def implied(args: argparse.Namespace) -> bool:
    return getattr(args, "sim", None) is not None


def refuse_unused(args: argparse.Namespace) -> None:
    if getattr(args, "fault", None):
        raise UsageError("--fault needs --sim (faults are injected into simulated nodes)")
    if getattr(args, "sim", None) is not None:
        raise UsageError(f"--sim runs on simulated nodes: it does not go with --via {args.via}")


def open_dispatcher(args: argparse.Namespace, context: DispatchContext) -> SimDispatcher:
    """``--sim N`` (or ``--via sim``) with ``--fault`` items; a fault of a suite that is not run is refused.

    The rack goes to ``context.state_dir`` when there is one (kept: ``burnin soak --resume``
    renders it again there), else to a scratch folder removed on close.
    """
    from burnin.nodes import sim_names

    count = args.sim if getattr(args, "sim", None) is not None else DEFAULT_NODES
    names = sim_names(count)
    faults = parse_fault_args(list(getattr(args, "fault", []) or []), names)
    refuse_faults_outside(faults, context.suites)
    if context.state_dir is not None:
        return SimDispatcher(context.state_dir, context.topology, names, faults, owned=False)
    return SimDispatcher(scratch_dir(), context.topology, names, faults, owned=True)


def parse_fault_args(values: list[str], names: list[str]) -> dict[str, list[object]]:
    """``["sim03:nvlink-down", "sim06:ib-rate-200@mlx5_1"]`` → faults per node."""
    from burnin.sim import parse_fault_spec

    faults: dict[str, list[object]] = {}
    for value in values:
        node, sep, spec = value.partition(":")
        if not sep or not spec:
            raise UsageError(f"--fault {value!r}: expected NODE:FAULT, e.g. sim03:nvlink-down")
        if node not in names:
            raise UsageError(f"--fault {value!r}: no simulated node {node!r} (nodes: {names[0]}..{names[-1]})")
        faults.setdefault(node, []).append(parse_fault_spec(spec))
    return faults


def refuse_faults_outside(faults: Mapping[str, Sequence[object]], suites: Sequence[str]) -> None:
    """A fault that only a suite not in this run could catch is a usage error (it would change nothing judged).

    Node faults change the node itself, which every suite reads; a fault of a measuring
    suite (fabric, megatron) acts only in that suite's runs; soak faults need ``burnin soak``.
    """
    running = {Path(s).name for s in suites}
    for node, node_faults in faults.items():
        for fault in node_faults:
            suite = _suite_of(fault)
            if suite == "node" or suite in running:
                continue
            label = getattr(fault, "label", None) or getattr(getattr(fault, "spec", None), "name", "?")
            how = ("run it with burnin soak" if suite == "soak" else
                   f"run it with burnin run --suite {suite}" if "soak" in running else f"add --suite {suite}")
            raise UsageError(f"--fault {node}:{label} acts only in the {suite} suite, which this run "
                             f"does not run: {how}")


def _suite_of(fault: object) -> str:
    """The suite a fault acts in (``node``: the node itself, which every suite reads)."""
    return str(getattr(getattr(fault, "spec", None), "suite", "node"))


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
    remove_abandoned(base or Path(tempfile.gettempdir()))
    # No signal between creating the folder and recording it: an interrupt must find it.
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        path = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-", dir=base))
        _SCRATCH.add(path)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    return path


def remove_abandoned(base: Path) -> list[Path]:
    """Remove the scratch folders in ``base`` whose process is gone (killed: SIGKILL leaves no chance to clean).

    A rack is about 1,500 files a node on tmpfs, so a few killed runs would fill /dev/shm's inodes. Only
    this user's folders are touched, and only where no process has the pid in the name (a pid reused
    since keeps its folder: the safe side). Returns what was removed.
    """
    removed: list[Path] = []
    try:
        entries = list(base.iterdir())
    except OSError:
        return removed
    for folder in entries:
        pid_text = folder.name[len(SCRATCH_PREFIX):].partition("-")[0]
        if not folder.name.startswith(SCRATCH_PREFIX) or not pid_text.isdigit():
            continue
        try:
            if folder.lstat().st_uid != os.getuid() or not folder.is_dir() or folder.is_symlink():
                continue
            os.kill(int(pid_text), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
        except (OSError, OverflowError, ValueError):  # alive under another user, or no such folder any more
            continue
    return removed


def remove_scratch(path: Path | None = None) -> None:
    """Remove ``path`` (default: every scratch folder this process made and still holds)."""
    for folder in [path] if path is not None else sorted(_SCRATCH):
        shutil.rmtree(folder, ignore_errors=True)
        _SCRATCH.discard(folder)


class SimDispatcher:
    """N simulated nodes built under ``state_dir`` from a topology and faults.

    With ``owned=True`` the state folder is removed by :meth:`close`. Faults that
    unfold over a soak (``FaultSpec.suite == "soak"``) are not rendered into the
    rack: they act through :meth:`simulated_time`'s world.
    """

    name = "sim"

    def __init__(self, state_dir: Path, topology: Topology, names: list[str],
                 faults: Mapping[str, list[object]], *, owned: bool = False, render: bool = True) -> None:
        """``render=False``: the nodes already rendered in ``state_dir`` as they are (``burnin repair --rack``:
        what a reset or a reboot left on them), not rendered again from ``faults``."""
        from burnin.sim import SimNode, build_rack
        from burnin.transport.local import LocalTransport

        self.nodes = names
        self._state_dir = state_dir
        self._owned = owned
        self.topology_by_node: dict[str, str] = {}
        rack_faults = {node: [f for f in items if _suite_of(f) != "soak"] for node, items in faults.items()}
        self._timed = {node: [f for f in items if _suite_of(f) == "soak"] for node, items in faults.items()}
        try:
            if any(self._timed.values()):
                from burnin.sim.faults import validate_fault

                self._timed = {node: [validate_fault(f, topology) for f in items]  # type: ignore[arg-type]
                               for node, items in self._timed.items() if items}
            rack = build_rack(state_dir, topology, names, dict(rack_faults)) if render else [  # type: ignore[arg-type]
                SimNode.load(state_dir / "nodes" / name) for name in names]
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
        """The collector launched on every node, as each node."""
        from burnin.launch.gather import gather

        return gather(self.launcher({}), self.nodes, sources=sources, timeout=timeout, on_done=on_done)

    def launcher(self, facts: Mapping[str, Facts], *, log: CommandLog | None = None) -> LocalLauncher:
        """Commands run locally as each node; a multi-node job may run as one process that models the group."""
        from burnin.launch.local import LocalLauncher
        from burnin.launch.log import NO_LOG

        del facts  # simulated whatever the nodes reported
        return LocalLauncher(self._transport, sim_job_env, log=log or NO_LOG)


    @property
    def transport(self) -> LocalTransport:
        """The local transport with each node's environment (phases and the soak run through it)."""
        return self._transport

    def simulated_time(self, duration_s: float) -> Callable[[float], None]:
        """The rack under load on a simulated clock (:mod:`burnin.sim.soak`): the hook that brings every
        node, and the faults that unfold over a run of ``duration_s``, to a new time."""
        from burnin.sim.soak import SoakWorld, load_rack

        world = SoakWorld(load_rack(self._state_dir, self.nodes), self._timed,  # type: ignore[arg-type]
                          duration_s=duration_s)
        return world.advance

    def close(self) -> None:
        self._transport.close()
        if self._owned:
            remove_scratch(self._state_dir)


def sim_job_env(nodes: Sequence[str]) -> dict[str, str]:
    """What makes a command run on a simulated node a job over ``nodes``."""
    return {SIM_JOB_ENV: ",".join(nodes)}
