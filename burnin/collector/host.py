"""Host configuration facts (TOP-06, 07, 09, 10), as raw text read below a root.

``host``: CPU frequency governors, CPUs online, memory (``/proc/meminfo`` and each
NUMA node's), transparent and static hugepages. ``pci-census``: vendor, device
and class of every PCI function on the bus. The controller's parsers
(burnin.parsers.hostmem) and checks read them; nothing here interprets values.
"""

from __future__ import annotations

import os

from burnin.collector.sysfs import read_file

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing on every collector start
if TYPE_CHECKING:
    from typing import Any

_CPU_DIR = "sys/devices/system/cpu"
_NODE_DIR = "sys/devices/system/node"
_THP_DIR = "sys/kernel/mm/transparent_hugepage"
_HUGEPAGES_DIR = "sys/kernel/mm/hugepages"


def _path(root: str, *parts: str) -> str:
    return os.path.join(root, *(p.lstrip("/") for p in parts))


def _read(path: str, errors: dict[str, str] | None = None) -> str | None:
    """The file's text, stripped; None when it does not exist (and, with ``errors``, when unreadable)."""
    try:
        return read_file(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if errors is not None:
            errors[path] = f"{type(exc).__name__}: {exc.strerror or exc}"
        return None


def _numbered(directory: str, prefix: str) -> list[str]:
    """``cpu0``, ``cpu1``... (or ``node0``...) in ``directory``, numerically; [] when it is absent."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    found = [n for n in names if n.startswith(prefix) and n[len(prefix):].isdigit()]
    return sorted(found, key=lambda n: int(n[len(prefix):]))


def collect_host(root: str) -> dict[str, Any]:
    """CPU governors and online list, meminfo of the host and of each NUMA node, hugepage settings."""
    errors: dict[str, str] = {}
    cpu_dir = _path(root, _CPU_DIR)
    if not os.path.isdir(cpu_dir):
        raise FileNotFoundError(f"{cpu_dir} does not exist")
    # cpu -> its scaling_governor, or None when the CPU has no cpufreq policy (no driver, or offline);
    # a governor file that exists but cannot be read is in governor_errors instead.
    governors: dict[str, str | None] = {}
    governor_errors: dict[str, str] = {}
    for name in _numbered(cpu_dir, "cpu"):
        failed: dict[str, str] = {}
        governors[name[3:]] = _read(f"{cpu_dir}/{name}/cpufreq/scaling_governor", failed)
        if failed:
            governor_errors[name[3:]] = next(iter(failed.values()))
    node_dir = _path(root, _NODE_DIR)
    node_meminfo = {name[4:]: _read(f"{node_dir}/{name}/meminfo", errors)
                    for name in _numbered(node_dir, "node")}
    hugepages_dir = _path(root, _HUGEPAGES_DIR)
    hugepages: dict[str, str | None] | None = None
    if os.path.isdir(hugepages_dir):
        hugepages = {name: _read(f"{hugepages_dir}/{name}/nr_hugepages", errors)
                     for name in sorted(os.listdir(hugepages_dir)) if name.startswith("hugepages-")}
    return {
        "cpu_online": _read(f"{cpu_dir}/online", errors),
        "cpu_present": _read(f"{cpu_dir}/present", errors),
        "cpufreq_driver": _read(f"{cpu_dir}/cpu0/cpufreq/scaling_driver"),
        "governors": governors,
        "governor_errors": governor_errors,
        "meminfo": _read(_path(root, "proc/meminfo"), errors),
        "node_meminfo": node_meminfo,
        "thp_enabled": _read(_path(root, _THP_DIR, "enabled"), errors),
        "thp_defrag": _read(_path(root, _THP_DIR, "defrag"), errors),
        "hugepages": hugepages,
        "unreadable": errors,
    }


def collect_pci_census(root: str) -> dict[str, Any]:
    """Every PCI function: ``bdf -> [vendor, device, class]`` as sysfs prints them (None: unreadable)."""
    bus_dir = _path(root, "sys/bus/pci/devices")
    functions: dict[str, list[str | None]] = {}
    for bdf in sorted(os.listdir(bus_dir)):
        device_dir = f"{bus_dir}/{bdf}"
        functions[bdf] = [_read(f"{device_dir}/{name}") for name in ("vendor", "device", "class")]
    return {"functions": functions}
