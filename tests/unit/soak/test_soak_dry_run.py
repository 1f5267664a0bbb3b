"""``burnin soak --dry-run``: the stages' commands printed, nothing run or sampled on any node, nobody admitted."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from burnin.gate.decide import INCOMPLETE, PASS, decide
from burnin.launch.base import Launcher
from burnin.launch.dryrun import DryRunLauncher
from burnin.launch.ssh import TransportLauncher
from burnin.soak.clock import SimClock
from burnin.soak.monitor import Limits
from burnin.soak.nodes import open_nodes
from burnin.soak.plan import DRY_RUN_REASON, SoakSettings
from burnin.soak.scheduler import Soak, SoakContext, plan_items
from burnin.soak.state import STATE_FILE, NodeProgress, SoakState, Store
from burnin.soak.verdicts import Judge
from burnin.topology import Topology
from burnin.transport.base import CommandResult

HOUR = 3600.0
CTX = SoakContext(settings=SoakSettings(), limits=Limits(), gpu_names=("gpu0",), bus_names={"0000:1b:00": "gpu0"},
                  compute_hcas=(), sockets={0: 2, 1: 2})


class RecordingTransport:
    """Every command the soak starts on a node (each fails; the collector's output is no facts)."""

    name = "recording"

    def __init__(self) -> None:
        self.commands: list[tuple[str, ...]] = []

    def run(self, node: str, argv: Sequence[str], *, timeout: float, stdin: bytes | None = None,
            env: Mapping[str, str] | None = None) -> CommandResult:
        self.commands.append(tuple(argv))
        return CommandResult(node, tuple(argv), 1, "", "", 0.1)

    def close(self) -> None:
        pass


def soak(tmp_path: Path, *, dry_run: bool) -> tuple[SoakState, Store, RecordingTransport, list[str], str | None]:
    """The soak as ``burnin soak`` opens it: its nodes held through a launcher told the plan; live, one loop."""
    state = SoakState(command={"dry_run": dry_run}, duration_s=2 * HOUR, interval_s=600.0,
                      nodes={n: NodeProgress(n) for n in ("n1", "n2")})
    transport = RecordingTransport()
    said: list[str] = []
    launcher: Launcher = TransportLauncher(transport, name="recording")
    if dry_run:
        launcher = DryRunLauncher(launcher, said.append, DRY_RUN_REASON)
    store = Store(tmp_path)
    plan = plan_items(CTX, list(state.nodes), duration_s=state.duration_s, interval_s=state.interval_s)
    nodes, failure = open_nodes(launcher, list(state.nodes), hold_s=3 * HOUR, plan=plan)
    if failure is None:
        Soak(nodes, state, store, SimClock(0.0, lambda t: None), CTX, samples=store.samples(state),
             results=store.results(state)).run()
    return state, store, transport, said, failure


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "live"])
def test_dry_run_runs_and_samples_nothing_and_prints_every_stage(tmp_path: Path, dry_run: bool) -> None:
    _, _, transport, said, failure = soak(tmp_path, dry_run=dry_run)
    if not dry_run:  # the same transport sees a real soak's stress and samples: the dry run's silence is not vacuous
        assert {argv[0] for argv in transport.commands} >= {"dcgmi", "sh", "all_reduce_perf", "stress-ng", "nvme"}
        assert any("burnin.collector" in argv for argv in transport.commands) and not said and failure is None
        return
    assert failure == DRY_RUN_REASON and transport.commands == []
    assert not (tmp_path / STATE_FILE).exists()  # a dry run leaves no checkpoint to --resume
    text = "\n".join(said)
    for shown in ("[n[1-2]] dcgmi diag -r 3 -j", "gpu_burn -tc 3600", "all_reduce_perf -b 8G -e 8G",
                  "stress-ng --cpu 0 --vm 4", "numactl --cpunodebind=1 --membind=1 stream",
                  "nvme list --output-format=json", "nvme smart-log DEVICE", "(with burnin's GPU stress on stdin)"):
        assert shown in text, shown


def test_dry_run_verdicts_are_incomplete_for_that_reason_and_admit_nobody(tmp_path: Path,
                                                                          h100_topology: Topology) -> None:
    state, store, _, _, _ = soak(tmp_path, dry_run=True)
    judge = Judge(state, store.samples(state), store.results(state), CTX.settings, h100_topology, "the defaults")
    outcomes = judge.outcomes()
    assert outcomes and {o.status for o in outcomes} == {INCOMPLETE} and not any(o.status == PASS for o in outcomes)
    assert all(o.reason == f"{o.check} not judged: {DRY_RUN_REASON}" for o in outcomes)
    assert not any(d.admitted for d in decide(["n1", "n2"], outcomes).values())
