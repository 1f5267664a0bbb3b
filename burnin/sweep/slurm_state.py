"""What Slurm says of a sweep's jobs, its nodes and its partition: the client argv and their parsers.

The parsers are pure; the readers run one client command each through the caller's
:class:`~burnin.transport.slurm.SlurmRunner` (which starts the process), bounded by a timeout.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from burnin.nodes import fold
from burnin.transport.slurm import QUICK_TIMEOUT, SlurmRunner, show_node_argv
from burnin.transport.slurm_jobs import SlurmNode, field_value, parse_show_node

_NODE_LINE = re.compile(r"^NodeName=(\S+)")
IDLE = "IDLE"
"""The one state a node the sweep may start on has: idle and nothing else (no drain, no reservation, not
planned for a pending job, not powering up, responding: ``IDLE*`` is not)."""


def show_partition_argv(partition: str) -> list[str]:
    return ["scontrol", "--oneliner", "show", "partition", partition]


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """A partition as ``scontrol show partition`` reports it: how many nodes, and which (a node set, or ALL)."""

    size: int
    nodes: str


def parse_partition(text: str) -> PartitionInfo | None:
    """``TotalNodes`` and ``Nodes`` of a ``scontrol --oneliner show partition`` line (None: no such line)."""
    for line in text.splitlines():
        size = field_value(line, "TotalNodes")
        if size is not None and size.isdigit():
            return PartitionInfo(int(size), field_value(line, "Nodes") or "")
    return None


def read_partition(client: SlurmRunner, partition: str) -> tuple[PartitionInfo | None, str]:
    """The partition; why not, when Slurm cannot say."""
    result = client.run(show_partition_argv(partition), timeout=QUICK_TIMEOUT)
    info = parse_partition(result.stdout)
    return info, "" if info is not None else (result.tail(1) or result.describe_failure())


def outside(nodes: Sequence[str], partition: PartitionInfo) -> list[str]:
    """The nodes of ``nodes`` the partition does not hold (none when its node set is ALL or unreadable)."""
    from burnin.errors import UsageError
    from burnin.nodes import expand

    if partition.nodes.upper() in ("", "ALL", "(NULL)"):
        return []
    try:
        held = set(expand(partition.nodes))
    except UsageError:
        return []
    return [node for node in nodes if node not in held]


def parse_host_names(text: str) -> dict[str, str]:
    """Node -> its ``NodeHostName`` from ``scontrol --oneliner show node`` output."""
    names: dict[str, str] = {}
    for line in text.splitlines():
        node = _NODE_LINE.match(line.strip())
        host = field_value(line, "NodeHostName")
        if node and host:
            names[node.group(1)] = host
    return names


def read_nodes(client: SlurmRunner, nodes: Sequence[str]) -> tuple[dict[str, SlurmNode], dict[str, str], str | None]:
    """Every node's state and host name in one call; the error line when it failed."""
    if not nodes:
        return {}, {}, None
    result = client.run(show_node_argv(fold(nodes)), timeout=QUICK_TIMEOUT)
    found = parse_show_node(result.stdout)
    error = result.describe_failure() if (result.error or result.timed_out or not found) and not result.ok else None
    return found, parse_host_names(result.stdout), error


def idle(info: SlurmNode) -> bool:
    """Slurm would start a job there now and none runs there (:data:`IDLE`)."""
    return info.state.upper() == IDLE


def jobs_named_argv() -> list[str]:
    """Every job this user has in the queue, ``ID NAME`` per line."""
    return ["squeue", "--noheader", "--me", "--format=%i %j"]


def parse_jobs_named(text: str, prefix: str) -> list[str]:
    """The ids of the jobs in ``squeue`` output whose names start with ``prefix``."""
    ids = []
    for line in text.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and parts[1].strip().startswith(prefix):
            ids.append(parts[0])
    return ids
