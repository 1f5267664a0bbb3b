"""Transient and persistent GPU faults: a simulated GPU reset (``nvidia-smi -r -i N``) or reboot clears only
the transient ones, and only the reset GPU's (the repair ladder's simulator, docs/repair.md)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from burnin.errors import UsageError
from burnin.sim import SimNode, build_rack
from burnin.sim.faults import parse_fault_spec
from burnin.sim.reset import reboot, reset_gpu
from burnin.topology import Topology


def test_transient_is_a_flavour_of_a_node_suite_gpu_fault_only() -> None:
    fault = parse_fault_spec("transient:xid:79@gpu2")
    assert (fault.name, fault.arg, fault.target, fault.transient) == ("xid", 79, "gpu2", True)
    assert str(fault) == "transient:xid:79@gpu2"
    assert parse_fault_spec(str(fault)) == fault
    assert not parse_fault_spec("xid:79@gpu2").transient
    assert parse_fault_spec("transient:ecc-uncorrectable").target == "gpu3"
    for bad in ("transient:fabric-manager-down", "transient:transient:xid:79", "transient:ib-rate-200"):
        with pytest.raises(UsageError, match="only a node-suite GPU fault can be transient"):
            parse_fault_spec(bad)


@pytest.mark.rack
def test_a_reset_clears_its_gpus_transient_faults_and_a_reboot_every_transient_one(
        tmp_path: Path, h100_topology: Topology) -> None:
    faults = ["transient:xid:79@gpu3", "transient:ecc-uncorrectable@gpu1", "xid:48@gpu3", "nvlink-down@gpu5"]
    [node] = build_rack(tmp_path, h100_topology, ["sim01"], {"sim01": faults})
    bus, cleared = reset_gpu(node.dir, 3)
    assert bus == next(d.bus_id for d in h100_topology.gpus.devices if d.index == 3)
    assert cleared == ["transient:xid:79@gpu3"]
    assert SimNode.load(node.dir).state().faults == faults[1:]
    dmesg = (node.dir / "out" / "dmesg" / "plain.txt").read_text()
    assert "): 79," not in dmesg and "): 48," in dmesg  # the persistent Xid stays in the kernel log
    assert reset_gpu(node.dir, 42) == (None, [])
    assert reboot(node.dir) == ["transient:ecc-uncorrectable@gpu1"]
    assert SimNode.load(node.dir).state().faults == ["xid:48@gpu3", "nvlink-down@gpu5"]
    assert reboot(node.dir) == []


@pytest.mark.rack
@pytest.mark.proc
def test_the_nvidia_smi_shim_resets_a_gpu_and_lists_no_process_on_it(tmp_path: Path, h100_topology: Topology) -> None:
    [node] = build_rack(tmp_path, h100_topology, ["sim01"], {"sim01": ["transient:xid:79@gpu3"]})
    env = {**os.environ, **node.environment()}
    smi = str(node.bin_dir / "nvidia-smi")
    apps = subprocess.run([smi, "--query-compute-apps=pid", "--format=csv,noheader", "-i", "3"], env=env,
                          capture_output=True, text=True, check=False, timeout=60)
    assert (apps.returncode, apps.stdout) == (0, "")
    reset = subprocess.run([smi, "-r", "-i", "3"], env=env, capture_output=True, text=True, check=False, timeout=60)
    assert reset.returncode == 0, reset.stderr
    assert reset.stdout.startswith("GPU 00000000:") and "was successfully reset." in reset.stdout
    assert SimNode.load(node.dir).state().faults == []
    missing = subprocess.run([smi, "-r", "-i", "9"], env=env, capture_output=True, text=True, check=False, timeout=60)
    assert missing.returncode != 0 and "No GPU with index 9" in missing.stderr
