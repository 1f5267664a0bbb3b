"""``burnin soak --dry-run``: the stages' commands printed, nothing run or sampled on any node, nobody admitted."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from burnin.facts import Facts
from burnin.gate.decide import INCOMPLETE, PASS, decide
from burnin.soak.clock import SimClock
from burnin.soak.monitor import Limits
from burnin.soak.plan import DRY_RUN_REASON, SoakSettings
from burnin.soak.scheduler import Soak, SoakContext
from burnin.soak.state import STATE_FILE, NodeProgress, SoakState, Store
from burnin.soak.verdicts import Judge
from burnin.topology import Topology
from burnin.transport.base import CommandResult

HOUR = 3600.0
CTX = SoakContext(settings=SoakSettings(), limits=Limits(), gpu_names=("gpu0",), bus_names={"0000:1b:00": "gpu0"},
                  compute_hcas=(), sockets={0: 2, 1: 2})


class RecordingNodes:
    """Every command and sample the soak asks of its nodes (the commands fail, the samples are empty)."""

    def __init__(self) -> None:
        self.nodes = ["n1", "n2"]
        self.commands: list[tuple[str, ...]] = []
        self.samples = 0

    def run(self, nodes: Sequence[str], argv: Sequence[str], *, timeout: float,
            stdin: bytes | None = None) -> dict[str, CommandResult]:
        self.commands.append(tuple(argv))
        return {n: CommandResult(n, tuple(argv), 1, "", "", 0.1) for n in nodes}

    def sample(self, *, timeout: float, nodes: Sequence[str] | None = None) -> dict[str, Facts]:
        self.samples += 1
        return {n: Facts.unreachable_node(n, "no sample") for n in self.nodes}

    def close(self) -> None:
        pass


def soak(tmp_path: Path, *, dry_run: bool) -> tuple[Soak, RecordingNodes, list[str]]:
    state = SoakState(command={"dry_run": dry_run}, duration_s=2 * HOUR, interval_s=600.0,
                      nodes={n: NodeProgress(n) for n in ("n1", "n2")})
    nodes = RecordingNodes()
    said: list[str] = []
    store = Store(tmp_path)
    run = Soak(nodes, state, store, SimClock(0.0, lambda t: None), CTX, samples=store.samples(state),
               results=store.results(state), say=said.append)
    return run, nodes, said


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "live"])
def test_dry_run_runs_and_samples_nothing_and_prints_every_stage(tmp_path: Path, dry_run: bool) -> None:
    run, nodes, said = soak(tmp_path, dry_run=dry_run)
    run.run()
    if not dry_run:  # the same fake sees a real soak's stress and samples: the dry run's silence is not vacuous
        assert {argv[0] for argv in nodes.commands} >= {"dcgmi", "sh", "all_reduce_perf", "stress-ng", "nvme"}
        assert nodes.samples > 0 and not said
        return
    assert nodes.commands == [] and nodes.samples == 0
    assert not (tmp_path / STATE_FILE).exists()  # a dry run leaves no checkpoint to --resume
    text = "\n".join(said)
    for shown in ("[n[1-2]] dcgmi diag -r 3 -j", "gpu_burn -tc 3600", "all_reduce_perf -b 8G -e 8G",
                  "stress-ng --cpu 0 --vm 4", "numactl --cpunodebind=1 --membind=1 stream",
                  "nvme list --output-format=json", "nvme smart-log DEVICE"):
        assert shown in text, shown


def test_dry_run_verdicts_are_incomplete_for_that_reason_and_admit_nobody(tmp_path: Path,
                                                                          h100_topology: Topology) -> None:
    run, _, _ = soak(tmp_path, dry_run=True)
    run.run()
    judge = Judge(run.state, run.samples, run.results, CTX.settings, h100_topology, "the defaults")
    outcomes = judge.outcomes()
    assert outcomes and {o.status for o in outcomes} == {INCOMPLETE} and not any(o.status == PASS for o in outcomes)
    assert all(o.reason == f"{o.check} not judged: {DRY_RUN_REASON}" for o in outcomes)
    assert not any(d.admitted for d in decide(["n1", "n2"], outcomes).values())
