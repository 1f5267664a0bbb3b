"""Render simulated nodes to disk and run them: SimNode, build_rack, apply_fault, clear_faults.

A node directory (``<state_dir>/nodes/<name>/``) holds::

    node.json            the NodeState every file below is rendered from
    nvml.state           key=value state the simulated libnvidia-ml.so.1 reads at nvmlInit
    lib/libnvidia-ml.so.1 -> the compiled library in the user's cache
    root/                sysfs and procfs (BURNIN_ROOT)
    bin/                 shim commands (nvidia-smi, ibstat, dmesg, lspci, systemctl, setpci, lsmod)
    out/                 the pre-rendered outputs the shims print

Re-rendering is idempotent: a new node is written under a temporary name and
renamed into place; an existing (maybe running) node is updated file by file,
each change atomic, unchanged files untouched (burnin.sim.writer).
"""

from __future__ import annotations

import os
import signal
import sys
import time
import uuid
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from burnin import waits
from burnin.errors import UsageError
from burnin.sim import bytecode, job, storage
from burnin.sim.addressing import plan as address_plan
from burnin.sim.events import record_changes
from burnin.sim.faults import Fault, parse_fault_spec, validate_fault
from burnin.sim.formats import storage_tools
from burnin.sim.inject import apply_faults
from burnin.sim.nvml import LIBRARY_NAME, library_path, render_state
from burnin.sim.sdc import prepare_rack_cache, sdc_torch_path
from burnin.sim.shims import render_outputs, render_scripts
from burnin.sim.state import NodeState, healthy_state, topology_from_dict
from burnin.sim.sysfs import Tree, render_root
from burnin.sim.writer import replace_file, sync_tree
from burnin.topology.model import Topology

STATE_FILE = "node.json"
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
NVML_STATE = "nvml.state"
TRACE_ENV = "BURNIN_SIM_TRACE"
"""Names a file to which every shim of every node appends ``<node> <tool> <arguments>`` as it starts (unset: no
trace). What ran on a simulated node is seen from the node's side: tests prove that a dry run starts nothing."""


@dataclass(frozen=True)
class SimNode:
    """A rendered simulated node: its name and directory."""

    name: str
    dir: Path

    @property
    def root(self) -> Path:
        """The sysfs/procfs root the collector reads (``--root`` / ``BURNIN_ROOT``)."""
        return self.dir / "root"

    @property
    def bin_dir(self) -> Path:
        return self.dir / "bin"

    @property
    def lib_dir(self) -> Path:
        return self.dir / "lib"

    @property
    def nvml_state(self) -> Path:
        return self.dir / NVML_STATE

    def environment(self) -> dict[str, str]:
        """Variables a process needs to run as this node (merge them over ``os.environ``)."""
        path = os.environ.get("PATH", os.defpath)
        ld_path = os.environ.get("LD_LIBRARY_PATH", "")
        return {
            "PATH": f"{self.bin_dir}{os.pathsep}{path}",
            "LD_LIBRARY_PATH": str(self.lib_dir) + (f"{os.pathsep}{ld_path}" if ld_path else ""),
            "BURNIN_ROOT": str(self.root),
            "BURNIN_SIM_NVML": str(self.nvml_state),
            "BURNIN_SIM_NODE": self.name,
            "BURNIN_SIM_SDC_PYTHON": sys.executable,  # GPU-14's workload needs torch (burnin.sim.sdc)
            **sdc_torch_path(),
        }

    def state(self) -> NodeState:
        return NodeState.model_validate_json((self.dir / STATE_FILE).read_text(encoding="utf-8"))

    def topology(self) -> Topology:
        return topology_from_dict(self.state().topology)

    @property
    def faults(self) -> list[Fault]:
        topology = self.topology()
        return [parse_fault_spec(text, topology) for text in self.state().faults]

    @classmethod
    def load(cls, node_dir: Path) -> SimNode:
        """The node rendered in ``node_dir`` (raises UsageError when it holds none)."""
        node_dir = Path(node_dir)
        state_file = node_dir / STATE_FILE
        if not state_file.is_file():
            raise UsageError(f"{node_dir} is not a simulated node directory (no {STATE_FILE})")
        state = NodeState.model_validate_json(state_file.read_text(encoding="utf-8"))
        return cls(state.name, node_dir)


# ---------------------------------------------------------------- writing


def _link_library(node_dir: Path, library: Path) -> None:
    lib_dir = node_dir / "lib"
    lib_dir.mkdir(exist_ok=True)
    for name in (LIBRARY_NAME, "libnvidia-ml.so"):
        link = lib_dir / name
        if link.is_symlink() and os.readlink(link) == str(library):
            continue
        tmp = lib_dir / f".{name}.{os.getpid()}-{uuid.uuid4().hex[:8]}"
        os.symlink(library, tmp)
        os.replace(tmp, link)


def _traced(node: str, script: str) -> str:
    """``script`` with a first line that appends its invocation to ``$BURNIN_SIM_TRACE`` when that is set."""
    shebang, _, body = script.partition("\n")
    trace = f'[ -z "${TRACE_ENV}" ] || printf \'%s\\n\' "{node} ${{0##*/}} $*" >> "${TRACE_ENV}"'
    return f"{shebang}\n{trace}\n{body}"


def render_node(node_dir: Path, state: NodeState, library: Path | None = None) -> SimNode:
    """Write every file of ``state`` into ``node_dir`` (created if needed)."""
    node_dir.mkdir(parents=True, exist_ok=True)
    _link_library(node_dir, library or library_path())
    replace_file(node_dir / NVML_STATE, render_state(state))
    kernel_network = (node_dir / storage.KERNEL_NETWORK_MARK).exists()
    sync_tree(node_dir, "root", storage.extend_root(render_root(state), state, kernel_network=kernel_network))
    outputs = Tree()
    outputs.files.update(render_outputs(state, time.time()))
    outputs.files.update(storage_tools.outputs(state))
    sync_tree(node_dir, "out", outputs)
    bytecode.write_caches(node_dir / "out", outputs.files)
    scripts = Tree()
    scripts.files.update(render_scripts(state))
    scripts.files.update(storage_tools.render_scripts(state))
    scripts.files = {tool: _traced(state.name, text) for tool, text in scripts.files.items()}
    sync_tree(node_dir, "bin", scripts, mode=0o755)
    replace_file(node_dir / STATE_FILE, state.model_dump_json(indent=1))
    job.write_marker(node_dir, state)  # what a running job's traffic pump advances (faults job-*)
    return SimNode(state.name, node_dir)


# ----------------------------------------------------------------- public


def _as_faults(items: Iterable[Fault | str], topology: Topology) -> list[Fault]:
    return [parse_fault_spec(item, topology) if isinstance(item, str) else validate_fault(item, topology)
            for item in items]


def build_node(node_dir: Path, topology: Topology, name: str, faults: Iterable[Fault | str] = (),
               library: Path | None = None) -> SimNode:
    """Render one node of ``topology`` named ``name`` with ``faults`` into ``node_dir``."""
    state = healthy_state(topology, name)
    apply_faults(state, _as_faults(faults, topology))
    return render_node(Path(node_dir), state, library)


def build_rack(state_dir: Path, topology: Topology, names: list[str],
               faults: Mapping[str, Iterable[Fault | str]] | None = None) -> list[SimNode]:
    """Render ``state_dir/nodes/<name>/`` for every name (re-rendering existing ones).

    A rack the address plan cannot give distinct addresses (too many nodes, two names of one number)
    is refused first (burnin.sim.addressing).
    """
    address_plan(topology).check_rack(names)
    faults = faults or {}
    unknown = sorted(set(faults) - set(names))
    if unknown:
        raise UsageError(f"faults given for unknown node(s) {', '.join(unknown)}; "
                         f"simulated nodes are {', '.join(names)}")
    checked = {name: _as_faults(faults.get(name, ()), topology) for name in names}
    library = library_path()
    nodes_dir = Path(state_dir) / "nodes"
    nodes_dir.mkdir(parents=True, exist_ok=True)
    prepare_rack_cache(nodes_dir)

    def build(name: str) -> SimNode:
        return build_node(nodes_dir / name, topology, name, checked[name], library)

    # Rendering is mostly file-system calls, which release the GIL: a few threads overlap them.
    workers = max(1, min(len(names), os.cpu_count() or 1, 4))
    if workers == 1:
        return [build(name) for name in names]
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="burnin-sim")
    try:
        # An interrupt raised while the pool starts a thread would leave that thread unknown to
        # shutdown(), writing on after the scratch is removed: no signal until all are submitted.
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
        try:
            futures = [pool.submit(build, name) for name in names]
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        return [waits.result(future) for future in futures]
    finally:
        # On an interrupt or an error the nodes not yet started are dropped, not rendered,
        # and the ones being rendered are finished before the caller removes anything.
        pool.shutdown(wait=True, cancel_futures=True)


def apply_fault(node_dir: Path, fault: Fault | str) -> None:
    """Add ``fault`` to an existing (maybe running) node, re-render it and emit its events."""
    node = SimNode.load(Path(node_dir))
    topology = node.topology()
    before = node.state()
    build_node(node.dir, topology, node.name, [*node.faults, *_as_faults([fault], topology)])
    record_changes(node.dir, before, node.state())


def clear_faults(node_dir: Path) -> None:
    """Re-render an existing node healthy."""
    node = SimNode.load(Path(node_dir))
    build_node(node.dir, node.topology(), node.name, [])
