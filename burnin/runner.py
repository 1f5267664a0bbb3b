"""Gather facts from many nodes through a transport, with a bounded pool.

One command per node (the collector); the controller then judges the facts
locally. A node that cannot be reached, hangs, or answers garbage becomes an
``unreachable`` facts document with the reason, and the others go on.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed

from burnin.facts import Facts, NonFiniteNumber, loads_facts
from burnin.transport.base import CommandResult, Transport

DoneCallback = Callable[[str], None]


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


def gather(
    transport: Transport,
    nodes: Sequence[str],
    argv: Sequence[str],
    *,
    timeout: float,
    fanout: int = 32,
    stdin: bytes | None = None,
    on_done: DoneCallback | None = None,
) -> dict[str, Facts]:
    """Run the collector ``argv`` on every node, at most ``fanout`` at a time."""
    results: dict[str, Facts] = {}
    pool = ThreadPoolExecutor(max_workers=max(1, min(fanout, len(nodes) or 1)))
    try:
        futures = {pool.submit(transport.run, node, argv, timeout=timeout, stdin=stdin): node for node in nodes}
        for future in as_completed(futures):
            node = futures[future]
            try:
                results[node] = facts_from_result(future.result())
            except Exception as exc:  # noqa: BLE001 - one node's failure must not stop the run
                results[node] = Facts.unreachable_node(node, f"{type(exc).__name__}: {exc}")
            if on_done is not None:
                on_done(node)
    except BaseException:
        # Interrupted: start no other node and do not wait for those in flight (closing the
        # transport ends them), so SIGTERM is not held up by a hung node's timeout.
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return {node: results[node] for node in nodes}
