"""``--dry-run`` in the fabric phase: each launch printed at the launcher seam, none started, every check incomplete."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from fabric_support import nvml_facts, result

from burnin.checks import load_all
from burnin.dispatch.base import JobLauncher
from burnin.evaluate.verdict import Status
from burnin.fabric.launch import DryRunLauncher, SlurmLauncher, TransportLauncher
from burnin.fabric.phase import FabricOptions, run_fabric_phase
from burnin.fabric.settings import PRODUCTION, SIMULATED
from burnin.facts import Facts
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


class Dispatcher:
    """A dispatcher whose launcher runs through ``transport`` or Slurm; it records every gather too."""

    def __init__(self, transport: RecordingTransport | None = None, client: RecordingClient | None = None) -> None:
        self._transport = transport
        self._client = client
        self.gathers: list[str] = []

    def launcher(self, facts: Mapping[str, Facts]) -> JobLauncher:
        if self._client is not None:
            return JobLauncher("slurm", "srun", "production", slurm=SlurmJobs(self._client))
        return JobLauncher("sim", "local", "simulated", transport=self._transport)

    def gather(self, *, sources: str, timeout: float) -> dict[str, Facts]:
        self.gathers.append(sources)
        return {node: nvml_facts(node) for node in NODES}


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
    dispatcher = Dispatcher(transport)
    gathered = facts()
    said: list[str] = []
    run_fabric_phase(dispatcher, gathered, topology=h100_topology, out_dir=tmp_path, options=FabricOptions(),
                     dry_run=dry_run, say=said.append)
    started = {part for _, argv in transport.calls for part in argv}
    if not dry_run:  # the same observation sees the tools of a real run: the dry run's silence is not vacuous
        assert all(tool in started for tool in TOOLS) and dispatcher.gathers == ["nvml"] and not said
        return
    assert transport.calls == [] and dispatcher.gathers == []  # not even NVL-04's second gather
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
    run_fabric_phase(Dispatcher(client=client), facts(), topology=h100_topology, out_dir=tmp_path,
                     options=FabricOptions(), dry_run=True, say=said.append)
    assert client.calls == []  # no salloc, no srun, no scancel
    steps = [line for line in said if line.startswith("srun ")]
    assert steps and all("--jobid=<allocation>" in line for line in steps)
    assert any("--nodelist=sim[01-03]" in line or "--nodelist=sim01,sim02,sim03" in line for line in steps)
    assert any("exclusive Slurm allocation of sim[01-03]" in line for line in said)


def test_dry_run_launcher_shows_what_each_launcher_would_start(h100_topology: Topology) -> None:
    said: list[str] = []
    transport = RecordingTransport()
    dry = DryRunLauncher(TransportLauncher(transport, h100_topology, PRODUCTION, "mpirun"), said.append, "why")
    assert dry.open(["n1", "n2"]) is None
    runs = dry.per_node(["n1", "n2"], ["nvbandwidth", "-i", "3"], timeout=5)
    job = dry.job(["n1", "n2"], "all_reduce", ib_hca=None, timeout=5)
    assert transport.calls == []
    assert said[0] == "[n[1-2]] nvbandwidth -i 3" and said[1].startswith("[n1] ") and " mpirun " in said[1]
    assert {r.error for r in (*runs.values(), job)} == {"why"} and not any(r.ok for r in runs.values())
    client = RecordingClient()
    inside = DryRunLauncher(SlurmLauncher(client, h100_topology, SIMULATED, job_id="42"), said.append, "why")
    inside.per_node(["n1"], ["nvbandwidth"], timeout=5)
    assert client.calls == [] and said[-1].startswith("srun --jobid=42 ")


@pytest.mark.parametrize(("nodes", "settings", "group", "localise"), [
    (["sim01", "sim02"], {}, True, "then, if that run falls short:"),
    (["sim01", "sim02"], {"localize": "always"}, True, "then (--localize):"),
    (["sim01", "sim02"], {"localize": "never"}, True, None),
    (["sim01", "sim02"], {"multi_node": False}, False, None),
    (["sim01"], {}, False, None),
], ids=["two-nodes", "localize", "never-localize", "multi-node-off", "one-node"])
def test_plan_shows_the_multi_node_run_exactly_when_a_real_run_would_start_one(
        h100_topology: Topology, tmp_path: Path, nodes: list[str], settings: dict[str, object], group: bool,
        localise: str | None) -> None:
    from burnin.fabric.phase import Phase, _CommandLog

    said: list[str] = []
    fabric = SIMULATED.replace(**settings)
    launcher = DryRunLauncher(TransportLauncher(RecordingTransport(), h100_topology, fabric, "sim"), said.append,
                              DRY_RUN_REASON)
    result = Phase(launcher, h100_topology, fabric, _CommandLog(tmp_path / "log")).plan(nodes, say=said.append)
    assert result.unavailable == DRY_RUN_REASON and result.group is None
    jobs = [line for line in said if f"BURNIN_SIM_JOB_NODES={','.join(nodes)} " in line]  # a simulated job
    assert bool(jobs) is group
    assert [line.split(": pairwise")[0].removeprefix("# fabric: ") for line in said if "pairwise" in line] == (
        [localise.rstrip(":")] if localise else [])
