"""Simulated H100 nodes for burnin's real collector path.

``build_rack`` renders nodes of a topology, each with a sysfs/procfs tree, shim
commands that print the real tools' formats, and a small C library standing in
for ``libnvidia-ml.so.1`` that the real pynvml loads. Faults (``FAULTS``, parsed
by ``parse_fault_spec``) change one node's state, and every source agrees.
"""

from burnin.sim.build import SimNode, apply_fault, build_node, build_rack, clear_faults
from burnin.sim.faults import FAULTS, Fault, FaultSpec, parse_fault_spec, xid_is_fatal
from burnin.sim.nvml import NvmlBuildError, library_path

__all__ = [
    "FAULTS",
    "Fault",
    "FaultSpec",
    "NvmlBuildError",
    "SimNode",
    "apply_fault",
    "build_node",
    "build_rack",
    "clear_faults",
    "library_path",
    "parse_fault_spec",
    "xid_is_fatal",
]
