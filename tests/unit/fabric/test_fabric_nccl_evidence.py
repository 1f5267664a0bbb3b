"""The fabric phase's STO-02 evidence runs: the group at NCCL_DEBUG=INFO, then the node-configuration run;
each node's record holds its own host's lines (a storage device one node opened is charged to it only)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from fabric_support import (
    FakeLauncher,
    alone,
    before,
    ib_write_bw_output,
    nvbandwidth_output,
    perf_output,
    result,
)

from burnin.fabric import commands
from burnin.fabric.phase import Phase
from burnin.fabric.settings import SIMULATED, FabricSettings
from burnin.launch.base import JobSpec
from burnin.sim import SimNode, build_rack
from burnin.topology import Topology
from burnin.transport.base import CommandResult

pytestmark = pytest.mark.rack

NODES = ["sim01", "sim02", "sim03"]


@pytest.fixture(scope="module")
def rack(h100_topology: Topology) -> Iterator[dict[str, SimNode]]:
    shm = Path("/dev/shm")
    base = Path(tempfile.mkdtemp(prefix="burnin-evidence-", dir=shm if os.access(shm, os.W_OK) else None))
    try:
        yield {n.name: n for n in build_rack(base, h100_topology, NODES, {"sim02": ["nccl-hca-leak"]})}
    finally:
        shutil.rmtree(base, ignore_errors=True)


def simulated_nccl(node: SimNode, env: dict[str, str]) -> str:
    """The simulated NCCL's INFO lines of a short job run as ``node``."""
    full = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "PMI", "SLURM_", "BURNIN_SIM_JOB"))}
    full.update({**node.environment(), **env})
    proc = subprocess.run(["all_reduce_perf", "-b", "8", "-e", "8", "-g", "8", "-n", "1", "-w", "1"], env=full,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    return "".join(line + "\n" for line in proc.stdout.splitlines() if "NCCL INFO" in line)


class EvidenceLauncher(FakeLauncher):
    """Single-node runs pass; jobs print the simulated NCCL's INFO lines for the environment they would get."""

    def __init__(self, rack: dict[str, SimNode], topology: Topology) -> None:
        super().__init__(self._single, lambda nodes, hca: result(nodes[0], ""))
        self.rack, self.topology = rack, topology
        self.calls: list[tuple[str | None, float]] = []

    @staticmethod
    def _single(node: str, command: Sequence[str]) -> CommandResult:
        if any("nvbandwidth" in part for part in command):
            return result(node, nvbandwidth_output(8))
        if "ib_write_bw" in command:
            return result(node, ib_write_bw_output(command, 392.0))
        return result(node, perf_output(479.0))

    def job(self, spec: JobSpec) -> CommandResult:
        evidence = spec.env.get("NCCL_DEBUG") == "INFO"
        name = None if not evidence else "node-config" if "NCCL_IB_HCA" not in spec.env else "group"
        self.calls.append((name, spec.timeout_s))
        env = {**spec.env, "BURNIN_SIM_JOB_NODES": ",".join(spec.nodes)}
        lines = simulated_nccl(self.rack[spec.nodes[0]], env) if evidence else ""
        return result(spec.nodes[0], lines + perf_output(8 * 46.0, ranks=8 * len(spec.nodes)))


def _phase(launcher: EvidenceLauncher, topology: Topology, settings: FabricSettings) -> Phase:
    return Phase(launcher, topology, settings, facts=before(NODES), failed_alone=alone)


def test_the_phase_records_each_evidence_run_per_node(rack: dict[str, SimNode], h100_topology: Topology,
                                                      tmp_path: Path) -> None:
    launcher = EvidenceLauncher(rack, h100_topology)
    settings = SIMULATED.replace(localize="never", timeout_s=90.0)
    res = _phase(launcher, h100_topology, settings).run(NODES)
    assert launcher.calls == [("group", 90.0), ("node-config", 90.0)]  # the 180 s evidence limit, capped
    assert res.group is not None and res.group.ok and res.group_passed
    runs = res.nccl_runtime
    assert sorted(runs) == NODES and [r["run"] for r in runs["sim02"]] == ["group", "node-config"]
    group, node_config = runs["sim02"]
    assert group["status"] == node_config["status"] == "read"
    assert group["ib_hca"] == commands.compute_hca_list(h100_topology) and node_config["ib_hca"] is None
    assert "mlx5_8" not in str(group["devices"])  # burnin's own NCCL_IB_HCA wins over the node's nccl.conf
    assert "[8]mlx5_8:1/RoCE" in node_config["lines"]["NET/IB"]
    assert "mlx5_8" not in str(runs["sim01"]) and "mlx5_8" not in str(runs["sim03"])  # charged to sim02 only
    assert res.to_json()["nccl_runtime"] == runs


def test_no_evidence_when_off_or_without_a_storage_fabric(rack: dict[str, SimNode], h100_topology: Topology,
                                                          tmp_path: Path) -> None:
    import dataclasses

    launcher = EvidenceLauncher(rack, h100_topology)
    off = SIMULATED.replace(localize="never", nccl_evidence="off")
    assert _phase(launcher, h100_topology, off).run(NODES[:2]).nccl_runtime == {}
    no_storage = dataclasses.replace(h100_topology, storage=None)
    assert _phase(launcher, no_storage, SIMULATED.replace(localize="never"),
                 ).run(NODES[:2]).nccl_runtime == {}
    group_only = SIMULATED.replace(localize="never", nccl_evidence="group", nccl_evidence_timeout_s=5.0)
    res = _phase(launcher, h100_topology, group_only).run(NODES[:2])
    assert [r["run"] for r in res.nccl_runtime["sim01"]] == ["group"]
    assert launcher.calls == [(None, 60.0), (None, 60.0), ("group", 60.0)]
