"""Small racks (2-4 nodes): only bad nodes are named, a healthy node is cleared whenever some test can clear
it, and nodes that a single-node check already rejected stay out of the multi-node runs."""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
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

from burnin.checks.base import evaluate
from burnin.evaluate.verdict import Status
from burnin.fabric.localize import Localizer
from burnin.fabric.phase import Phase
from burnin.fabric.results import PhaseResult, node_documents
from burnin.fabric.settings import SIMULATED
from burnin.facts import Facts
from burnin.topology import Topology
from burnin.transport.base import CommandResult


def drive(planner: Localizer, bad: set[str]) -> None:
    while tests := planner.next_round():
        planner.record([not (set(t.nodes) & bad) for t in tests])


RACKS = [(n, frozenset(bad)) for n in (2, 3, 4, 5) for k in range(n + 1)
         for bad in itertools.combinations([f"s{i}" for i in range(n)], k)]


@pytest.mark.parametrize(("size", "bad"), RACKS, ids=[f"{n}-{'+'.join(sorted(b)) or 'none'}" for n, b in RACKS])
@pytest.mark.parametrize("seed", range(4))
def test_every_small_rack_names_only_bad_nodes_and_clears_what_can_be_cleared(size: int, bad: frozenset[str],
                                                                             seed: int) -> None:
    nodes = [f"s{i}" for i in range(size)]
    planner = Localizer(nodes, seed=seed)
    drive(planner, set(bad))
    good = set(nodes) - bad
    assert planner.named <= bad, "a healthy node was named"
    assert not (planner.good & bad), "a bad node was cleared"
    if len(good) >= 2:
        # two healthy nodes can always vouch for each other, and then for everyone else
        assert planner.good == good and planner.named == bad and not planner.unresolved
    elif good:
        # one healthy node alone: no pair of it passes, nothing can clear it (or name the others)
        assert planner.unresolved == set(nodes) and not planner.named
    assert planner.rounds <= planner.max_rounds


@pytest.mark.parametrize("size", [6, 8, 12, 16, 32])
@pytest.mark.parametrize("share", [0.25, 0.5, 0.75])
def test_racks_with_many_bad_nodes_still_clear_every_healthy_node(size: int, share: float) -> None:
    nodes = [f"s{i:02d}" for i in range(size)]
    for trial in range(8):
        rng = random.Random(size * 100 + trial)
        bad = set(rng.sample(nodes, max(1, round(size * share))))
        planner = Localizer(nodes, seed=trial)
        drive(planner, bad)
        assert planner.named <= bad and not (planner.good & bad)
        assert planner.good == set(nodes) - bad, (sorted(bad), trial)


def test_a_failed_bisection_group_does_not_block_re_pairing() -> None:
    """Every half and quarter of 8 nodes holds a bad node: bisection tells nothing, re-pairing still does."""
    nodes = [f"s{i}" for i in range(8)]
    planner = Localizer(nodes, seed=0)
    drive(planner, {"s0", "s2", "s4", "s7"})
    assert planner.good == {"s1", "s3", "s5", "s6"} and planner.named == {"s0", "s2", "s4", "s7"}


def test_three_nodes_confirm_with_the_pass_one_mate() -> None:
    """The old planner never confirmed here: the only other good node had been the suspect's pass-one mate."""
    planner = Localizer(["a", "b", "c"], seed=0)
    drive(planner, {"a"})
    assert planner.named == {"a"} and planner.good == {"b", "c"}
    kinds = [t.kind for rnd in planner.history for t, _ in rnd if t.suspect == "a"]
    assert kinds == ["partner", "confirm"]


# ---------------------------------------------------------------- the phase on small racks


def rack(slow_gdr: str | None = None, slow_link: str | None = None, wrong: str | None = None) -> FakeLauncher:
    """``slow_gdr``: mlx5_2 at half rate in loopback (IB-08); ``slow_link``: its rail slow in jobs only."""

    def per_node(node: str, command: Sequence[str]) -> CommandResult:
        if any("nvbandwidth" in part for part in command):
            return result(node, nvbandwidth_output(8))
        if "ib_write_bw" in command:
            return result(node, ib_write_bw_output(command, 196.0 if node == slow_gdr and "mlx5_2" in command
                                                   else 392.0))
        return result(node, perf_output(479.0, wrong=3 if node == wrong else 0))

    def job(nodes: Sequence[str], ib_hca: str | None) -> CommandResult:
        slow = any(n in (slow_gdr, slow_link) for n in nodes) and (ib_hca is None or "mlx5_2" in ib_hca)
        value = (1 if ib_hca else 8) * 46.0 * (0.5 if slow else 1.0)
        return result(nodes[0], perf_output(value, ranks=8 * len(nodes)))

    return FakeLauncher(per_node, job)


def measure(launcher: FakeLauncher, topology: Topology, tmp_path: Path, size: int) -> PhaseResult:
    nodes = [f"sim{i:02d}" for i in range(1, size + 1)]
    return Phase(launcher, topology, SIMULATED, facts=before(nodes), failed_alone=alone).run(nodes)


def verdict(res: PhaseResult, node: str, check_id: str, topology: Topology) -> Status:
    return evaluate(check_id, Facts(node, {"fabric": node_documents(res)[node]}), topology).status


@pytest.mark.parametrize("size", [2, 3, 4])
def test_a_slow_hca_is_left_out_before_any_multi_node_run(h100_topology: Topology, tmp_path: Path,
                                                          size: int) -> None:
    launcher = rack(slow_gdr="sim01")
    res = measure(launcher, h100_topology, tmp_path, size)
    assert res.excluded == {"sim01": "left out of multi-node runs and localisation: IB-08 failed on this node"}
    assert "mlx5_2 gpu2 memory 196.00 Gb/s" in res.excluded_why["sim01"][0]
    assert all("sim01" not in nodes for nodes, _ in launcher.jobs)
    assert verdict(res, "sim01", "IB-08", h100_topology) is Status.FAIL
    for check_id in ("NCCL-03", "NCCL-04"):
        assert verdict(res, "sim01", check_id, h100_topology) is Status.INCOMPLETE
    if size == 2:
        assert res.group is None and res.alone == {
            "sim02": "no partner: every other node was left out (sim01 IB-08 failed)"}
        # applicable but unmeasured: the lone survivor's multi-node checks are incomplete, never passed
        assert node_documents(res)["sim02"]["multi"] == {"floor_gbps": 300.0, "applicable": True,
                                                         "unavailable": res.alone["sim02"]}
        for check_id in ("NCCL-03", "NCCL-04"):
            assert verdict(res, "sim02", check_id, h100_topology) is Status.INCOMPLETE
    else:
        assert res.group_passed and res.localization is None and res.alone == {}
        for node in res.group.nodes if res.group else ():
            assert verdict(res, node, "NCCL-03", h100_topology) is Status.PASS


def test_every_node_left_out_runs_nothing_multi_node(h100_topology: Topology, tmp_path: Path) -> None:
    launcher = rack(wrong="sim01")
    launcher_all = FakeLauncher(lambda n, c: result(n, "garbage\n"), lambda n, h: result(n[0]))
    res = Phase(launcher_all, h100_topology, SIMULATED, failed_alone=alone).run(["sim01", "sim02"])
    assert set(res.excluded) == {"sim01", "sim02"} and res.group is None and launcher_all.jobs == []
    assert res.alone == {}
    assert verdict(res, "sim02", "NCCL-03", h100_topology) is Status.INCOMPLETE
    assert launcher.jobs == []


def test_a_pair_nothing_separates_leaves_both_incomplete(h100_topology: Topology, tmp_path: Path) -> None:
    res = measure(rack(slow_link="sim01"), h100_topology, tmp_path, 2)
    assert res.excluded == {} and not res.group_passed
    assert res.localization is not None and res.localization.unresolved == ["sim01", "sim02"]
    assert res.regroup is None
    for node in ("sim01", "sim02"):
        for check_id in ("NCCL-03", "NCCL-04"):
            assert verdict(res, node, check_id, h100_topology) is Status.INCOMPLETE


@pytest.mark.parametrize("size", [3, 4])
def test_a_slow_link_is_named_and_the_healthy_nodes_pass(h100_topology: Topology, tmp_path: Path,
                                                         size: int) -> None:
    res = measure(rack(slow_link="sim02"), h100_topology, tmp_path, size)
    loc = res.localization
    assert loc is not None and loc.named == ["sim02"] and not loc.unresolved
    assert [s.hca for s in loc.slow["sim02"]] == ["mlx5_2"]
    assert res.regroup is not None and res.regroup_passed and "sim02" not in res.regroup.nodes
    assert verdict(res, "sim02", "NCCL-03", h100_topology) is Status.FAIL
    assert verdict(res, "sim02", "NCCL-04", h100_topology) is Status.FAIL
    for node in (n for n in res.nodes if n != "sim02"):
        assert verdict(res, node, "NCCL-03", h100_topology) is Status.PASS
        assert verdict(res, node, "NCCL-04", h100_topology) is Status.PASS


def test_an_unresolved_node_does_not_keep_the_cleared_ones_from_passing(h100_topology: Topology,
                                                                        tmp_path: Path) -> None:
    """The cleared nodes run again alone: a passing group clears them whatever stays unresolved."""
    res = measure(rack(slow_link="sim02"), h100_topology, tmp_path, 4)
    assert res.regroup is not None and sorted(res.regroup.nodes) == ["sim01", "sim03", "sim04"]


@pytest.mark.parametrize(("size", "rounds"), [(2, 8), (3, 10), (5, 13), (16, 25), (64, 43), (1024, 47)])
def test_the_round_limit(size: int, rounds: int) -> None:
    """5 + log2(n) + min(n, 32): a round per node for small racks, bounded for large ones."""
    assert Localizer([f"n{i}" for i in range(size)]).max_rounds == rounds
