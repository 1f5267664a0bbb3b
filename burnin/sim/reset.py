"""A simulated node's GPU reset and reboot: each clears the transient faults it reaches, never a persistent one.

- :func:`reset_gpu` is what ``nvidia-smi -r -i N`` does on a simulated node (the shim runs
  ``python -m burnin.sim.reset gpu NODE_DIR N``): the transient faults of ``gpuN`` go, the node is rendered
  again; it prints what the real tool prints (``GPU 00000000:BB:00.0 was successfully reset.``);
- :func:`reboot` clears every transient fault of the node (the lab's Slurm RebootProgram runs
  ``python -m burnin.sim.reset reboot NODE_DIR``; a test's fake ``scontrol reboot`` calls it).

A persistent fault (written without ``transient:``, burnin.sim.faults) survives both, as a broken part does.
"""

from __future__ import annotations

import sys
from pathlib import Path

from burnin.errors import UsageError
from burnin.sim.build import SimNode, build_node
from burnin.sim.events import record_changes

NOT_FOUND_RC = 6
"""What nvidia-smi exits with for a GPU index it does not have (NVML_ERROR_NOT_FOUND)."""


def _keep(node: SimNode, keep: object) -> list[str]:
    """Re-render ``node`` with the faults ``keep`` accepts; the labels of the faults cleared."""
    faults = node.faults
    kept = [f for f in faults if keep(f)]  # type: ignore[operator]
    cleared = [str(f) for f in faults if f not in kept]
    if cleared:
        before = node.state()
        build_node(node.dir, node.topology(), node.name, kept)
        record_changes(node.dir, before, node.state())
    return cleared


def reset_gpu(node_dir: Path, index: int) -> tuple[str | None, list[str]]:
    """Reset ``gpu<index>``: its PCI address (None when the node has no such GPU) and the faults cleared."""
    node = SimNode.load(node_dir)
    device = next((d for d in node.topology().gpus.devices if d.index == index), None)
    if device is None:
        return None, []
    target = f"gpu{index}"
    return device.bus_id, _keep(node, lambda f: not (f.transient and f.target == target))


def reboot(node_dir: Path) -> list[str]:
    """Reboot the node: every transient fault cleared; the faults cleared."""
    return _keep(SimNode.load(node_dir), lambda f: not f.transient)


def _bus(bus_id: str) -> str:
    """``0000:19:00.0`` as nvidia-smi prints it: ``00000000:19:00.0``."""
    domain, _, rest = bus_id.partition(":")
    return f"{int(domain, 16):08X}:{rest.upper()}"


def main(argv: list[str]) -> int:
    """``gpu NODE_DIR INDEX`` or ``reboot NODE_DIR``."""
    try:
        if len(argv) == 3 and argv[0] == "gpu" and argv[2].isdigit():
            bus_id, _ = reset_gpu(Path(argv[1]), int(argv[2]))
            if bus_id is None:
                print(f"No GPU with index {argv[2]} found", file=sys.stderr)
                return NOT_FOUND_RC
            print(f"GPU {_bus(bus_id)} was successfully reset.\nAll done.")
            return 0
        if len(argv) == 2 and argv[0] == "reboot":
            cleared = reboot(Path(argv[1]))
            print(f"rebooted {Path(argv[1]).name}: cleared {', '.join(cleared) or 'no transient fault'}")
            return 0
    except UsageError as exc:
        print(exc, file=sys.stderr)
        return 2
    print("usage: python -m burnin.sim.reset gpu NODE_DIR INDEX | reboot NODE_DIR", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
