"""``NCCL_DEBUG=INFO`` initialisation lines: which network devices NCCL opened, and which it used.

NCCL prefixes each line with ``HOST:PID:TID [CUDADEV] NCCL INFO`` (its default
``NCCL_DEBUG_SUBSYS``/format); launchers may prepend their own labels
(``0: ``). Read here, per host:

- ``NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE ... [RO]; OOB ib0:10.0.0.1<0>``: the RDMA devices
  NCCL's IB transport opened, with their port and link layer (``IB`` or ``RoCE``);
- ``NET/Socket : Using [0]eth0:10.0.0.1<0>``: the socket transport's interfaces;
- ``NET/IB : No device found.``: the IB transport found no device it may use (NCCL falls back to sockets);
- ``Bootstrap: Using IF:ADDR<0>`` (``Bootstrap : Using`` in older NCCL): the bootstrap interface;
- ``Channel 00/0 : 8[0] -> 0[0] [send] via NET/IB/3/GDRDMA``: channels through the network name the device
  index into the ``NET/IB : Using`` list (``/3``), so the devices really used are known;
- ``NCCL_X set by environment to Y`` and ``NCCL_IB_HCA set to ...``: settings NCCL reports;
- ``Using network IB``, ``NCCL version ...`` (also the bare line rank 0 prints without the prefix).

Per host, the first line that said each of these is kept (:attr:`NcclHostInfo.evidence`), so a
check can quote NCCL's own words. Everything else (trees, rings, tuner and plugin chatter) is ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from burnin.parsers._common import fail, head_excerpt, iter_lines, require_text

TOOL = "nccl-info"
MAX_LINE = 8192

_PREFIX = re.compile(r"(?P<host>[A-Za-z0-9][A-Za-z0-9_.-]{0,252}):(?P<pid>\d{1,10}):(?P<tid>\d{1,10})\s+"
                     r"\[(?P<dev>\d{1,4})\]\s+NCCL INFO\s?(?P<msg>.*)$")
_NET_USING = re.compile(r"^NET/(?P<net>[A-Za-z0-9_]{1,32})\s*:\s*Using\s+(?P<list>.*)$")
_DEVICE = re.compile(r"\[(?P<index>\d{1,4})\](?P<name>[^\s:\[\]]{1,64})(?::(?P<port>\d{1,3})(?=[/\s]|$))?"
                     r"(?:/(?P<transport>[A-Za-z]{1,16}))?(?::(?P<addr>[^\s<]{1,64})<\d+>)?")
_OOB = re.compile(r"OOB\s+(?P<if>[^\s:]{1,64}):(?P<addr>[^\s<]{1,64})<\d+>")
_BOOTSTRAP = re.compile(r"^Bootstrap\s*:\s*Using\s+(?P<if>[^\s:]{1,64}):(?P<addr>[^\s<]{1,64})<\d+>")
_CHANNEL_NET = re.compile(r"^Channel\s+\d{1,4}/\d{1,4}\s*:.*\bvia\s+NET/(?P<net>[A-Za-z0-9_]{1,32})/(?P<index>\d{1,4})"
                          r"(?:/(?P<mode>[A-Za-z0-9_]{1,16}))?")
_SETTING = re.compile(r"^(?P<name>NCCL_[A-Z0-9_]{1,64})\s+set\s+(?:by environment\s+)?to\s+(?P<value>.*?)\.?\s*$")
_NO_DEVICE = re.compile(r"^NET/(?P<net>[A-Za-z0-9_]{1,32})\s*:\s*No device found")
_VERSION = re.compile(r"^NCCL version\s+(?P<version>\S{1,64})")
_NETWORK = re.compile(r"^Using network\s+(?P<net>\S{1,64})")


@dataclass(frozen=True, slots=True)
class NcclNetDevice:
    index: int
    """Position in NCCL's list; ``NET/IB/<index>`` in channel lines refers to it."""
    name: str
    """``mlx5_0`` (IB transport) or the interface name (socket transport)."""
    port: int | None
    transport: str | None
    """``IB`` or ``RoCE`` for the IB transport; None for sockets."""
    address: str | None
    """The socket transport's address."""


@dataclass(frozen=True, slots=True)
class NcclNetUse:
    net: str
    """``IB``, ``Socket`` or a plugin's name."""
    index: int
    mode: str | None
    """``GDRDMA`` when GPUDirect RDMA carries the channel."""


@dataclass(frozen=True, slots=True)
class NcclHostInfo:
    host: str
    ranks: int
    """Distinct processes (host:pid) seen on this host."""
    net_devices: dict[str, tuple[NcclNetDevice, ...]] = field(default_factory=dict)
    """``NET/<net> : Using`` lists by transport name (``IB``, ``Socket``); the first list printed wins."""
    oob: tuple[str, ...] = ()
    """``IF:ADDR`` of the IB transport's out-of-band interface."""
    bootstrap: tuple[str, ...] = ()
    used: tuple[NcclNetUse, ...] = ()
    """Network devices that channels went through (distinct)."""
    networks: tuple[str, ...] = ()
    """``Using network X`` values."""
    settings: dict[str, str] = field(default_factory=dict)
    """``NCCL_X`` settings this host's NCCL reported (the first value seen)."""
    evidence: dict[str, str] = field(default_factory=dict)
    """The first line (from the ``HOST:PID:TID`` prefix on) that said each thing: ``NET/IB`` (its
    ``Using`` list, or ``No device found``), ``NET/Socket``, ``Bootstrap``, ``NCCL_IB_HCA``..."""

    def used_devices(self, net: str = "IB") -> tuple[NcclNetDevice, ...]:
        """The devices of ``net`` that some channel used (by their index in the ``Using`` list)."""
        devices = {d.index: d for d in self.net_devices.get(net, ())}
        indexes = dict.fromkeys(u.index for u in self.used if u.net == net)
        return tuple(devices[i] for i in indexes if i in devices)


@dataclass(frozen=True, slots=True)
class NcclInfoReport:
    version: str | None
    hosts: tuple[NcclHostInfo, ...]
    settings: dict[str, str]
    """``NCCL_X`` settings NCCL reported (the first value seen)."""
    info_lines: int

    def host(self, name: str) -> NcclHostInfo | None:
        return next((h for h in self.hosts if h.host == name), None)


class _Host:
    def __init__(self, name: str) -> None:
        self.name = name
        self.pids: set[str] = set()
        self.devices: dict[str, tuple[NcclNetDevice, ...]] = {}
        self.oob: dict[str, None] = {}
        self.bootstrap: dict[str, None] = {}
        self.used: dict[NcclNetUse, None] = {}
        self.networks: dict[str, None] = {}
        self.settings: dict[str, str] = {}
        self.evidence: dict[str, str] = {}

    def record(self) -> NcclHostInfo:
        return NcclHostInfo(self.name, len(self.pids), dict(self.devices), tuple(self.oob), tuple(self.bootstrap),
                            tuple(self.used), tuple(self.networks), dict(self.settings), dict(self.evidence))

    def saw(self, what: str, line: str) -> None:
        self.evidence.setdefault(what, line)


def _devices(listing: str) -> tuple[NcclNetDevice, ...]:
    out: list[NcclNetDevice] = []
    for match in _DEVICE.finditer(listing.split(";", 1)[0]):
        port = match.group("port")
        out.append(NcclNetDevice(int(match.group("index")), match.group("name"), int(port) if port else None,
                                 match.group("transport"), match.group("addr")))
    return tuple(out)


def _read(host: _Host, msg: str, line: str, settings: dict[str, str], version: list[str]) -> None:
    using = _NET_USING.match(msg)
    if using is not None:
        net = using.group("net")
        devices = _devices(using.group("list"))
        if devices and net not in host.devices:
            host.devices[net] = devices
            host.evidence[f"NET/{net}"] = line
        oob = _OOB.search(using.group("list"))
        if oob is not None:
            host.oob[f"{oob.group('if')}:{oob.group('addr')}"] = None
        return
    missing = _NO_DEVICE.match(msg)
    if missing is not None:
        host.saw(f"NET/{missing.group('net')}", line)
        return
    channel = _CHANNEL_NET.match(msg)
    if channel is not None:
        host.used[NcclNetUse(channel.group("net"), int(channel.group("index")), channel.group("mode"))] = None
        return
    bootstrap = _BOOTSTRAP.match(msg)
    if bootstrap is not None:
        host.bootstrap[f"{bootstrap.group('if')}:{bootstrap.group('addr')}"] = None
        host.saw("Bootstrap", line)
        return
    setting = _SETTING.match(msg)
    if setting is not None:
        name, value = setting.group("name"), setting.group("value").strip()
        settings.setdefault(name, value)
        host.settings.setdefault(name, value)
        host.saw(name, line)
        return
    network = _NETWORK.match(msg)
    if network is not None:
        host.networks[network.group("net")] = None
        return
    found = _VERSION.match(msg)
    if found is not None and not version:
        version.append(found.group("version"))


def parse_nccl_info(text: str) -> NcclInfoReport:
    """Read the ``NCCL INFO`` lines of one or more ranks' output (other lines are skipped)."""
    require_text(TOOL, text)
    hosts: dict[str, _Host] = {}
    settings: dict[str, str] = {}
    version: list[str] = []
    count = 0
    for line in iter_lines(text):
        if len(line) > MAX_LINE:
            continue
        if "NCCL INFO" not in line:
            # NCCL's rank 0 prints its version bare, without the INFO prefix ("NCCL version 2.19.3+cuda12.3").
            bare = _VERSION.match(line.strip())
            if bare is not None and not version:
                version.append(bare.group("version"))
            continue
        match = _PREFIX.search(line)
        if match is None:
            continue
        count += 1
        host = hosts.setdefault(match.group("host"), _Host(match.group("host")))
        host.pids.add(match.group("pid"))
        _read(host, match.group("msg").strip(), match.group(0).strip(), settings, version)
    if not count:
        fail(TOOL, "no 'HOST:PID:TID [DEV] NCCL INFO' line (was NCCL_DEBUG=INFO set?)", head_excerpt(text))
    return NcclInfoReport(version[0] if version else None, tuple(h.record() for h in hosts.values()), settings, count)
