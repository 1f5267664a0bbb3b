"""A real mpirun on the tier's loopback rack (every sshd on 127.x of the host's own network, no namespaces).

The kernel-network lab of test_ssh_mpirun.py reaches its nodes over its mesh bridge; here the
nodes' ssh_config names the same loopback addresses and ports as the controller's (burnin_lab.mesh).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from sshrack import Rack, burnin, require_mpirun

pytestmark = pytest.mark.sim_ssh

NODES = ["sim01", "sim02", "sim03", "sim04"]
INFO_PREFIX = re.compile(r"^(\S+?):(\d+):\d+ \[\d+\] NCCL INFO ")


def test_the_fabric_suite_runs_mpirun_across_a_loopback_rack(ssh_rack: Rack, tmp_path: Path) -> None:
    require_mpirun()
    out = tmp_path / "run"
    proc = burnin("run", "--via", "ssh", "--inventory", str(ssh_rack.inventory), "--hosts", "sim[01-04]",
                  "--suite", "fabric", "--out", str(out), "--timeout", "60", timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    fabric = json.loads((out / "fabric.json").read_text())
    group = fabric["group"]
    assert group["nodes"] == NODES and group["status"] == "ok", group
    assert " mpirun -np 4 -N 1 --host sim01:1,sim02:1,sim03:1,sim04:1 " in group["argv"], group["argv"]
    seen: dict[str, set[int]] = {}
    for records in fabric["nccl_runtime"].values():
        for line in next(r for r in records if r["run"] == "group")["lines"].values():
            match = INFO_PREFIX.match(line)
            assert match, line
            seen.setdefault(match.group(1), set()).add(int(match.group(2)))
    assert set(seen) == set(NODES), seen  # each node's rank named its own host
    assert len(set().union(*seen.values())) == len(NODES), seen  # and was a process of its own


def test_sim_up_names_what_the_host_lacks_for_mpirun(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A host without OpenMPI still gets its rack, and `sim up` says why multi-node runs will not start."""
    from burnin_lab import ssh as lab_ssh

    if _has_mpirun():  # this host has it: nothing to say
        assert not any("OpenMPI" in note for note in lab_ssh._notes("/usr/bin/ssh"))
    monkeypatch.setattr(lab_ssh, "SYSTEM_PATH", str(tmp_path))  # a PATH without mpirun and orted
    notes = lab_ssh._notes(None)
    assert any("apt-get install openmpi-bin" in note for note in notes), notes
    assert any("apt-get install openssh-client" in note for note in notes), notes


def _has_mpirun() -> bool:
    import shutil

    from burnin_lab.ssh import SYSTEM_PATH

    return shutil.which("mpirun", path=SYSTEM_PATH) is not None and shutil.which("orted", path=SYSTEM_PATH) is not None
