"""Storage-fabric facts (check-catalog 8, STO): netdevs, routes to the storage targets, NCCL config, sysctls.

Two sources, standard library only:

``storage`` (cheap, read-only; the health probe gathers it):
  - ``/sys/class/net/*``: PCI function (``device`` link), ARP type (1 Ethernet,
    32 InfiniBand), MTU, state, VRF/bond master, byte counters, ECN knobs;
  - ``/sys/class/infiniband/*/device``: each RDMA device's PCI function;
  - ``/proc/sys/net/ipv4/conf/*/{rp_filter,arp_ignore,arp_announce}``;
  - ``/etc/nccl.conf`` (and ``$NCCL_CONF_FILE``), and the ``NCCL_*`` variables
    of this process's environment (what a job started here inherits);
  - ``ip -j addr``, and ``ip -j route get [vrf V] ADDR`` for every storage
    target the controller named (``storage-route=ADDR`` and ``storage-vrf=NAME``
    items of ``--sources``). (``ip -d -j link`` is not run: no check reads it,
    and the health probe would pay a process for it every few minutes.)

``storage-nic`` (vendor tools, slower, root): ``mlxconfig -d BDF q
INTERNAL_CPU_MODEL INTERNAL_CPU_OFFLOAD_ENGINE`` for every Mellanox Ethernet
PCI function 0 and ``mlnx_qos -i NETDEV`` for every Mellanox Ethernet netdev.

A source's commands run side by side through :func:`burnin.collector.commands.run_tools`,
together inside nine tenths of the source's own time. Raw outputs are kept; the
controller's parsers read them.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Callable, Sequence

from burnin.collector.commands import run_tools, tools_time
from burnin.collector.sysfs import RealPaths, read_text

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing on every collector start
if TYPE_CHECKING:
    from typing import Any

ROUTE_ITEM = "storage-route="
VRF_ITEM = "storage-vrf="
MELLANOX = "0x15b3"
ARPHRD_ETHER = 1
_NAME = re.compile(r"^[A-Za-z0-9_.:@-]{1,15}$")
_CONF_SETTINGS = ("rp_filter", "arp_ignore", "arp_announce")
_NCCL_ENV = re.compile(r"^(NCCL|UCX|OMPI_MCA_btl_tcp|OMPI_MCA_oob_tcp)_[A-Za-z0-9_]{1,64}$")
_MAX_CONF_BYTES = 65536


def split_items(sources: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...], str | None]:
    """``--sources`` items -> (source names, storage target addresses, VRF name).

    ``storage-route=ADDR`` items name the addresses whose routes the storage
    source looks up; ``storage-vrf=NAME`` the VRF to look them up in.
    """
    names: list[str] = []
    targets: list[str] = []
    vrf: str | None = None
    for item in sources:
        if item.startswith(ROUTE_ITEM):
            targets.append(item[len(ROUTE_ITEM):])
        elif item.startswith(VRF_ITEM):
            vrf = item[len(VRF_ITEM):]
        else:
            names.append(item)
    return tuple(names), tuple(dict.fromkeys(targets)), vrf


def _path(root: str, *parts: str) -> str:
    return os.path.join(root, *(p.lstrip("/") for p in parts))


def _read_int(path: str) -> int | None:
    text = read_text(path)
    try:
        return int(text, 0) if text is not None else None
    except ValueError:
        return None


def _link_name(path: str, realpath: Callable[[str], str] = os.path.realpath) -> str | None:
    return os.path.basename(realpath(path)) if os.path.lexists(path) else None


def _ecn(net_dir: str) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for point in ("roce_np", "roce_rp"):
        enable_dir = f"{net_dir}/ecn/{point}/enable"
        if not os.path.isdir(enable_dir):
            continue
        values = {prio: _read_int(f"{enable_dir}/{prio}") for prio in sorted(os.listdir(enable_dir))}
        out[point] = {prio: value for prio, value in values.items() if value is not None}
    return out


def collect_netdevs(root: str) -> dict[str, Any]:
    """Every netdev of ``/sys/class/net`` with what STO checks read."""
    class_dir = _path(root, "sys/class/net")
    netdevs: dict[str, Any] = {}
    realpath = RealPaths()
    for name in sorted(os.listdir(class_dir)) if os.path.isdir(class_dir) else []:
        net_dir = f"{class_dir}/{name}"
        device = f"{net_dir}/device"
        pci = _link_name(device, realpath) if os.path.exists(device) else None
        netdevs[name] = {
            "pci": pci,
            "vendor": read_text(f"{device}/vendor") if pci else None,
            "device_id": read_text(f"{device}/device") if pci else None,
            "type": _read_int(f"{net_dir}/type"),
            "mtu": _read_int(f"{net_dir}/mtu"),
            "operstate": read_text(f"{net_dir}/operstate"),
            "address": read_text(f"{net_dir}/address"),
            "dev_port": _read_int(f"{net_dir}/dev_port"),
            "master": _link_name(f"{net_dir}/master", realpath),
            "rx_bytes": _read_int(f"{net_dir}/statistics/rx_bytes"),
            "tx_bytes": _read_int(f"{net_dir}/statistics/tx_bytes"),
            "ecn": _ecn(net_dir),
        }
    return netdevs


def collect_rdma(root: str) -> dict[str, Any]:
    """RDMA device -> its PCI function (``/sys/class/infiniband/<dev>/device``)."""
    class_dir = _path(root, "sys/class/infiniband")
    if not os.path.isdir(class_dir):
        return {}
    realpath = RealPaths()
    return {name: {"pci": _link_name(f"{class_dir}/{name}/device", realpath)}
            for name in sorted(os.listdir(class_dir))}


def collect_conf_sysctls(root: str) -> dict[str, dict[str, int]]:
    """``net.ipv4.conf.<iface>.{rp_filter,arp_ignore,arp_announce}`` for ``all``, ``default`` and each iface."""
    conf_dir = _path(root, "proc/sys/net/ipv4/conf")
    out: dict[str, dict[str, int]] = {}
    for iface in sorted(os.listdir(conf_dir)) if os.path.isdir(conf_dir) else []:
        values = {s: _read_int(f"{conf_dir}/{iface}/{s}") for s in _CONF_SETTINGS}
        out[iface] = {s: v for s, v in values.items() if v is not None}
    return out


def _read_conf(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            data = handle.read(_MAX_CONF_BYTES + 1)
    except FileNotFoundError:
        return {"present": False, "text": None, "error": None}
    except OSError as exc:
        return {"present": True, "text": None, "error": f"{path}: {exc.strerror or exc}"}
    text = data[:_MAX_CONF_BYTES].decode("utf-8", "replace")
    return {"present": True, "text": text, "error": None, "truncated": len(data) > _MAX_CONF_BYTES}


def collect_nccl_config(root: str) -> dict[str, Any]:
    """``/etc/nccl.conf``, ``$NCCL_CONF_FILE`` and the ``NCCL_*``-like variables of this environment."""
    files = {"/etc/nccl.conf": _read_conf(_path(root, "etc/nccl.conf"))}
    conf_file = os.environ.get("NCCL_CONF_FILE")
    if conf_file:
        files[conf_file] = _read_conf(_path(root, conf_file))
    environment = {k: v[:1024] for k, v in sorted(os.environ.items()) if _NCCL_ENV.match(k)}
    return {"files": files, "environment": environment}


def _valid_target(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def collect_storage(root: str, timeout: float, targets: Sequence[str] = (), vrf: str | None = None) -> dict[str, Any]:
    """The ``storage`` source: see the module docstring."""
    bad = [t for t in targets if not _valid_target(t)]
    if bad:
        raise ValueError(f"storage target {bad[0][:64]!r} is not an IP address")
    if vrf is not None and not _NAME.match(vrf):
        raise ValueError(f"VRF name {vrf[:64]!r} is not a netdev name")
    jobs = {"ip_addr": ["ip", "-j", "addr", "show"]}
    for target in targets:
        jobs[f"route:{target}"] = ["ip", "-j", "route", "get", *(["vrf", vrf] if vrf else []), target]
    results = run_tools(jobs, tools_time(timeout))
    return {
        "netdevs": collect_netdevs(root),
        "rdma": collect_rdma(root),
        "sysctl": collect_conf_sysctls(root),
        "nccl": collect_nccl_config(root),
        "vrf": vrf,
        "ip_addr": results["ip_addr"],
        "routes": {target: results[f"route:{target}"] for target in targets},
    }


def bind_storage(targets: Sequence[str], vrf: str | None) -> Callable[[str, float], dict[str, Any]]:
    """The ``storage`` source with the controller's targets, as a ``(root, timeout)`` source."""
    return lambda root, timeout: collect_storage(root, timeout, targets, vrf)


def collect_storage_nic(root: str, timeout: float) -> dict[str, Any]:
    """The ``storage-nic`` source: mlxconfig per Mellanox Ethernet function 0, mlnx_qos per Mellanox Ethernet netdev."""
    netdevs = collect_netdevs(root)
    ethernet = {name: info for name, info in netdevs.items()
                if info["vendor"] == MELLANOX and info["type"] == ARPHRD_ETHER and info["pci"]}
    functions = sorted({info["pci"] for info in ethernet.values() if str(info["pci"]).endswith(".0")})
    jobs: dict[str, list[str]] = {}
    for bdf in functions:
        jobs[f"mlxconfig:{bdf}"] = ["mlxconfig", "-d", bdf, "q", "INTERNAL_CPU_MODEL", "INTERNAL_CPU_OFFLOAD_ENGINE"]
    for name in sorted(ethernet):
        if _NAME.match(name):
            jobs[f"mlnx_qos:{name}"] = ["mlnx_qos", "-i", name]
    results = run_tools(jobs, tools_time(timeout))
    return {
        "mlxconfig": {bdf: results[f"mlxconfig:{bdf}"] for bdf in functions},
        "mlnx_qos": {name: results[f"mlnx_qos:{name}"] for name in sorted(ethernet) if _NAME.match(name)},
    }
