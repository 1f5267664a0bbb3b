"""sysfs and procfs facts, read below a root directory (``/`` on real nodes)."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing on every collector start
if TYPE_CHECKING:
    from typing import Any

# PCI vendors whose devices (and the bridges above them) matter to GPU nodes.
NVIDIA = "0x10de"
MELLANOX = "0x15b3"
_PCI_FILES = (
    "vendor", "device", "class", "numa_node", "current_link_speed", "current_link_width",
    "max_link_speed", "max_link_width", "local_cpulist",
)
_IB_COUNTERS = (
    "symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors",
    "port_rcv_remote_physical_errors", "port_rcv_switch_relay_errors", "port_xmit_discards",
    "port_xmit_constraint_errors", "port_rcv_constraint_errors", "port_rcv_contraint_errors",
    "local_link_integrity_errors", "excessive_buffer_overrun_errors", "VL15_dropped",
)


_READ_FLAGS = os.O_RDONLY | os.O_CLOEXEC
_FIRST_READ = 8192
"""Bytes asked for by a file's first read: more than a sysfs attribute holds (a page)."""


def _path(root: str, *parts: str) -> str:
    return os.path.join(root, *(p.lstrip("/") for p in parts))


_pass = threading.local()
"""``reads``: what this thread read in its current :func:`one_pass` (path -> text or the OSError), when in one."""


@contextmanager
def one_pass() -> Iterator[None]:
    """In this thread, until the block ends, a file is read once: sources that read the same attributes (the PCI
    census and the PCI source both read every function's ``vendor``, ``device`` and ``class``) share one read.
    One pass is one gathering: nothing is kept past it."""
    _pass.reads = {}
    try:
        yield
    finally:
        _pass.reads = None


def read_file(path: str) -> str:
    """The file's text, stripped; OSError if unreadable. Read once per :func:`one_pass`, when in one."""
    reads: dict[str, str | OSError] | None = getattr(_pass, "reads", None)
    if reads is None:
        return _read_file(path)
    known = reads.get(path)
    if known is None:
        try:
            known = reads[path] = _read_file(path)
        except OSError as exc:
            reads[path] = exc
            raise
    elif isinstance(known, OSError):
        raise known
    return known


def _read_file(path: str) -> str:
    """The file's text, stripped (bad bytes replaced, line ends as text mode reads them); OSError if unreadable.

    Plain ``os.open``/``os.read``: a sysfs attribute costs a quarter of what ``open()`` does, and the
    probe reads some 1,500 of them. A sysfs attribute (at most a page) comes whole in the first read, and
    a regular file ends where a read comes back short: only procfs (whose files may come a page at a time)
    and a read that filled its buffer are read on to the end.
    """
    fd = os.open(path, _READ_FLAGS)
    try:
        data = os.read(fd, _FIRST_READ)
        if len(data) == _FIRST_READ or "/proc/" in path:
            chunks = [data]
            while chunk := os.read(fd, 65536):
                chunks.append(chunk)
            data = b"".join(chunks)
    finally:
        os.close(fd)
    text = data.decode("utf-8", "replace")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text.strip()


def read_text(path: str) -> str | None:
    """The file's text, stripped; None when it cannot be read."""
    try:
        return read_file(path)
    except OSError:
        return None


def _read_int(path: str) -> int | None:
    text = read_text(path)
    if text is None:
        return None
    try:
        return int(text, 0)
    except ValueError:
        return None


class RealPaths:
    """``os.path.realpath`` for many paths under a few shared folders, each folder resolved once.

    sysfs names every PCI function through a symlink into ``/sys/devices``; resolving 60 of them
    one by one ``lstat``s the same dozen folders each time. One instance serves one pass of a
    source (never kept between probes: a link may change); the answers are realpath's own
    (non-strict: a component that does not exist is kept as written), and a symlink loop is
    left to realpath itself.
    """

    _MAX_LINKS = 40  # what Linux follows before ELOOP

    def __init__(self) -> None:
        self._known: dict[str, str] = {}

    def __call__(self, path: str) -> str:
        try:
            return self._resolve("/", path if path.startswith("/") else f"{os.getcwd()}/{path}", 0)
        except _Loop:
            return os.path.realpath(path)

    def _resolve(self, base: str, rest: str, links: int) -> str:
        current = "/" if rest.startswith("/") else base
        for name in rest.split("/"):
            if name in ("", "."):
                continue
            if name == "..":
                current = os.path.dirname(current)
                continue
            path = current + name if current.endswith("/") else f"{current}/{name}"
            known = self._known.get(path)
            if known is None:
                try:
                    target = os.readlink(path)
                except OSError:  # not a link, or not there: realpath keeps it as written
                    known = path
                else:
                    if links >= self._MAX_LINKS:
                        raise _Loop
                    known = self._resolve(current, target, links + 1)
                self._known[path] = known
            current = known
        return current


class _Loop(Exception):
    """More links than Linux follows: realpath decides."""


def _relative_to_root(real_root: str, real: str) -> str:
    if real_root != "/" and real.startswith(real_root):
        real = real[len(real_root):] or "/"
    return real


def _pci_device(dev_dir: str, real_dir: str, real_root: str, vendor: str | None = None) -> dict[str, Any]:
    """The function's attributes (read in ``dev_dir``; ``vendor`` when already read in this pass) and its
    canonical sysfs path (``real_dir``) below the root."""
    info: dict[str, Any] = {}
    for name in _PCI_FILES:
        info[name] = vendor if name == "vendor" and vendor is not None else read_text(f"{dev_dir}/{name}")
    numa = info.get("numa_node")
    info["numa_node"] = int(numa) if numa not in (None, "") and numa.lstrip("-").isdigit() else None
    width = info.get("current_link_width")
    info["current_link_width"] = int(width) if width and width.isdigit() else None
    width = info.get("max_link_width")
    info["max_link_width"] = int(width) if width and width.isdigit() else None
    info["path"] = _relative_to_root(real_root, real_dir)
    return info


def collect_pci(root: str) -> dict[str, Any]:
    """NVIDIA and Mellanox PCI functions plus every bridge above them."""
    bus_dir = _path(root, "sys/bus/pci/devices")
    realpath = RealPaths()
    real_root = realpath(root)
    devices: dict[str, Any] = {}
    names = sorted(os.listdir(bus_dir))
    for bdf in names:
        dev_dir = f"{bus_dir}/{bdf}"
        vendor = read_text(f"{dev_dir}/vendor")
        if vendor not in (NVIDIA, MELLANOX):
            continue
        real_dir = realpath(dev_dir)
        devices[bdf] = _pci_device(dev_dir, real_dir, real_root, vendor)
        # Walk up the hierarchy so switch ports and root ports are known too (a canonical path's
        # parents are canonical: no symlink left to resolve).
        parent = os.path.dirname(real_dir)
        while os.path.basename(parent).count(":") == 2 and os.path.basename(parent) not in devices:
            devices[os.path.basename(parent)] = _pci_device(parent, parent, real_root)
            parent = os.path.dirname(parent)
    return {"devices": devices}


def collect_infiniband(root: str) -> dict[str, Any]:
    """Every RDMA device with its firmware, PCI address and per-port state and counters."""
    class_dir = _path(root, "sys/class/infiniband")
    if not os.path.isdir(class_dir):
        return {"hcas": {}, "present": False}
    hcas: dict[str, Any] = {}
    realpath = RealPaths()
    for hca in sorted(os.listdir(class_dir)):
        hca_dir = f"{class_dir}/{hca}"
        device_link = f"{hca_dir}/device"
        pci = os.path.basename(realpath(device_link)) if os.path.exists(device_link) else None
        ports: dict[str, Any] = {}
        ports_dir = f"{hca_dir}/ports"
        for port in sorted(os.listdir(ports_dir)) if os.path.isdir(ports_dir) else []:
            port_dir = f"{ports_dir}/{port}"
            counters: dict[str, int] = {}
            for counter in _IB_COUNTERS:
                value = _read_int(f"{port_dir}/counters/{counter}")
                if value is not None:
                    counters[counter] = value
            ports[port] = {
                "state": read_text(f"{port_dir}/state"),
                "phys_state": read_text(f"{port_dir}/phys_state"),
                "rate": read_text(f"{port_dir}/rate"),
                "link_layer": read_text(f"{port_dir}/link_layer"),
                "lid": read_text(f"{port_dir}/lid"),
                "sm_lid": read_text(f"{port_dir}/sm_lid"),
                "counters": counters,
            }
        hcas[hca] = {
            "fw_ver": read_text(f"{hca_dir}/fw_ver"),
            "board_id": read_text(f"{hca_dir}/board_id"),
            "hca_type": read_text(f"{hca_dir}/hca_type"),
            "node_guid": read_text(f"{hca_dir}/node_guid"),
            "pci": pci,
            "ports": ports,
        }
    return {"hcas": hcas, "present": True}


def collect_numa(root: str) -> dict[str, Any]:
    node_dir = _path(root, "sys/devices/system/node")
    nodes: dict[str, Any] = {}
    if os.path.isdir(node_dir):
        for name in sorted(os.listdir(node_dir)):
            if name.startswith("node") and name[4:].isdigit():
                nodes[name[4:]] = {"cpulist": read_text(f"{node_dir}/{name}/cpulist")}
    return {"online": read_text(f"{node_dir}/online"), "nodes": nodes}


def collect_kernel(root: str) -> dict[str, Any]:
    groups_dir = _path(root, "sys/kernel/iommu_groups")
    group_types: dict[str, int] = {}
    if os.path.isdir(groups_dir):
        for group in os.listdir(groups_dir):
            kind = read_text(f"{groups_dir}/{group}/type") or "unknown"
            group_types[kind] = group_types.get(kind, 0) + 1
    return {
        "numa_balancing": _read_int(_path(root, "proc/sys/kernel/numa_balancing")),
        "cmdline": read_text(_path(root, "proc/cmdline")),
        "nvidia_module_version": read_text(_path(root, "sys/module/nvidia/version")),
        "proc_driver_version": read_text(_path(root, "proc/driver/nvidia/version")),
        "modules": {
            name: os.path.isdir(_path(root, "sys/module", name))
            for name in ("nvidia", "nvidia_peermem", "nv_peer_mem", "nvidia_uvm")
        },
        "iommu_group_types": group_types,
    }
