"""STO-02 runtime evidence: which network devices NCCL opened on each node of a multi-node run (pure).

An evidence run (:class:`burnin.fabric.commands.NcclEvidence`) prints every
rank's ``NCCL INFO`` lines with the job's output; NCCL prefixes each with its
host name (``gethostname()`` up to the first dot), so the lines are cut per
node (:func:`burnin.parsers.nccl_info.parse_nccl_info`) and a device one node
opened is charged to that node only. Each node's record, a small bounded
document, goes into its facts as ``nccl_runtime`` (``{"runs": [...]}``):

- ``status: read``: the devices of each transport's ``NET/<net> : Using`` list,
  those that some channel went through, the settings NCCL reported, and the
  lines that said so (NCCL's own words, quoted by STO-02);
- ``status: unreadable`` with the ``reason``: the run happened, but no line of
  this node named a device (no output, no INFO line from its host, no
  ``Using`` line).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from burnin.errors import ParseError
from burnin.fabric.commands import NcclEvidence
from burnin.fabric.measure import TIMEOUT_EXITS
from burnin.parsers.nccl_info import NcclHostInfo, parse_nccl_info
from burnin.text import printable
from burnin.transport.base import CommandResult

SECTION = "nccl_runtime"
"""The facts section of each node that took part in an evidence run."""
MAX_DEVICES = 64
MAX_LINE_CHARS = 400
REPORTED = ("NCCL_IB_HCA", "NCCL_SOCKET_IFNAME", "NCCL_IB_DISABLE", "NCCL_NET")
"""Settings worth keeping from what NCCL reported: those that choose its network devices."""
_LINES = ("NET/IB", "NET/Socket", "Bootstrap", *REPORTED)


def nccl_host(node: str, hostname: object = None) -> str:
    """The name NCCL prefixes a node's lines with: its host name (else the node's) up to the first dot."""
    name = hostname.strip() if isinstance(hostname, str) and hostname.strip() else node
    return name.split(".", 1)[0]


def outcome(run: CommandResult) -> str:
    """``exit 0``, ``timed out`` or why the run did not start."""
    if run.error:
        return f"did not start: {printable(run.error, limit=160)}"
    if run.timed_out or run.exit_status in TIMEOUT_EXITS:
        return "timed out"
    return f"exit {run.exit_status}"


def _label(nodes: Sequence[str]) -> str:
    if len(nodes) <= 2:
        return "+".join(nodes)
    from burnin.nodes import fold  # ClusterShell: imported when a group needs folding

    return fold(nodes)


def _devices(info: NcclHostInfo) -> dict[str, list[dict[str, Any]]]:
    return {net: [{"index": d.index, "name": printable(d.name, limit=64), "port": d.port,
                   "transport": d.transport} for d in devices[:MAX_DEVICES]]
            for net, devices in info.net_devices.items()}


def _host_record(info: NcclHostInfo) -> dict[str, Any]:
    used: dict[str, list[str]] = {}
    for net in info.net_devices:
        names = [printable(d.name, limit=64) for d in info.used_devices(net)][:MAX_DEVICES]
        if names:
            used[net] = names
    return {"status": "read", "devices": _devices(info), "used": used,
            "settings": {k: printable(v, limit=MAX_LINE_CHARS) for k, v in info.settings.items() if k in REPORTED},
            "lines": {k: printable(v, limit=MAX_LINE_CHARS) for k, v in info.evidence.items() if k in _LINES}}


def node_records(evidence: NcclEvidence, run: CommandResult, nodes: Sequence[str], hosts: Mapping[str, str], *,
                 ib_hca: str | None) -> dict[str, dict[str, Any]]:
    """Each node's record of one evidence run over ``nodes``.

    ``hosts``: node -> the name NCCL prints for it (:func:`nccl_host`; missing nodes: their own name);
    ``ib_hca``: the ``NCCL_IB_HCA`` the run set (None: left to each node's configuration).
    """
    base: dict[str, Any] = {"run": evidence.name, "job": _label(nodes), "outcome": outcome(run),
                            "ib_hca": ib_hca}
    try:
        report = parse_nccl_info(run.stdout + "\n" + run.stderr)
    except ParseError:
        why = f"no 'NCCL INFO' line in the output of the {evidence.name} run ({base['outcome']})"
        return {node: {**base, "status": "unreadable", "reason": why} for node in nodes}
    by_host = {info.host: info for info in report.hosts}
    records: dict[str, dict[str, Any]] = {}
    for node in nodes:
        host = hosts.get(node) or nccl_host(node)
        info = by_host.get(host)
        if info is None:
            why = (f"no NCCL INFO line from host {printable(host, limit=64)} in the {evidence.name} run "
                   f"({base['outcome']}; lines from {len(by_host)} other hosts)")
            records[node] = {**base, "host": host, "status": "unreadable", "reason": why}
        elif not info.net_devices:
            said = info.evidence.get("NET/IB")
            why = (f"NCCL INFO lines of host {printable(host, limit=64)} in the {evidence.name} run name no "
                   f"network device (no 'NET/... : Using' line" + (f"; {printable(said, limit=200)}" if said else "")
                   + ")")
            records[node] = {**base, "host": host, "status": "unreadable", "reason": why}
        else:
            records[node] = {**base, "host": host, **_host_record(info)}
    return records
