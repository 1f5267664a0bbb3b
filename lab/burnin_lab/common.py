"""What every simulated rack shares: its node dirs and runtime fault injection."""

from __future__ import annotations

from pathlib import Path

from burnin.errors import UsageError


def node_dir(state: Path, node: str) -> Path:
    path = state / "nodes" / node
    if not (path / "node.json").exists():
        raise UsageError(f"no simulated node {node!r} in {state}")
    return path


def inject_fault(state: Path, node: str, fault: str) -> None:
    """Change a running simulated node: the next probe or run sees the fault."""
    from burnin.sim import apply_fault, clear_faults, parse_fault_spec

    directory = node_dir(state, node)
    if fault == "clear":
        clear_faults(directory)
    else:
        apply_fault(directory, parse_fault_spec(fault))
    from burnin_lab.ssh import refresh_kernel_network

    refresh_kernel_network(state, node)
