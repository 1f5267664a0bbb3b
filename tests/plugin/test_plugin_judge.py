"""judge_node (burnin/plugin_judge.py), in this process as a judging worker runs it: a node handed out before
its tests are collected is judged against every registered check, one check's error leaving out that check."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from burnin.checks import load_all
from burnin.checks.registry import CheckSpec
from burnin.evaluate.verdict import Status, Verdict
from burnin.facts import Facts
from burnin.plugin_judge import _WORKER_CHECKS, judge_node, start_judge_worker
from burnin.topology.load import find_topology
from burnin.topology.model import Topology

TOPOLOGY = "hgx-h100-8gpu"


@pytest.fixture
def worker() -> Iterator[dict[str, CheckSpec]]:
    """This process as a judging worker (its registry restored after the test)."""
    start_judge_worker((TOPOLOGY,))
    saved = dict(_WORKER_CHECKS)
    yield _WORKER_CHECKS
    _WORKER_CHECKS.clear()
    _WORKER_CHECKS.update(saved)


@pytest.fixture
def facts_file(tmp_path: Path) -> Path:
    path = tmp_path / "n001.json"
    path.write_text(json.dumps({"schema": 1, "sources": {"kernel": {"ok": True, "error": None}}, "commands": {},
                                "kernel": {"numa_balancing": 1}}))
    return path


def test_without_a_check_list_every_registered_check_is_judged(worker: dict[str, CheckSpec], facts_file: Path) -> None:
    node, verdicts = judge_node((str(facts_file), "n001", None, TOPOLOGY))
    assert node == "n001" and verdicts is not None
    assert set(verdicts) == set(load_all())
    facts, topology = Facts.load(facts_file), find_topology(TOPOLOGY)
    assert verdicts == {check: spec.func(facts, topology) for check, spec in load_all().items()}
    assert verdicts["TOP-08"].status is Status.FAIL


def _raises(facts: Facts, topology: Topology) -> Verdict:
    raise RuntimeError("a check that breaks on these facts")


def test_a_check_that_raises_is_left_out_for_the_plugin_to_judge(worker: dict[str, CheckSpec],
                                                                 facts_file: Path) -> None:
    spec = worker["TOP-08"]
    worker["TOP-08"] = CheckSpec(spec.check_id, spec.title, spec.fast, _raises, spec.references, spec.sources)
    _, verdicts = judge_node((str(facts_file), "n001", None, TOPOLOGY))
    assert verdicts is not None and "TOP-08" not in verdicts and "TOP-05" in verdicts
    # asked for by name, the node is the plugin's to judge (it raises there too, as a test error)
    assert judge_node((str(facts_file), "n001", ("TOP-05", "TOP-08"), TOPOLOGY)) == ("n001", None)


def test_facts_that_cannot_be_read_leave_the_whole_node_to_the_plugin(worker: dict[str, CheckSpec],
                                                                      facts_file: Path) -> None:
    facts_file.write_text("{not json")
    assert judge_node((str(facts_file), "n001", None, TOPOLOGY)) == ("n001", None)
