"""Node sets in Slurm/ClusterShell syntax (``gpu[001-128,130]``).

Every node set burnin reads (``--nodes``, ``--hosts``, inventory keys and
groups, ``SLURM_JOB_NODELIST``) and every simulated rack size goes through
:func:`expand` or :func:`sim_names`, which refuse more than :data:`MAX_NODES`
nodes. The size is counted from the text before anything is expanded:
ClusterShell builds the whole set when it parses one, so ``n[1-100000000]``
would otherwise take minutes and gigabytes before any check could see it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ClusterShell.NodeSet import NodeSet, NodeSetParseError

from burnin.errors import UsageError
from burnin.text import printable

MAX_NODES = 100_000
"""Most nodes one node set (and so one run) may name: ten times the largest GPU cluster an
operator points burnin at in one go, and few enough to expand in well under a second."""

# Host names as RFC 1123 labels (dots allowed): never a shell metacharacter.
_NODE_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,252})$")
# One item of a bracketed range: ``7``, ``001-128``, ``1-100/2`` (ClusterShell's syntax).
_RANGE_ITEM = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*(?:/\s*(\d+)\s*)?)?$")
_OPERATORS = ",!&^"  # union, difference, intersection, symmetric difference
_HUGE = 10**30  # counts stop growing here (a 4,000-digit bound would still be exact, and pointless)


def count_nodes(nodeset: str) -> int:
    """How many names ``nodeset`` can expand to at most, read from its text without expanding it.

    Each element of the set (between ``,``, ``!``, ``&`` and ``^`` outside brackets)
    names the product of its bracketed ranges' sizes; the count is their sum, so a
    difference or intersection is counted as the work of building it. Items that
    are not ranges count as one (ClusterShell reports them); ``@group`` counts as one.
    """
    total = 0
    element = 1
    depth = 0
    opened = 0
    for index, char in enumerate(nodeset):
        if char == "[":
            depth += 1
            opened = index + 1
        elif char == "]" and depth:
            depth -= 1
            element = min(element * _range_size(nodeset[opened:index]), _HUGE)
        elif char in _OPERATORS and not depth:
            total = min(total + element, _HUGE)
            element = 1
    return min(total + element, _HUGE)


def _range_size(body: str) -> int:
    size = 0
    for item in body.split(","):
        found = _RANGE_ITEM.match(item)
        if found is None:
            size += 1
            continue
        first, last, step = found.groups()
        if max(len(first), len(last or "")) > 30:
            return _HUGE
        low = int(first)
        high = int(last) if last is not None else low
        stride = max(1, int(step[:30])) if step else 1
        size += max(1, (high - low) // stride + 1)
    return size


def check_size(nodeset: str) -> int:
    """The count of :func:`count_nodes`; more than :data:`MAX_NODES` is a UsageError naming the set."""
    count = count_nodes(nodeset)
    if count > MAX_NODES:
        shown = f"{count:,}" if count < _HUGE else f"more than {_HUGE:.0e}"
        raise UsageError(f"node set {_shown(nodeset)} names {shown} nodes: "
                         f"at most {MAX_NODES:,} per run")
    return count


def expand(nodeset: str) -> list[str]:
    """``sim[01-03]`` → ``["sim01", "sim02", "sim03"]``; invalid names, or more than
    :data:`MAX_NODES`, are a UsageError."""
    check_size(nodeset)
    try:
        names = list(NodeSet(nodeset))
    except NodeSetParseError as exc:
        raise UsageError(f"invalid node set {_shown(nodeset)}: {printable(exc, limit=200)}") from None
    if len(names) > MAX_NODES:  # a ClusterShell group (@name) can hold any number
        raise UsageError(f"node set {_shown(nodeset)} names {len(names):,} nodes: "
                         f"at most {MAX_NODES:,} per run")
    for name in names:
        validate_name(name)
    return names


def _shown(nodeset: str) -> str:
    """The set as typed, quoted, control characters escaped, cut to one short line."""
    return printable(repr(nodeset), limit=80)


def fold(names: Iterable[str]) -> str:
    """``["sim01", "sim02", "sim04"]`` → ``sim[01-02,04]`` ("" for none).

    Only host names are folded; any other name (``a!b``, ``gpu[``: a node-set
    parser reads them as a difference or a broken range) follows them as given.
    """
    foldable: list[str] = []
    others: list[str] = []
    for name in names:
        (foldable if _NODE_NAME.fullmatch(name) else others).append(name)
    folded = str(NodeSet.fromlist(foldable)) if foldable else ""
    return ",".join([folded, *others] if folded else others)


def validate_name(name: str) -> str:
    if not _NODE_NAME.match(name):
        raise UsageError(f"invalid node name {name!r}: use letters, digits, '.', '_' and '-'")
    return name


def sim_names(count: int) -> list[str]:
    if count < 1:
        raise UsageError("--sim needs at least one node")
    if count > MAX_NODES:
        raise UsageError(f"{count:,} simulated nodes asked for: at most {MAX_NODES:,} per run")
    width = max(2, len(str(count)))
    return [f"sim{i:0{width}d}" for i in range(1, count + 1)]
