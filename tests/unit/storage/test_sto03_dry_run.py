"""The storage suite under ``--dry-run``: measure_node's commands printed in order, none run, every node incomplete."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from burnin.facts import Facts
from burnin.launch.base import Hold
from burnin.launch.dryrun import DryRunLauncher
from burnin.launch.ssh import TransportLauncher
from burnin.phases import DRY_RUN_REASON
from burnin.storage.measure import SECTION, StorageSettings, plan
from burnin.storage.pathmtu_judge import SECTION as PATHMTU
from burnin.storage.phase import run_storage_phase
from burnin.topology import Topology
from burnin.transport.base import CommandResult

HOME = "/mnt/home/.burnin-sto03-NODE"


class Refusing:
    """A transport that must not be used: a dry run that runs anything fails loudly."""

    name = "refusing"

    def run(self, node: str, argv: Sequence[str], *, timeout: float, stdin: bytes | None = None,
            env: Mapping[str, str] | None = None) -> CommandResult:
        raise AssertionError(f"{node}: {argv} ran in a dry run")

    def close(self) -> None:
        pass


def dry(said: list[str]) -> DryRunLauncher:
    return DryRunLauncher(TransportLauncher(Refusing(), name="ssh"), said.append, DRY_RUN_REASON)


def shown(nodes: list[str], mounts: list[str], tool: str) -> list[str]:
    said: list[str] = []
    items = plan(nodes, mounts=mounts, compute_hcas=["mlx5_0"], storage_netdevs=["bf0"],
                 settings=StorageSettings(tool, 8), ipoib={"mlx5_0": "ib0"})  # type: ignore[arg-type]
    dry(said).hold(nodes, Hold("storage", "the storage suite", 60), items)
    return said


def test_auto_shows_the_fio_probe_and_both_tools_between_two_counter_reads() -> None:
    said = shown(["n1", "n2"], ["/mnt/home"], "auto")
    counters = ("[n[1-2]] cat ROOT/sys/class/infiniband/mlx5_0/ports/1/counters/port_xmit_data "
                "ROOT/sys/class/infiniband/mlx5_0/ports/1/counters/port_rcv_data "
                "ROOT/sys/class/net/ib0/statistics/tx_bytes ROOT/sys/class/net/ib0/statistics/rx_bytes "
                "ROOT/sys/class/net/bf0/statistics/tx_bytes ROOT/sys/class/net/bf0/statistics/rx_bytes")
    assert said[1:] == [
        "[n[1-2]] fio --version", "# with fio when it answers, else with dd:", counters,
        f"[n[1-2]] fio --name=burnin-sto03 --filename={HOME} --rw=write --bs=1M --size=8M --direct=1 "
        "--end_fsync=1 --output-format=json",
        f"[n[1-2]] fio --name=burnin-sto03 --filename={HOME} --rw=read --bs=1M --size=8M --direct=1 "
        "--output-format=json",
        f"[n[1-2]] dd if=/dev/zero of={HOME} bs=1M count=8 oflag=direct conv=fsync",
        f"[n[1-2]] dd if={HOME} of=/dev/null bs=1M count=8 iflag=direct",
        f"[n[1-2]] rm -f {HOME}", counters]


def test_a_chosen_tool_is_the_only_one_shown() -> None:
    said = shown(["n1"], ["/mnt/home", "/mnt/pfs"], "dd")
    assert not any("fio" in line for line in said)
    assert [line.split()[1] for line in said[1:]] == ["cat", "dd", "dd", "rm", "dd", "dd", "rm", "cat"]


@pytest.mark.parametrize(("nodes", "mounts"), [([], ["/mnt/home"]), (["n1"], [])], ids=["no-node", "no-mount"])
def test_nothing_to_write_shows_nothing(nodes: list[str], mounts: list[str]) -> None:
    assert shown(nodes, mounts, "auto") == []


def test_the_phase_under_dry_run_runs_nothing_and_says_why(sto_topology: Topology) -> None:
    facts = {"n1": Facts("n1", {}), "n2": Facts("n2", {})}
    said: list[str] = []
    run_storage_phase(dry(said), facts, ["n1", "n2"], topology=sto_topology, settings=StorageSettings())
    assert said[0].startswith("# storage STO-04 on each node") and any(" fio --name=burnin-sto03 " in line
                                                                        for line in said)
    assert all(f.data[SECTION] == f.data[PATHMTU] == {"unavailable": DRY_RUN_REASON} for f in facts.values())
