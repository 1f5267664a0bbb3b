"""The end-of-run summary: rejected nodes with their reasons, then the folded sets.

Reasons carry what nodes printed (an IB rate, a GPU name, a dmesg line): every
line goes through :func:`burnin.text.printable`, so an escape sequence a node
sent is shown as ``\\x1b[...`` instead of rewriting the operator's terminal.
"""

from __future__ import annotations

import os
import sys
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from burnin.nodes import fold
from burnin.report.reasons import condense, id_list
from burnin.text import printable

if TYPE_CHECKING:
    from burnin.session import RunResult


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
            kinds.append("failed " + id_list(decision.failed))
        if decision.incomplete:
            kinds.append("incomplete " + id_list(decision.incomplete))
        _say(f"REJECTED {fold(nodes)}: {'; '.join(kinds)}")
        lines = condense(reasons)
        for line in lines[:8]:
            _say(f"    {line}")
        if len(lines) > 8:
            _say(f"    ... {len(lines) - 8} more (see gate.json)")
    _say(f"admitted: {fold(admitted) or '-'} ({len(admitted)})")
    _say(f"rejected: {fold(rejected) or '-'} ({len(rejected)})")
    _say(f"results:  {result.out_dir}/gate.json, {result.out_dir}/junit.xml, {result.out_dir}/report.html")


def say_left_on_nodes(left: Mapping[str, Sequence[str]], *, shipped_by: str, ended: str, recorded_in: str) -> None:
    """One line for the files shipped to nodes that no job could remove (its allocation ended first), so that
    an operator hears of them where the run is read: ``left on sim[01-04]: 1 file(s) the run shipped, ...``."""
    if not left:
        return
    paths = sorted({path for node_paths in left.values() for path in node_paths})
    _say(f"left on {fold(list(left))}: {len(paths)} file(s) {shipped_by} shipped, {ended} before removing them "
         f"({recorded_in}): {' '.join(paths[:4])}{' ...' if len(paths) > 4 else ''}")


def say_hold_ended(ended: Mapping[str, str], *, gated: bool) -> None:
    """One line for the nodes not measured because the run's allocation ended under it
    (burnin.dispatch.base.hold_ended): incomplete for that, not for anything of theirs, and left out of the gate."""
    for why in dict.fromkeys(ended.values()):
        nodes = [node for node, reason in ended.items() if reason == why]
        _say(f"not measured: {fold(nodes)}: the run's allocation ended under it ({why})"
             + ("; the gate left them as they are" if gated else ""))
