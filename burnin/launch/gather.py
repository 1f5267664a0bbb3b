"""Gathering facts: a per-node launch of the collector, each node's output read into its facts.

One command per node (the collector, :meth:`burnin.launch.base.Launcher.collect`); the controller then
judges the facts locally. A node that cannot be reached, hangs, or answers garbage becomes an
``unreachable`` facts document with the reason, and the others go on.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from burnin.facts import Facts, NonFiniteNumber, loads_facts
from burnin.launch.base import Launcher
from burnin.transport.base import CommandResult

DoneCallback = Callable[[str], None]


def collector_args(sources: str, timeout: float) -> list[str]:
    """The collector's arguments: its sources, and half the node's time for each source."""
    return ["--sources", sources, "--timeout", f"{max(1.0, timeout / 2):g}"]


def facts_from_result(result: CommandResult) -> Facts:
    """Turn the collector's output on one node into Facts (or an unreachable reason)."""
    if not result.ok:
        reason = result.describe_failure()
        missing = result.exit_status == 127 or "command not found" in result.stderr
        if missing and ("python3" in " ".join(result.argv) or "python3" in result.stderr):
            reason = f"python3 not found on the node: {result.tail(1)}"
        return Facts.unreachable_node(result.node, reason)
    text = result.stdout.strip()
    start = text.find("{")
    try:
        data = loads_facts(text[start:] if start >= 0 else text)
    except NonFiniteNumber as exc:
        return Facts.unreachable_node(result.node, f"collector output refused: {exc} (not a possible reading)")
    except json.JSONDecodeError:
        excerpt = text[:120].replace("\n", "\\n")
        return Facts.unreachable_node(result.node, f"collector output is not JSON: {excerpt!r}")
    if not isinstance(data, dict) or "sources" not in data:
        return Facts.unreachable_node(result.node, f"collector output is not a facts document: {text[:120]!r}")
    return Facts(result.node, data)


def gather(launcher: Launcher, nodes: Sequence[str], *, sources: str, timeout: float,
           on_done: DoneCallback | None = None) -> dict[str, Facts]:
    """Every node's facts through ``launcher`` (which holds what it needs already); ``on_done`` as each ends.

    A node's output is read into its facts as soon as it is in, while the others' are on their way (a facts
    document is ~230 KB of JSON: ~2.5 ms to read, 2.5 s of a 1,024-node run that no longer follows the gather);
    a node whose end the launcher did not announce (or whose result it replaced since) is read at the end."""
    read: dict[str, tuple[CommandResult, Facts]] = {}

    def done(node: str, result: CommandResult) -> None:
        read[node] = result, facts_from_result(result)
        if on_done is not None:
            on_done(node)

    results = launcher.collect(list(nodes), collector_args(sources, timeout), timeout_s=timeout, on_done=done)
    facts = {}
    for node in nodes:
        early = read.get(node)
        facts[node] = early[1] if early is not None and early[0] is results[node] else facts_from_result(results[node])
    return facts
