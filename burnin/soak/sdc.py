"""GPU-14 in the soak: the SDC workload on every GPU after each GPU stress stage, while the GPUs are hot.

A GPU that computes wrong only after an hour of heat passes the node suite's GPU-14 at the start of the
soak. So after each GPU stage the soak runs the collector's ``sdc`` source on the nodes still soaking
(:data:`burnin.soak.nodes.SDC_SOURCES`) and judges their digests against each other exactly as the node
suite does (:mod:`burnin.checks.sdc`: the strict majority of the soak's GPUs of one group): a GPU off the
majority is a fatal event at the stage's end, which stops the node's soak; a round that could not be
judged (the workload did not run, no majority) is a ``sdc`` record with the cause, which makes the
soak's GPU-14 incomplete unless it failed.
"""

from __future__ import annotations

from collections.abc import Mapping

from burnin.checks.base import evaluate
from burnin.checks.sdc import SECTION, sdc_sections
from burnin.evaluate.verdict import Status
from burnin.facts import Facts
from burnin.soak.monitor import Event
from burnin.soak.results import ChunkRecord
from burnin.topology.model import Topology

CHECK = "GPU-14"
STAGE = "sdc"


def judge_round(facts: Mapping[str, Facts], topology: Topology, t: float, attempts: Mapping[str, int]
                ) -> tuple[list[ChunkRecord], dict[str, list[Event]]]:
    """One SDC round at soak time ``t``: a record per node, and the fatal events of the nodes it failed."""
    sections = sdc_sections(facts)
    records: list[ChunkRecord] = []
    fatal: dict[str, list[Event]] = {}
    for node, node_facts in facts.items():
        if node in sections:
            node_facts.data[SECTION] = sections[node]
        verdict = evaluate(CHECK, node_facts, topology)
        failures: tuple[str, ...] = ()
        errors: tuple[str, ...] = ()
        if verdict.status is Status.FAIL:
            events = [Event(CHECK, node, f.subject, t, True, f.measured, f.expected or verdict.expected)
                      for f in verdict.findings if f.status is Status.FAIL]
            fatal[node] = events
            failures = tuple(e.reason for e in events)
        elif verdict.status is not Status.PASS:
            errors = (verdict.reason.removeprefix(f"{CHECK} "),)  # the soak's GPU-14 reason names the check once
        records.append(ChunkRecord(node, STAGE, t, t, attempts[node], errors=errors, failures=failures,
                                   details={"measured": verdict.measured}))
    return records, fatal
