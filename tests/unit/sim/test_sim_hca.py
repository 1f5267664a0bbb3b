"""The simulator's HCA sources for INV-09, IB-06 and IB-09: the ibv_devinfo shim and the pkey tables."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from burnin.errors import UsageError
from burnin.parsers.ibv_devinfo import parse_ibv_devinfo
from burnin.sim import SimNode, build_rack
from burnin.topology import Topology

Tool = Callable[..., subprocess.CompletedProcess[str]]


@pytest.mark.rack
def test_ibv_devinfo_shim_answers_like_the_tool(healthy_node: SimNode, tool: Tool) -> None:
    every = tool(healthy_node, "ibv_devinfo")
    assert every.returncode == 0 and every.stderr == ""
    names = [d.name for d in parse_ibv_devinfo(every.stdout).devices]
    assert sorted(names) == sorted(h.name for h in healthy_node.state().hcas)
    for argv in (("-d", "mlx5_3"), ("-dmlx5_3",), ("--ib-dev=mlx5_3",), ("-v", "-d", "mlx5_3", "-i", "1")):
        one = tool(healthy_node, "ibv_devinfo", *argv)
        assert one.returncode == 0, argv
        assert [d.name for d in parse_ibv_devinfo(one.stdout).devices] == ["mlx5_3"], argv
    listed = tool(healthy_node, "ibv_devinfo", "-l")
    assert listed.returncode == 0 and listed.stdout.startswith("10 HCAs found:\n")
    missing = tool(healthy_node, "ibv_devinfo", "-d", "mlx5_42")
    assert missing.returncode == 255 and missing.stderr == "IB device 'mlx5_42' wasn't found\n"
    assert tool(healthy_node, "ibv_devinfo", "--bogus").returncode == 255


def test_pkey_tables_are_full_size_with_the_topologys_keys(healthy_node: SimNode, sim_topology: Topology) -> None:
    assert sim_topology.ib_partitions is not None
    base = healthy_node.root / "sys/class/infiniband"
    ib_table = sorted((base / "mlx5_0/ports/1/pkeys").iterdir(), key=lambda p: int(p.name))
    assert len(ib_table) == 128
    assert [p.read_text().strip() for p in ib_table[:1]] == list(sim_topology.ib_partitions.pkeys)
    assert {p.read_text().strip() for p in ib_table[1:]} == {"0x0000"}
    roce_table = list((base / "mlx5_8/ports/1/pkeys").iterdir())  # a BlueField port on Ethernet
    assert [p.read_text().strip() for p in roce_table] == ["0xffff"]


def test_firmware_follows_the_topology(healthy_node: SimNode, sim_topology: Topology) -> None:
    assert sim_topology.hca_firmware is not None
    base = healthy_node.root / "sys/class/infiniband"
    assert (base / "mlx5_0/fw_ver").read_text().strip() == sim_topology.hca_firmware.version
    assert (base / "mlx5_8/fw_ver").read_text().strip().startswith("32.")  # BlueField-3 keeps its own


def test_pkey_limited_needs_a_full_member_key(sim_dir: Callable[[str], Path], sim_topology: Topology) -> None:
    from dataclasses import replace

    from burnin.topology.model import IbPartitions

    limited = replace(sim_topology, ib_partitions=IbPartitions(pkeys=("0x7fff",), source="test"))
    with pytest.raises(UsageError, match="full member of no partition"):
        build_rack(sim_dir("limited"), limited, ["sim01"], {"sim01": ["ib-pkey-limited@mlx5_0"]})
