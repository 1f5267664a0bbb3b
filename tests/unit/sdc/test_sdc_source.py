"""The collector's sdc source: its size item, and the size the run asks for (the topology's sdc.size)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from burnin.checks.storage import collector_sources
from burnin.collector import sdc
from burnin.topology.model import SdcSpec, Topology
from burnin.transport.payload import BOOTSTRAP, collector_zipapp


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


@pytest.mark.proc
@pytest.mark.parametrize("how", ["stdin", "zipapp"])
def test_the_workload_text_is_found_however_the_collector_travelled(how: str, tmp_path: Path) -> None:
    """Over SSH the collector is imported from a zip held in memory, through Slurm from a zipapp file."""
    code = "from burnin.collector.sdc import workload_source; print(len(workload_source().splitlines()))"
    env = {"PATH": os.environ["PATH"]}
    if how == "stdin":
        bootstrap = BOOTSTRAP.replace("from burnin.collector.core import run\nrun(sys.argv[1:])\n", code)
        assert bootstrap != BOOTSTRAP
        proc = subprocess.run([sys.executable, "-c", bootstrap], input=collector_zipapp(), capture_output=True,
                              env=env, timeout=60, check=False)
    else:
        (tmp_path / "collector.pyz").write_bytes(collector_zipapp())
        path = str(tmp_path / "collector.pyz")
        proc = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {path!r}); " + code],
                              capture_output=True, env=env, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr.decode()[-500:]
    assert int(proc.stdout) == len(sdc.workload_source().splitlines())
