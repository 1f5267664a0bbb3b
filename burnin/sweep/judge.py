"""A node's facts through the node suite and the gate, as ``burnin run`` judges and gates (the same code).

Each tested node gets a folder of its own, ``OUT/nodes/<node>/``, with what a run writes (``gate.json``,
``verdicts.json``, ``junit.xml``, ``metrics.prom``, ``facts/``), judged as soon as its job has ended. A fabric
group's members are judged by the fabric suite together, in ``OUT/groups/<group>/`` (with ``fabric.json`` and
``fabric-commands.log``); a group's verdicts gate only the nodes a check failed for.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from burnin.facts import Facts
from burnin.session import RunResult, execute

if TYPE_CHECKING:
    from burnin.gate.registry import Gate
    from burnin.launch.base import Launcher
    from burnin.launch.log import CommandLog

NODES_DIR = "nodes"
GROUPS_DIR = "groups"


class GatheredDispatcher:
    """A dispatcher whose nodes' facts were gathered (and measured) already, by the sweep's own jobs."""

    def __init__(self, facts: Facts | Mapping[str, Facts]) -> None:
        self._facts = {facts.node: facts} if isinstance(facts, Facts) else dict(facts)
        self.nodes = list(self._facts)
        self.topology_by_node: dict[str, str] = {}

    def gather(self, *, sources: str, timeout: float, on_done: Callable[[str], None] | None = None
               ) -> dict[str, Facts]:
        if on_done is not None:
            for node in self._facts:
                on_done(node)
        return dict(self._facts)

    def launcher(self, facts: Mapping[str, Facts], *, log: CommandLog | None = None) -> Launcher:
        raise NotImplementedError("the sweep's jobs measured already: no phase launches work when judging")

    def close(self) -> None:
        return None


def node_dir(out_dir: Path, node: str) -> Path:
    return out_dir / NODES_DIR / node


def judge(facts: Facts, *, topology_ref: str, out_dir: Path, fleet: Mapping[str, Facts] | None = None) -> RunResult:
    """The node suite over one node's facts, in ``OUT/nodes/<node>/``.

    INV-11 compares the node's inventory, and GPU-14 its GPUs' SDC digests, with the nodes of ``fleet`` (the
    ones the sweep gathered before it) and itself: the node suite's fleet phase, over the sweep's nodes so
    far (the first node's GPUs are judged among themselves)."""
    from burnin.checks.fleet import SECTION, fleet_sections
    from burnin.checks.sdc import SECTION as SDC_SECTION
    from burnin.checks.sdc import sdc_sections
    from burnin.topology.load import find_topology

    topology = find_topology(topology_ref)
    group = {**(fleet or {}), facts.node: facts}
    section = fleet_sections(group, dict.fromkeys(group, topology)).get(facts.node)
    if section is not None:
        facts.data[SECTION] = section
    digests = sdc_sections(group).get(facts.node)
    if digests is not None:
        facts.data[SDC_SECTION] = digests
    return execute(GatheredDispatcher(facts), topology=topology_ref, out_dir=node_dir(out_dir, facts.node),
                   suites=("node",), say=lambda _: None)


def group_dir(out_dir: Path, label: str) -> Path:
    return out_dir / GROUPS_DIR / label


def judge_group(facts: Mapping[str, Facts], *, topology_ref: str, out_dir: Path) -> RunResult:
    """The fabric suite over a group's members, whose facts carry what the group's job measured (its folder holds
    fabric.json already)."""
    return execute(GatheredDispatcher(facts), topology=topology_ref, out_dir=out_dir, suites=("fabric",),
                   say=lambda _: None)


def gate_failed(result: RunResult, nodes: list[str], gate: Gate | None) -> str | None:
    """Drain ``nodes`` (the ones a check of the group failed for) through ``gate``; why not, if it was not.
    A member only incomplete is neither drained nor resumed: the group could not tell."""
    if gate is None or not nodes:
        return None
    if result.gate.get("partial"):
        return f"not gated: the fabric suite did not judge every check ({result.gate.get('partial_reasons')})"
    ok = gate.apply({node: result.decisions[node] for node in nodes}, dry_run=False)
    return None if ok else f"the {gate.name} gate could not act on it (see above)"


def gate_node(result: RunResult, gate: Gate | None) -> str | None:
    """Act on the node's decision through ``gate`` (None: no gate); why it was not acted on, if it was not.
    A partial judgement (a check skipped) drains or resumes nothing, as ``burnin run --gate`` refuses it."""
    if gate is None:
        return None
    if result.gate.get("partial"):
        reasons = result.gate.get("partial_reasons")
        return f"not gated: the node suite did not judge every check ({reasons})"
    ok = gate.apply(result.decisions, dry_run=False)
    return None if ok else f"the {gate.name} gate could not act on it (see above)"
