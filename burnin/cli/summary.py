"""The end-of-run summary: rejected nodes with their reasons, then the folded sets.

Reasons carry what nodes printed (an IB rate, a GPU name, a dmesg line): every
line goes through :func:`burnin.text.printable`, so an escape sequence a node
sent is shown as ``\\x1b[...`` instead of rewriting the operator's terminal.
"""

from __future__ import annotations

import os
import sys
from collections import defaultdict

from burnin.nodes import fold
from burnin.session import RunResult
from burnin.text import printable

_UNMEASURED = " could not be measured: "


def _condense(reasons: tuple[str, ...]) -> list[str]:
    """Fold "X could not be measured: CAUSE" lines that share a cause into one line."""
    by_cause: dict[str, list[str]] = defaultdict(list)
    lines: list[str] = []
    for reason in reasons:
        check_id, sep, cause = reason.partition(_UNMEASURED)
        if sep:
            if cause not in by_cause:
                lines.append(cause)
            by_cause[cause].append(check_id)
        else:
            lines.append(reason)
    return [f"{_ids(by_cause[line])}{_UNMEASURED}{line}" if line in by_cause else line for line in lines]


def _ids(ids: list[str] | tuple[str, ...], limit: int = 6) -> str:
    """``GPU-01,GPU-03`` or, for many, ``26 checks (GPU-01,... +20)``."""
    if len(ids) <= limit:
        return ",".join(ids)
    return f"{len(ids)} checks ({','.join(ids[:limit])},... +{len(ids) - limit})"


def _say(line: str) -> None:
    """Print one summary line; a reader that went away (``burnin run | head``) stops the summary only.

    The verdicts, the gate and the exit status do not depend on anyone reading
    the summary, so a closed pipe must not turn a run into an internal error.
    """
    try:
        print(printable(line), flush=True)
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # later prints (and the exit flush) go nowhere
        os.close(devnull)


def print_summary(result: RunResult, topology: str, elapsed_s: float) -> None:
    decisions = result.decisions
    rejected = {n: d for n, d in decisions.items() if not d.admitted}
    admitted = [n for n, d in decisions.items() if d.admitted]
    _say(f"burnin: {len(decisions)} nodes ({topology}) judged in {elapsed_s:.1f} s")
    # Group nodes that failed for the very same reasons, as operators read fleets.
    groups: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for node, decision in rejected.items():
        groups[decision.reasons].append(node)
    for reasons, nodes in groups.items():
        decision = rejected[nodes[0]]
        kinds = []
        if decision.failed:
            kinds.append("failed " + _ids(decision.failed))
        if decision.incomplete:
            kinds.append("incomplete " + _ids(decision.incomplete))
        _say(f"REJECTED {fold(nodes)}: {'; '.join(kinds)}")
        lines = _condense(reasons)
        for line in lines[:8]:
            _say(f"    {line}")
        if len(lines) > 8:
            _say(f"    ... {len(lines) - 8} more (see gate.json)")
    _say(f"admitted: {fold(admitted) or '-'} ({len(admitted)})")
    _say(f"rejected: {fold(rejected) or '-'} ({len(rejected)})")
    _say(f"results:  {result.out_dir}/gate.json, {result.out_dir}/junit.xml, {result.out_dir}/report.html")
