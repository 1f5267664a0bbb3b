"""A measurement's status never uses a verdict's word (issue 10): fabric.json and the facts are read by
people and scripts looking for ``incomplete`` verdicts; an unusable run is ``unmeasured``, its checks incomplete."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from fabric_support import FakeLauncher, alone, result

from burnin.checks.base import evaluate
from burnin.evaluate.verdict import Status
from burnin.fabric.phase import Phase
from burnin.fabric.results import node_documents
from burnin.fabric.settings import SIMULATED
from burnin.facts import Facts
from burnin.topology import Topology
from burnin.transport.base import CommandResult

VERDICT_WORDS = {status.value for status in Status}


def _hung(node: str, command: Sequence[str]) -> CommandResult:
    return result(node, "", status=None, timed_out=True, argv=tuple(command))


def _statuses(doc: Any) -> Iterator[str]:
    """Every ``status`` value in a fabric document, at any depth."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            if key == "status" and isinstance(value, str):
                yield value
            else:
                yield from _statuses(value)
    elif isinstance(doc, list):
        for item in doc:
            yield from _statuses(item)


def test_hung_runs_are_unmeasured_and_their_checks_incomplete(h100_topology: Topology, tmp_path: Path) -> None:
    launcher = FakeLauncher(_hung, lambda nodes, hca: _hung(nodes[0], ("all_reduce_perf",)))
    res = Phase(launcher, h100_topology, SIMULATED, failed_alone=alone).run(["sim01", "sim02"])
    fabric_json = res.to_json()
    documents = node_documents(res)
    statuses = set(_statuses(fabric_json)) | set(_statuses(json.loads(json.dumps(documents))))
    assert "unmeasured" in statuses
    assert not statuses & VERDICT_WORDS, statuses
    for check in ("NCCL-01", "NVL-01", "IB-08"):
        verdict = evaluate(check, Facts("sim01", {"fabric": documents["sim01"]}), h100_topology)
        assert verdict.status is Status.INCOMPLETE, (check, verdict.reason)
