"""Node sets in Slurm/ClusterShell syntax (``gpu[001-128,130]``)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from ClusterShell.NodeSet import NodeSet, NodeSetParseError

from burnin.errors import UsageError

# Host names as RFC 1123 labels (dots allowed): never a shell metacharacter.
_NODE_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,252})$")


def expand(nodeset: str) -> list[str]:
    """``sim[01-03]`` → ``["sim01", "sim02", "sim03"]``; invalid names are a UsageError."""
    try:
        names = list(NodeSet(nodeset))
    except NodeSetParseError as exc:
        raise UsageError(f"invalid node set {nodeset!r}: {exc}") from None
    for name in names:
        validate_name(name)
    return names


def fold(names: Iterable[str]) -> str:
    """``["sim01", "sim02", "sim04"]`` → ``sim[01-02,04]`` ("" for none)."""
    names = list(names)
    return str(NodeSet.fromlist(names)) if names else ""


def validate_name(name: str) -> str:
    if not _NODE_NAME.match(name):
        raise UsageError(f"invalid node name {name!r}: use letters, digits, '.', '_' and '-'")
    return name


def sim_names(count: int) -> list[str]:
    if count < 1:
        raise UsageError("--sim needs at least one node")
    width = max(2, len(str(count)))
    return [f"sim{i:0{width}d}" for i in range(1, count + 1)]
