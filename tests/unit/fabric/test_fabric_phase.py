"""The fabric phase against a fake launcher: exclusion, group, localisation, rails, regroup, documents."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from fabric_support import (
    FakeLauncher,
    alone,
    before,
    ib_write_bw_output,
    nvbandwidth_output,
    nvml_facts,
    perf_output,
    result,
)

from burnin.errors import UsageError
from burnin.fabric.phase import FabricOptions, Phase, refuse_launcher, run_fabric_phase
from burnin.fabric.results import node_documents
from burnin.fabric.settings import SIMULATED
from burnin.facts import Facts
from burnin.topology import Topology
from burnin.transport.base import CommandResult

NODES = [f"sim{i:02d}" for i in range(1, 9)]
NVB = nvbandwidth_output(8)


def fake(slow_node: str | None = "sim04", hang: str | None = "sim06", wrong: str | None = None,
         slow_gdr: str | None = None, wrong_multi: str | None = None) -> FakeLauncher:
    """A rack where ``slow_node`` is slow only in multi-node runs (mlx5_2's rail: invisible in loopback),
    ``hang`` hangs nccl-tests, ``wrong`` corrupts them, and ``slow_gdr`` has mlx5_2 at half rate in IB-08."""

    def per_node(node: str, command: Sequence[str]) -> CommandResult:
        if any("nvbandwidth" in part for part in command):
            return result(node, NVB)
        if "ib_write_bw" in command:
            slow = node == slow_gdr and "mlx5_2" in command
            return result(node, ib_write_bw_output(command, 196.0 if slow else 392.0))
        if node == hang:
            return result(node, perf_output(480.0, rows=1, complete=False), status=124)
        return result(node, perf_output(479.0, wrong=2 if node == wrong else 0))

    def job(nodes: Sequence[str], ib_hca: str | None) -> CommandResult:
        rails = 1 if ib_hca else 8
        slow = slow_node in nodes and (ib_hca is None or "mlx5_2" in ib_hca)
        value = rails * 46.0 * (0.5 if slow else 1.0)
        corrupt = wrong in nodes or wrong_multi in nodes
        return result(nodes[0], perf_output(value, wrong=1 if corrupt else 0, ranks=8 * len(nodes)))

    return FakeLauncher(per_node, job)


def phase(launcher: FakeLauncher, topology: Topology, tmp_path: Path, **settings: object) -> Phase:
    return Phase(launcher, topology, SIMULATED.replace(**settings), facts=before(NODES), failed_alone=alone)


def test_slow_hca_named_with_rails_and_the_rest_cleared(h100_topology: Topology, tmp_path: Path) -> None:
    launcher = fake()
    res = phase(launcher, h100_topology, tmp_path).run(NODES)
    assert res.excluded["sim06"] == ("left out of multi-node runs and localisation: NCCL-01 incomplete, NCCL-05 "
                                    "incomplete on this node")
    assert "hung" in res.excluded_why["sim06"][0]
    assert res.group is not None and "sim06" not in res.group.nodes and not res.group_passed
    loc = res.localization
    assert loc is not None and loc.named == ["sim04"] and loc.rounds == 3 and not loc.unresolved
    assert "the group failed" in loc.reason
    assert [s.hca for s in loc.slow["sim04"]] == ["mlx5_2"]
    assert len(loc.rails["sim04"]) == 8 and loc.rail_partner["sim04"] in loc.cleared
    assert res.regroup is not None and "sim04" not in res.regroup.nodes and res.regroup_passed
    docs = node_documents(res)
    assert docs["sim04"]["multi"]["localization"]["status"] == "named"
    assert docs["sim04"]["multi"]["localization"]["slow_hcas"][0]["hca"] == "mlx5_2"
    assert docs["sim01"]["multi"]["localization"]["status"] == "cleared"
    assert docs["sim06"]["multi"]["excluded"].startswith("left out of multi-node runs")
    assert docs["sim01"]["fleet"]["single.all_reduce"]["count"] == 7  # the hung node has no busbw
    json.dumps(res.to_json())


def test_a_passing_group_is_not_localised_unless_asked(h100_topology: Topology, tmp_path: Path) -> None:
    res = phase(fake(None, None), h100_topology, tmp_path).run(NODES)
    assert res.group_passed and res.localization is None and res.regroup is None
    asked = phase(fake(None, None), h100_topology, tmp_path, localize="always").run(NODES)
    assert asked.localization is not None and asked.localization.rounds == 1
    assert asked.localization.named == [] and asked.localization.reason == "--localize"
    assert sorted(asked.localization.cleared) == NODES


def test_wrong_values_on_one_node_leave_it_out(h100_topology: Topology, tmp_path: Path) -> None:
    res = phase(fake(None, None, wrong="sim05"), h100_topology, tmp_path).run(NODES)
    assert res.single["sim05"]["all_reduce"].corrupt
    assert res.excluded == {"sim05": "left out of multi-node runs and localisation: NCCL-05 failed on this node"}
    assert res.group is not None and "sim05" not in res.group.nodes and res.group_passed


def test_wrong_values_only_across_nodes_fail_the_group_and_name_the_node(h100_topology: Topology,
                                                                         tmp_path: Path) -> None:
    res = phase(fake(None, None, wrong_multi="sim05"), h100_topology, tmp_path).run(NODES)
    assert res.excluded == {}
    assert res.group is not None and res.group.corrupt and not res.group_passed
    assert res.localization is not None and res.localization.named == ["sim05"]
    assert res.regroup is not None and "sim05" not in res.regroup.nodes and res.regroup_passed


def test_localisation_off_and_multi_node_off(h100_topology: Topology, tmp_path: Path) -> None:
    res = phase(fake(), h100_topology, tmp_path, localize="never").run(NODES)
    assert not res.group_passed and res.localization is None
    solo = phase(fake(), h100_topology, tmp_path, multi_node=False).run(NODES)
    assert solo.group is None and node_documents(solo)["sim01"]["multi"]["applicable"] is False


def test_one_node_has_no_multi_node_run(h100_topology: Topology, tmp_path: Path) -> None:
    launcher = fake(None, None)
    res = phase(launcher, h100_topology, tmp_path).run(["sim01"])
    assert res.group is None and launcher.jobs == []
    assert node_documents(res)["sim01"]["multi"] == {"floor_gbps": 300.0, "applicable": False,
                                                     "reason": "a single node: no multi-node run"}


def test_no_allocation_makes_everything_unavailable(h100_topology: Topology, tmp_path: Path) -> None:
    launcher = FakeLauncher(lambda n, c: result(n), lambda n, h: result(n[0]), unavailable="no Slurm allocation: busy")
    res = phase(launcher, h100_topology, tmp_path).run(NODES)
    assert res.unavailable and res.single == {} and launcher.jobs == []
    assert node_documents(res)["sim03"]["unavailable"] == "no Slurm allocation: busy"


def test_run_fabric_phase_merges_facts_and_writes_fabric_json(h100_topology: Topology, tmp_path: Path) -> None:
    launcher = fake()
    launcher._gather = _gathered  # sim07's collector times out on the second look
    facts = {n: Facts(n, {**nvml_facts(n).data, "root": f"/tmp/rack/{n}/root"}) for n in NODES}
    facts["sim08"] = Facts.unreachable_node("sim08", "ssh: timed out")
    res = run_fabric_phase(launcher, facts, topology=h100_topology, out_dir=tmp_path, options=FabricOptions(),
                           failed_alone=alone)
    assert res.settings.mpi == "pmi2"  # simulated nodes: the simulated preset
    assert "sim08" not in res.nodes and "fabric" not in facts["sim08"].data
    assert facts["sim04"].data["fabric"]["multi"]["localization"]["status"] == "named"
    fabric_json = json.loads((tmp_path / "fabric.json").read_text())
    assert fabric_json["localization"]["named"] == ["sim04"]
    assert launcher.closed
    # NVL-04: the collector's nvml source launched again (its own timeout), between the single-node and the
    # multi-node runs; recorded for every measured node, the one the gather lost as unreachable
    assert launcher.collected == [(("--sources", "nvml", "--timeout", "60"), 120.0)]
    assert launcher.steps == ["p2p", "collect"]
    after = facts["sim01"].data["fabric"]["nvlink_after"]
    assert after["after"] == ["all_reduce_perf", "nvbandwidth", "p2pBandwidthLatencyTest", "ib_write_bw"]
    assert after["nvml"]["gpus"][0]["nvlink"][0] == {"link": 0, "active": True, "replay": 0, "recovery": 0,
                                                     "crc_flit": 0}
    assert facts["sim07"].data["fabric"]["nvlink_after"] == {
        "unreachable": "collector: timed out", "after": after["after"]}
    assert fabric_json["nvlink_after"]["sim07"]["unreachable"] == "collector: timed out"
    assert "sim07" in res.excluded and "NVL-04 incomplete" in res.excluded["sim07"]
    assert facts["sim01"].data["fabric"]["p2p"]["status"] == "ok"
    assert any(n.startswith("NVL-04: NVML gathered again on 6 of 7 nodes after all_reduce_perf, nvbandwidth")
               for n in launcher.notes)


def _gathered(nodes: Sequence[str]) -> dict[str, Facts]:
    """NVML gathered again: healthy, but sim07's collector times out."""
    facts = {n: nvml_facts(n) for n in nodes}
    facts["sim07"] = Facts.unreachable_node("sim07", "collector: timed out")
    return facts


def test_a_launcher_setting_the_dispatcher_cannot_honour_is_a_usage_error() -> None:
    slurm, local = FakeLauncher(result, result), FakeLauncher(result, result)
    slurm.form = "srun"  # type: ignore[assignment]
    with pytest.raises(UsageError, match="launcher: mpirun needs a transport to the nodes, which fake dispatch"):
        refuse_launcher(SIMULATED.replace(launcher="mpirun"), slurm)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="srun needs --via slurm"):
        refuse_launcher(SIMULATED.replace(launcher="srun"), local)  # type: ignore[arg-type]
    for launcher, setting in ((slurm, "srun"), (slurm, "auto"), (local, "mpirun"), (local, "auto")):
        refuse_launcher(SIMULATED.replace(launcher=setting), launcher)  # type: ignore[arg-type]
