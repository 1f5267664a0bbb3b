"""The collector's sdc source: its size item, and the size the run asks for (the topology's sdc.size)."""

from __future__ import annotations

import dataclasses

from burnin.checks.storage import collector_sources
from burnin.collector import sdc
from burnin.topology.model import SdcSpec, Topology


def test_the_size_item_is_taken_out_of_the_sources() -> None:
    assert sdc.split_items(["nvml", "sdc-size=256", "sdc"]) == (("nvml", "sdc"), 256)
    assert sdc.split_items(["nvml", "sdc"]) == (("nvml", "sdc"), sdc.DEFAULT_SIZE)
    assert sdc.split_items(["sdc-size=x", "sdc-size=0"]) == (("sdc-size=x", "sdc-size=0"), sdc.DEFAULT_SIZE)


def test_the_run_asks_for_the_largest_size_of_its_node_types(h100_topology: Topology) -> None:
    small = dataclasses.replace(h100_topology, sdc=SdcSpec(size=128))
    big = dataclasses.replace(h100_topology, sdc=SdcSpec(size=2048))
    assert collector_sources("all", [small]).endswith(",sdc-size=128")
    assert collector_sources("all", [small, big]).endswith(",sdc-size=2048")


def test_the_workload_travels_as_text_in_the_collector_package() -> None:
    source = sdc.workload_source()
    assert "def main(argv: list[str]) -> int:" in source and "import burnin" not in source
