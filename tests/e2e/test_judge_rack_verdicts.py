"""A faulted rack's verdicts are the same however the node suite is judged (issue 21 item 6, bench/judge).

A simulated rack with the faults bench/judge plants is gathered for real, then
its facts, cloned past the node count from which the checks run in worker
processes, are judged four ways, each in its own interpreter: through pytest's
whole protocol (no ``--burnin-lean``), through the lean protocol in one process,
as pytest judges a fleet with ``--burnin-jobs 2`` (lean, checks in two workers, no test reports where
nothing reads them), and as ``burnin run`` judges one (the same, with the workers started before the
session, :func:`burnin.plugin_judge.start_judges`). verdicts.json (but durations), gate.json (but
its creation time) and pytest's exit status must be the same, and every planted
fault must be found.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from burnin.dispatch.sim import SimDispatcher, parse_fault_args, scratch_dir
from burnin.nodes import sim_names
from burnin.phases import PhaseRun, load_phase
from burnin.plugin_judge import JOBS_OPTION, POOL_MIN_NODES
from burnin.session import execute
from burnin.topology.load import find_topology

TOPOLOGY = "hgx-h100-8gpu"
FAULTS = ("sim01:nvlink-down", "sim02:ib-port-down", "sim03:xid:79", "sim04:thermal", "sim05:fabric-manager-down",
          "sim06:row-remap-pending", "sim07:pcie-gen4")
RACK = 8

JUDGE = """
import sys
from pathlib import Path
import pytest
from burnin.plugin_lean import LEAN_OPTION
from burnin.session import PYTEST_LEAN_ARGS, suite_paths, suites_dir
facts, out, lean = sys.argv[1], sys.argv[2], sys.argv[3] == "lean"
args = [*suite_paths(["node"]), "--rootdir", str(suites_dir()), "-c", str(suites_dir() / "pytest.ini"),
        "--burnin-facts", facts, "--burnin-topology", "hgx-h100-8gpu", "--burnin-out", out,
        "-p", "no:cacheprovider", "-p", "no:terminal",
        *(a for a in PYTEST_LEAN_ARGS if lean or a != LEAN_OPTION), *sys.argv[4:]]
raise SystemExit(int(pytest.main(args)))
"""
STARTED = """
import sys
from pathlib import Path
from burnin.plugin_judge import start_judges
from burnin.session import run_suites
judges = start_judges(2, ["hgx-h100-8gpu"])
assert judges is not None
try:
    code = run_suites(Path(sys.argv[1]), Path(sys.argv[2]), "hgx-h100-8gpu", ["node"], judges=judges)
finally:
    judges.close()
raise SystemExit(code)
"""


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The faulted rack's facts under POOL_MIN_NODES + 4 names (round robin over its nodes)."""
    rack = tmp_path_factory.mktemp("rack")
    names = sim_names(RACK)
    dispatcher = SimDispatcher(scratch_dir(), find_topology(TOPOLOGY), names, parse_fault_args(list(FAULTS), names),
                               owned=True)
    try:
        execute(dispatcher, topology=TOPOLOGY, out_dir=rack, phases=[PhaseRun(load_phase("node"))],
                say=lambda line: None)
    finally:
        dispatcher.close()
    folder = tmp_path_factory.mktemp("fleet")
    count = POOL_MIN_NODES + 4
    clones = [f"gpu{i:04d}" for i in range(1, count + 1)]
    for index, name in enumerate(clones):
        source = names[index % RACK]
        text = (rack / "facts" / f"{source}.json").read_text(encoding="utf-8")
        text = text.replace(f'"{source}"', f'"{name}"').replace(f"/{source}/", f"/{name}/")
        (folder / f"{name}.json").write_text(text, encoding="utf-8")
    (folder / "_run.json").write_text(json.dumps({"nodes": clones, "topology": TOPOLOGY, "topology_by_node": {}}))
    return folder


def _judge(fleet: Path, out: Path, protocol: str, *args: str) -> tuple[int, list[dict[str, Any]], dict[str, Any]]:
    script = STARTED if protocol == "started" else JUDGE
    proc = subprocess.run([sys.executable, "-c", script, str(fleet), str(out), protocol, *args],
                          capture_output=True, text=True, timeout=900, check=False)
    assert (out / "gate.json").is_file(), proc.stdout[-2000:] + proc.stderr[-2000:]
    verdicts = json.loads((out / "verdicts.json").read_text())
    for verdict in verdicts:
        verdict.pop("duration_s")
    gate = json.loads((out / "gate.json").read_text())
    gate.pop("created")
    return proc.returncode, verdicts, gate


def test_a_faulted_rack_is_judged_alike_by_every_protocol(fleet: Path, tmp_path: Path) -> None:
    full = _judge(fleet, tmp_path / "full", "full")
    alone = _judge(fleet, tmp_path / "lean", "lean", JOBS_OPTION, "1")
    workers = _judge(fleet, tmp_path / "workers", "lean", JOBS_OPTION, "2")
    started = _judge(fleet, tmp_path / "started", "started")  # as burnin run judges: workers started before
    assert alone == full
    assert workers == full
    assert started == full
    code, verdicts, gate = full
    assert code == pytest.ExitCode.TESTS_FAILED
    assert len(verdicts) == len({v["check"] for v in verdicts}) * (POOL_MIN_NODES + 4) > 40 * POOL_MIN_NODES
    failed = {(v["node"], v["check"]) for v in verdicts if v["status"] == "fail"}
    rejected = {node for node, decision in gate["nodes"].items() if not decision["admitted"]}
    # every node cloned from a faulted one (gpu0001 from sim01, ..., gpu0007 from sim07) is rejected, and
    # only those: every clone of sim08 is admitted
    assert rejected == {f"gpu{i:04d}" for i in range(1, POOL_MIN_NODES + 5) if (i - 1) % RACK != RACK - 1}
    assert {node for node, _ in failed} <= rejected
