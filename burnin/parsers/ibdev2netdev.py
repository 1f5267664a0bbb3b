"""``ibdev2netdev`` (MLNX_OFED / DOCA-OFED): which netdev each RDMA device port drives.

Plain form, one line per port::

    mlx5_0 port 1 ==> ibp26s0 (Down)

verbose form (``-v``)::

    0000:1b:00.0 mlx5_0 (MT4129 - MCX75310AAS-NEA) NVIDIA ConnectX-7 fw 28.39.1002 port 1 (ACTIVE) ==> ibp27s0 (Up)

Columns re-spaced by ``column -t``, shell prompts, ``# comments`` after a line
and other commands' output pasted around it are tolerated: only lines with
``port N ==> NETDEV (STATE)`` are read. A file holding the outputs of several
nodes gives every entry in order (the same device name may then repeat).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from burnin.parsers._common import fail, head_excerpt, iter_lines, require_text

TOOL = "ibdev2netdev"

_ENTRY = re.compile(
    r"(?:^|\s)(?:(?P<pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+)?"
    r"(?P<device>[A-Za-z][A-Za-z0-9_.-]{0,63})\s+"
    r"(?:\((?P<desc>[^()]{0,200})\)\s+(?P<extra>[^=]{0,200}?)\s*)?"
    r"port\s+(?P<port>\d{1,3})\s+(?:\((?P<port_state>[A-Z_]{1,20})\)\s+)?"
    r"==>\s+(?P<netdev>\S{1,64})\s+\((?P<state>[A-Za-z]{1,20})\)"
)
_FW = re.compile(r"\bfw\s+(\S{1,40})")


@dataclass(frozen=True, slots=True)
class Ibdev2netdevEntry:
    device: str
    """RDMA device, e.g. ``mlx5_0``."""
    port: int
    netdev: str
    """The netdev the port drives (``ibp26s0``, ``enp41s0f0np0``, ``bond0``...)."""
    state: str
    """The netdev's state as printed: ``Up`` or ``Down``."""
    up: bool | None
    pci: str | None = None
    """PCI address (verbose form only)."""
    description: str | None = None
    """Board part and name in parentheses (verbose form only)."""
    firmware: str | None = None
    port_state: str | None = None
    """The port's own state, e.g. ``ACTIVE`` (verbose form only)."""


@dataclass(frozen=True, slots=True)
class Ibdev2netdevReport:
    entries: tuple[Ibdev2netdevEntry, ...]

    def netdev_of(self, device: str, port: int = 1) -> str | None:
        """The netdev of ``device`` port ``port`` (the first one listed), or None."""
        return next((e.netdev for e in self.entries if e.device == device and e.port == port), None)

    def devices_of(self, netdev: str) -> tuple[str, ...]:
        """Every RDMA device listed as driving ``netdev`` (a bond has several)."""
        return tuple(dict.fromkeys(e.device for e in self.entries if e.netdev == netdev))


def parse_ibdev2netdev(text: str) -> Ibdev2netdevReport:
    """Parse ``ibdev2netdev`` or ``ibdev2netdev -v`` output."""
    require_text(TOOL, text)
    entries: list[Ibdev2netdevEntry] = []
    for raw in iter_lines(text):
        line = raw.split("#", 1)[0] if " # " in raw or raw.lstrip().startswith("#") else raw
        if "==>" not in line:
            continue
        match = _ENTRY.search(line)
        if match is None:
            continue
        state = match.group("state")
        lowered = state.lower()
        extra = match.group("extra") or ""
        firmware = _FW.search(extra)
        entries.append(Ibdev2netdevEntry(
            device=match.group("device"),
            port=int(match.group("port")),
            netdev=match.group("netdev"),
            state=state,
            up=True if lowered == "up" else False if lowered == "down" else None,
            pci=match.group("pci").lower() if match.group("pci") else None,
            description=(match.group("desc") or "").strip() or None,
            firmware=firmware.group(1) if firmware else None,
            port_state=match.group("port_state"),
        ))
    if not entries:
        fail(TOOL, "no 'DEVICE port N ==> NETDEV (STATE)' line", head_excerpt(text))
    return Ibdev2netdevReport(tuple(entries))
