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
    start_judge_worker({TOPOLOGY: find_topology(TOPOLOGY)})
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


def _fleet(folder: Path, count: int) -> list[str]:
    """``count`` nodes' facts: n0001 numa_balancing 0, n0002 1, ... alternately."""
    folder.mkdir()
    nodes = [f"n{i:04d}" for i in range(1, count + 1)]
    for index, node in enumerate(nodes):
        (folder / f"{node}.json").write_text(json.dumps({
            "schema": 1, "sources": {"kernel": {"ok": True, "error": None}}, "commands": {},
            "kernel": {"numa_balancing": index % 2}}))
    return nodes


@pytest.mark.proc  # starts the judging workers
def test_the_workers_judge_against_the_node_types_the_caller_gives(tmp_path: Path) -> None:
    """The caller's topologies travel to the workers as they are (a worker loads no topology file of its own):
    here one that admits NUMA balancing passes every node on TOP-08, and a node type not given is the caller's
    to judge."""
    import dataclasses

    from burnin.plugin_judge import FleetJudging
    from burnin.topology.model import Reference

    nodes = _fleet(tmp_path / "facts", 4)
    shipped = find_topology(TOPOLOGY)
    lenient = dataclasses.replace(shipped, references={
        **shipped.references, "numa_balancing": Reference(0, "a site that allows it", lower=0, upper=1)})
    judging = FleetJudging(1, tmp_path / "facts", nodes, lambda node: "other" if node == nodes[-1] else TOPOLOGY,
                           {TOPOLOGY: lenient})
    try:
        judging.ask(dict.fromkeys(nodes, ("TOP-08",)))
        found = [judging.verdict(node, "TOP-08") for node in nodes]
    finally:
        judging.close()
    assert [v.status if v is not None else None for v in found] == [Status.PASS, Status.PASS, Status.PASS, None]
    assert shipped.ref("numa_balancing") is not None and not shipped.ref("numa_balancing").admits(1)


@pytest.mark.proc  # starts the judging workers
def test_nodes_go_out_in_chunks_and_come_back_in_the_run_order(tmp_path: Path) -> None:
    """POOL_CHUNK nodes a task, the last one short; a node no test asks is left out of its chunk, and a chunk
    handed out before the checks were known is handed out again against them: every verdict is the one
    judged here, node by node in the run's order."""
    from burnin.plugin_judge import POOL_CHUNK, FleetJudging

    nodes = _fleet(tmp_path / "facts", 3 * POOL_CHUNK + 3)
    topology = find_topology(TOPOLOGY)
    skipped = {nodes[1], nodes[POOL_CHUNK + 2]}
    judging = FleetJudging(2, tmp_path / "facts", nodes, lambda node: TOPOLOGY, {TOPOLOGY: topology})
    try:
        judging.start()  # every registered check, until the tests say which
        judging.ask({node: ("TOP-08", "TOP-05") for node in nodes if node not in skipped})
        found = {node: judging.verdict(node, "TOP-08") for node in nodes if node not in skipped}
    finally:
        judging.close()
    spec = load_all()["TOP-08"]
    assert found == {node: spec.func(Facts.load(tmp_path / "facts" / f"{node}.json"), topology)
                     for node in nodes if node not in skipped}
    assert [v.status for v in found.values()][:2] == [Status.PASS, Status.PASS]  # n0002 (a failure) not asked


def test_a_chunk_is_judged_node_by_node_each_pickled(worker: dict[str, CheckSpec], tmp_path: Path) -> None:
    import pickle

    from burnin.plugin_judge import judge_nodes

    nodes = _fleet(tmp_path / "facts", 3)
    (tmp_path / "facts" / "n0002.json").write_text("{not json")
    tasks = tuple((str(tmp_path / "facts" / f"{node}.json"), node, ("TOP-08",), TOPOLOGY) for node in nodes)
    judged = judge_nodes(tasks)
    assert [node for node, _ in judged] == nodes and judged[1][1] is None
    first, third = (pickle.loads(blob) for _, blob in (judged[0], judged[2]) if blob is not None)
    assert first["TOP-08"].status is Status.PASS and third["TOP-08"].status is Status.PASS


STARTED_SESSION = """
import dataclasses, json, sys
from pathlib import Path
from burnin.plugin_judge import StartedJudges, start_judge_worker
from burnin.session import run_suites
from burnin.topology.load import find_topology
from burnin.topology.model import Reference
from burnin.transport.workers import WorkerPool
facts, out, how = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
shipped = find_topology("hgx-h100-8gpu")
lenient = dataclasses.replace(shipped, references={
    **shipped.references, "numa_balancing": Reference(0, "a site that allows it", lower=0, upper=1)})
judges = None
if how == "started":
    pool = WorkerPool(1, start_judge_worker, ({"hgx-h100-8gpu": lenient},))
    pool.start()
    judges = StartedJudges(pool, {"hgx-h100-8gpu": lenient})
try:
    code = run_suites(facts, out, "hgx-h100-8gpu", ["node"], "test_numa_balancing", judges=judges)
finally:
    if judges is not None:
        judges.close()
print(json.dumps({v["node"]: v["status"] for v in json.loads((out / "verdicts.json").read_text())
                  if v["check"] == "TOP-08"}))
"""


@pytest.mark.proc  # starts the judging workers, in a session of its own
@pytest.mark.parametrize("how", ["started", "alone"])
def test_a_session_judges_with_the_workers_started_for_it_whatever_the_fleet_size(tmp_path: Path, how: str) -> None:
    """Workers started before the session (burnin run starts them before it gathers a fleet) judge a fleet of 4,
    far below POOL_MIN_NODES: their node type admits NUMA balancing, so TOP-08 passes every node; the session
    judging alone fails the nodes that balance."""
    import subprocess
    import sys

    _fleet(tmp_path / "facts", 4)
    proc = subprocess.run([sys.executable, "-c", STARTED_SESSION, str(tmp_path / "facts"), str(tmp_path / "out"), how],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    statuses = json.loads(proc.stdout.strip().splitlines()[-1])
    if how == "started":
        assert statuses == dict.fromkeys(["n0001", "n0002", "n0003", "n0004"], "pass")
    else:
        assert statuses == {"n0001": "pass", "n0002": "fail", "n0003": "pass", "n0004": "fail"}


class _Fleet:
    """What :func:`burnin.session._start_judges` reads of a dispatcher: its nodes and their node types."""

    def __init__(self, count: int) -> None:
        self.nodes = [f"n{i:04d}" for i in range(1, count + 1)]
        self.topology_by_node = {self.nodes[0]: "no-such-type"} if self.nodes else {}


@pytest.mark.proc  # starts the judging workers
def test_burnin_run_starts_the_judges_before_gathering_a_fleet_of_32_and_more(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from burnin import session
    from burnin.plugin_judge import PRESTART_MIN_NODES

    monkeypatch.setattr(session, "usable_cpus", lambda: 2)
    assert session._start_judges(_Fleet(PRESTART_MIN_NODES - 1), TOPOLOGY) is None  # type: ignore[arg-type]
    judges = session._start_judges(_Fleet(PRESTART_MIN_NODES), TOPOLOGY)  # type: ignore[arg-type]
    assert judges is not None
    try:
        assert judges.pool.jobs == 2
        assert set(judges.topologies) == {TOPOLOGY}  # a type that does not load is the session's to judge
    finally:
        judges.close()
    monkeypatch.setattr(session, "usable_cpus", lambda: 1)  # one CPU: the session judges alone
    assert session._start_judges(_Fleet(PRESTART_MIN_NODES * 4), TOPOLOGY) is None  # type: ignore[arg-type]
