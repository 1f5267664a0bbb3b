"""``--dry-run`` in the fabric phase: the launcher prints the phase's plan and holds nothing; nothing starts, not
even NVL-04's collector, and every check is incomplete. The phase runs the same code as a live run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from fabric_support import nvml_facts, result

from burnin.checks import load_all
from burnin.checks.fabric import failed_alone
from burnin.evaluate.verdict import Status
from burnin.fabric.phase import FabricOptions, Phase, run_fabric_phase
from burnin.fabric.settings import SIMULATED
from burnin.facts import Facts
from burnin.launch.base import Launcher
from burnin.launch.dryrun import DryRunLauncher
from burnin.launch.local import LocalLauncher
from burnin.launch.slurm import SlurmLauncher
from burnin.phases import DRY_RUN_REASON
from burnin.topology import Topology
from burnin.transport.base import CommandResult
from burnin.transport.slurm_jobs import SlurmJobs

NODES = ["sim01", "sim02", "sim03"]
TOOLS = ("all_reduce_perf", "nvbandwidth", "p2pBandwidthLatencyTest", "ib_write_bw")


class RecordingTransport:
    """Every command a phase starts on a node (answers with nothing useful)."""

    name = "local"

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []

    def run(self, node: str, argv: Sequence[str], *, timeout: float, stdin: bytes | None = None,
            env: Mapping[str, str] | None = None) -> CommandResult:
        self.calls.append((node, list(argv)))
        return result(node, "")

    def close(self) -> None:
        pass


class RecordingClient:
    """Slurm's client commands (salloc, srun, scancel ...) as they would be run where burnin runs."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def run(self, argv: Sequence[str], *, timeout: float = 10.0) -> CommandResult:
        self.calls.append(list(argv))
        return result("ctl", "", status=1)


def sim_job(nodes: Sequence[str]) -> dict[str, str]:
    return {"BURNIN_SIM_JOB_NODES": ",".join(nodes)}


def facts() -> dict[str, Facts]:
    return {node: nvml_facts(node) for node in NODES}


def fabric_verdicts(node_facts: Facts, topology: Topology) -> dict[str, Status]:
    checks = load_all()
    ids = [c for c in checks if c.startswith(("NCCL-", "NVL-")) or c == "IB-08"]
    return {c: checks[c].func(node_facts, topology).status for c in ids}


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "live"])
def test_dry_run_starts_nothing_on_the_nodes_and_prints_every_launch(h100_topology: Topology, tmp_path: Path,
                                                                    dry_run: bool) -> None:
    transport = RecordingTransport()
    said: list[str] = []
    launcher: Launcher = LocalLauncher(transport, sim_job)
    if dry_run:
        launcher = DryRunLauncher(launcher, said.append, DRY_RUN_REASON)
    gathered = facts()
    run_fabric_phase(launcher, gathered, topology=h100_topology, out_dir=tmp_path, options=FabricOptions(),
                     failed_alone=failed_alone)
    started = {part for _, argv in transport.calls for part in argv}
    if not dry_run:  # the same observation sees the tools of a real run: the dry run's silence is not vacuous
        assert all(tool in started for tool in TOOLS) and "burnin.collector" in started and not said
        return
    assert transport.calls == []  # not even NVL-04's second look
    text = "\n".join(said)
    assert all(f" {tool}" in text for tool in TOOLS)
    assert "[sim[01-03]] env NCCL_IB_HCA==mlx5_0:1" in text  # per-node runs: every node at once
    assert any(line.startswith("[sim01] ") and " all_reduce_perf " in line for line in said)  # the group's run
    assert "localisation" in text  # what depends on results is named, not invented
    for node in NODES:
        assert gathered[node].data["fabric"]["unavailable"] == DRY_RUN_REASON
        verdicts = fabric_verdicts(gathered[node], h100_topology)
        assert verdicts and set(verdicts.values()) == {Status.INCOMPLETE}, verdicts


def test_dry_run_through_slurm_allocates_nothing_and_shows_the_srun_steps(h100_topology: Topology,
                                                                          tmp_path: Path) -> None:
    client = RecordingClient()
    said: list[str] = []
    dry = DryRunLauncher(SlurmLauncher(SlurmJobs(client)), said.append, DRY_RUN_REASON)
    run_fabric_phase(dry, facts(), topology=h100_topology, out_dir=tmp_path, options=FabricOptions(),
                     failed_alone=failed_alone)
    assert client.calls == []  # no salloc, no srun, no scancel, not even scontrol
    steps = [line for line in said if line.startswith("srun ")]
    assert steps and all("--jobid=<allocation>" in line for line in steps)
    assert any("--nodelist=sim[01-03]" in line for line in steps)
    assert any("exclusive Slurm allocation of sim[01-03]" in line for line in said)


@pytest.mark.parametrize(("nodes", "settings", "group", "localise"), [
    (["sim01", "sim02"], {}, True, "then, if that run falls short:"),
    (["sim01", "sim02"], {"localize": "always"}, True, "then (--localize):"),
    (["sim01", "sim02"], {"localize": "never"}, True, None),
    (["sim01", "sim02"], {"multi_node": False}, False, None),
    (["sim01"], {}, False, None),
], ids=["two-nodes", "localize", "never-localize", "multi-node-off", "one-node"])
def test_the_plan_shows_the_multi_node_run_exactly_when_a_real_run_would_start_one(
        h100_topology: Topology, nodes: list[str], settings: dict[str, object], group: bool,
        localise: str | None) -> None:
    said: list[str] = []
    fabric = SIMULATED.replace(**settings)
    launcher = DryRunLauncher(LocalLauncher(RecordingTransport(), sim_job), said.append, DRY_RUN_REASON)
    result = Phase(launcher, h100_topology, fabric, failed_alone=failed_alone).run(nodes)
    assert result.unavailable == DRY_RUN_REASON and result.group is None and result.single == {}
    jobs = [line for line in said if f"BURNIN_SIM_JOB_NODES={','.join(nodes)} " in line]  # a simulated job
    assert bool(jobs) is group
    assert [line.split(": pairwise")[0].removeprefix("# fabric: ") for line in said if "pairwise" in line] == (
        [localise.rstrip(":")] if localise else [])
