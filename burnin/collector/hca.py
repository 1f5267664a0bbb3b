"""HCA port configuration: partition-key tables (sysfs) and ``ibv_devinfo`` (IB-09).

Not among the fast sources: a ConnectX port's pkey table has 128 entries, one
sysfs file each, and ``ibv_devinfo`` is a tool.
"""

from __future__ import annotations

import os

from burnin.collector.commands import run_tool
from burnin.collector.sysfs import read_text

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing on every collector start
if TYPE_CHECKING:
    from typing import Any


def _pkey_table(pkeys_dir: str) -> dict[str, Any]:
    """One port's table: its size, the non-zero entries by index as sysfs prints them, the unreadable indexes."""
    names = sorted(os.listdir(pkeys_dir), key=lambda n: (not n.isdigit(), int(n) if n.isdigit() else 0, n))
    entries: dict[str, str] = {}
    unreadable: list[str] = []
    for name in names:
        text = read_text(os.path.join(pkeys_dir, name))
        if text is None:
            unreadable.append(name)
            continue
        try:
            empty = int(text, 16) == 0
        except ValueError:
            empty = False  # kept as printed: the check says it cannot read it
        if not empty:
            entries[name] = text
    return {"size": len(names), "pkeys": entries, "unreadable": unreadable}


def collect_ib_pkeys(root: str) -> dict[str, Any]:
    """Every RDMA port's partition-key table (``/sys/class/infiniband/<hca>/ports/<n>/pkeys/<index>``)."""
    class_dir = os.path.join(root, "sys/class/infiniband")
    if not os.path.isdir(class_dir):
        return {"hcas": {}, "present": False}
    hcas: dict[str, Any] = {}
    for hca in sorted(os.listdir(class_dir)):
        ports_dir = os.path.join(class_dir, hca, "ports")
        ports: dict[str, Any] = {}
        for port in sorted(os.listdir(ports_dir)) if os.path.isdir(ports_dir) else []:
            pkeys_dir = os.path.join(ports_dir, port, "pkeys")
            ports[port] = _pkey_table(pkeys_dir) if os.path.isdir(pkeys_dir) else None
        hcas[hca] = ports
    return {"hcas": hcas, "present": True}


def ibv_devinfo(root: str, timeout: float) -> dict[str, Any]:
    """``ibv_devinfo`` (rdma-core): every device's ports with their state and active MTU."""
    return run_tool(["ibv_devinfo"], timeout)
