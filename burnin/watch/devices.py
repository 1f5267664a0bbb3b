"""This node's own devices, from sysfs below the node's root: the only devices the kernel log may act on.

A kernel line names its device: the GPU's PCI bus (``NVRM: Xid (PCI:0000:1b:00)``),
the NVSwitch's or HCA's PCI function, the IPoIB interface. The watch acts only
when that device is one of this node's: a PCI function of the vendor
(``/sys/bus/pci/devices/*/vendor``: NVIDIA ``0x10de``, Mellanox ``0x15b3``), a
GPU being an NVIDIA display or 3D controller (class ``0x03....``), an interface
being listed in ``/sys/class/net``. NVML's GPUs count too (the daemon adds
them). A line about another device is recorded, never acted on.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from burnin.watch.events import gpu_bus

NVIDIA = "0x10de"
MELLANOX = "0x15b3"
DISPLAY_CLASS = "0x03"  # PCI base class 03: display controller (VGA 0x0300, 3D 0x0302)


@dataclass(frozen=True, slots=True)
class NodeDevices:
    gpus: frozenset[str] = frozenset()  # GPU buses: 0000:1b:00
    nvidia: frozenset[str] = frozenset()  # every NVIDIA PCI function (GPUs, NVSwitches): 0000:83:00.0
    hcas: frozenset[str] = frozenset()  # Mellanox PCI functions: 0000:4f:00.0
    netdevs: frozenset[str] = frozenset()  # network interfaces: ibp24s0

    def with_gpus(self, buses: frozenset[str] | set[str]) -> NodeDevices:
        """These devices and the GPUs at ``buses`` (NVML's)."""
        return NodeDevices(self.gpus | {gpu_bus(bus) for bus in buses}, self.nvidia, self.hcas, self.netdevs)

    def has_gpu(self, bus: str) -> bool:
        return gpu_bus(bus) in self.gpus

    def has_nvidia_function(self, function: str) -> bool:
        return function.lower() in self.nvidia

    def has_hca(self, function: str) -> bool:
        return function.lower() in self.hcas

    def has_netdev(self, name: str) -> bool:
        return name in self.netdevs


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip().lower()
    except OSError:
        return ""


def _listing(path: Path) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def read_devices(root: str) -> NodeDevices:
    """The node's GPUs, NVIDIA and Mellanox PCI functions and network interfaces below ``root``."""
    gpus: set[str] = set()
    nvidia: set[str] = set()
    hcas: set[str] = set()
    pci = Path(root) / "sys/bus/pci/devices"
    for function in _listing(pci):
        vendor = _read(pci / function / "vendor")
        if vendor == NVIDIA:
            nvidia.add(function.lower())
            if _read(pci / function / "class").startswith(DISPLAY_CLASS):
                gpus.add(gpu_bus(function))
        elif vendor == MELLANOX:
            hcas.add(function.lower())
    netdevs = frozenset(_listing(Path(root) / "sys/class/net"))
    return NodeDevices(frozenset(gpus), frozenset(nvidia), frozenset(hcas), netdevs)


def hca_labels(root: str) -> dict[str, str]:
    """PCI function (``0000:4c:00.0``) -> HCA name (``mlx5_2``), from sysfs below ``root``."""
    labels: dict[str, str] = {}
    base = Path(root) / "sys/class/infiniband"
    for name in _listing(base):
        try:
            labels[Path(os.path.realpath(base / name / "device")).name.lower()] = name
        except OSError:
            continue
    return labels
