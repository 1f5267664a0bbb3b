"""The end-of-run summary: rejected nodes with their reasons, then the folded sets."""

from __future__ import annotations

from collections import defaultdict

from burnin.nodes import fold
from burnin.session import RunResult


def print_summary(result: RunResult, topology: str, elapsed_s: float) -> None:
    decisions = result.decisions
    rejected = {n: d for n, d in decisions.items() if not d.admitted}
    admitted = [n for n, d in decisions.items() if d.admitted]
    print(f"burnin: {len(decisions)} nodes ({topology}) judged in {elapsed_s:.1f} s")
    # Group nodes that failed for the very same reasons, as operators read fleets.
    groups: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for node, decision in rejected.items():
        groups[decision.reasons].append(node)
    for reasons, nodes in groups.items():
        decision = rejected[nodes[0]]
        kinds = []
        if decision.failed:
            kinds.append("failed " + ",".join(decision.failed))
        if decision.incomplete:
            kinds.append("incomplete " + ",".join(decision.incomplete))
        print(f"REJECTED {fold(nodes)}: {'; '.join(kinds)}")
        for reason in reasons[:8]:
            print(f"    {reason}")
        if len(reasons) > 8:
            print(f"    ... {len(reasons) - 8} more (see gate.json)")
    print(f"admitted: {fold(admitted) or '-'} ({len(admitted)})")
    print(f"rejected: {fold(rejected) or '-'} ({len(rejected)})")
    print(f"results:  {result.out_dir}/gate.json, {result.out_dir}/junit.xml")
