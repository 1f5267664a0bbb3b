"""`burnin run --via ssh --suite fabric` runs a real OpenMPI `mpirun --host ...` across an 8-node SSH lab.

The lab is the one a new user starts (`burnin sim up --ssh 8`: kernel networking where the host
allows it); `mpirun` on the first node starts `orted` on the others through their own sshd
(burnin_lab.mesh), and the simulated nccl-tests run as real MPI ranks (OpenMPI's rank and size),
each on its own node: its host name is the node's (the lab gives each sshd a UTS namespace), its
pid real. One lab for the module; each test sets the faults it needs first, so the tests hold in
any order.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sshrack import burnin, make_state_dir, require_mpirun, require_sim_ssh

# slow: one 8-node lab for the module (about 6 minutes on 2 cores): scheduled first (tests/tiers.py)
pytestmark = [pytest.mark.sim_ssh, pytest.mark.slow(minutes=6)]

NODES = [f"sim{i:02d}" for i in range(1, 9)]
INFO_PREFIX = re.compile(r"^(\S+?):(\d+):\d+ \[\d+\] NCCL INFO ")
RANK_LINE = re.compile(r"^#\s+Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+(\d+)\s+on\s+(\S+)\s+device")
WAIT_S = 300.0
"""Failure limits of the waits below (an event that never comes), never a timing assertion."""


@dataclass
class Lab:
    state: Path
    applied: dict[str, str] = field(default_factory=dict)
    """The faults this module put in (node -> fault): only those are cleared again."""

    @property
    def inventory(self) -> Path:
        return self.state / "inventory.yaml"

    @property
    def client_config(self) -> Path:
        return self.state / "ssh" / "client" / "ssh_config"

    def faults(self, **faults: str) -> None:
        """Exactly these faults (node -> fault), every other node healthy."""
        for node in sorted(set(self.applied) | set(faults)):
            if self.applied.get(node) == faults.get(node):
                continue
            for change in ("clear", faults.get(node)):
                if change is not None:
                    done = burnin("sim", "fault", "--state", str(self.state), node, change)
                    assert done.returncode == 0, done.stdout + done.stderr
            self.applied.pop(node, None)
            if node in faults:
                self.applied[node] = faults[node]

    def ssh(self, node: str, command: str) -> subprocess.CompletedProcess[str]:
        """``command`` on ``node`` through plain OpenSSH and the lab's client config."""
        return subprocess.run(["ssh", "-F", str(self.client_config), node, command], capture_output=True,
                              text=True, timeout=WAIT_S, check=False)

    def fabric_run(self, out: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
        proc = burnin("run", "--via", "ssh", "--inventory", str(self.inventory), "--suite", "fabric",
                      "--out", str(out), *extra, timeout=900)
        assert proc.returncode in (0, 1), proc.stdout + proc.stderr
        return proc, json.loads((out / "gate.json").read_text())


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    require_sim_ssh()
    require_mpirun()
    state = make_state_dir("burnin-sim-mpirun-")
    try:
        up = burnin("sim", "up", "--ssh", str(len(NODES)), "--state", str(state))
        assert up.returncode == 0, up.stdout + up.stderr
        yield Lab(state)
    finally:
        if (state / "lab.json").exists():
            burnin("sim", "down", "--state", str(state))
        shutil.rmtree(state, ignore_errors=True)


def lab_processes(state: Path) -> list[tuple[int, str, str, dict[str, str]]]:
    """(pid, node, command line, environment) of every process running as a node of this lab."""
    found = []
    root = f"BURNIN_ROOT={state}/nodes/".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if root not in environ:
            continue
        env = dict(item.decode(errors="replace").partition("=")[::2] for item in environ.split(b"\0") if item)
        found.append((int(entry.name), env.get("BURNIN_SIM_NODE", "?"),
                      cmdline.replace(b"\0", b" ").decode(errors="replace"), env))
    return found


_SIM_PERF = re.compile(r"/out/fabric(/model\.py)? perf ")
"""A simulated nccl-tests process: the node's fabric model run for ``perf`` (burnin.sim.bytecode.launch names its
folder, a model started as a script its file)."""


def mpi_ranks(state: Path) -> dict[int, str]:
    """pid -> node of every simulated nccl-tests process that mpirun started (OpenMPI's rank in its environment)."""
    return {pid: node for pid, node, cmd, env in lab_processes(state)
            if "OMPI_COMM_WORLD_RANK" in env and _SIM_PERF.search(cmd)}


def mpi_processes(state: Path) -> list[str]:
    """Every rank, orted or mpirun still running on a node of the lab."""
    return [f"{node} {pid}: {cmd[:160]}" for pid, node, cmd, env in lab_processes(state)
            if _SIM_PERF.search(cmd) or re.search(r"(^|/)(orted|mpirun|orterun)\b", cmd.split(" ")[0])]


def test_the_nodes_reach_each_other_by_name_as_mpirun_does(lab: Lab) -> None:
    """Each node's host name is its own; ssh from one node to another by inventory name needs no prompt."""
    done = lab.ssh("sim01", "hostname; ssh sim05 hostname; ssh sim08 'echo $BURNIN_SIM_NODE'; command -v orted")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[:3] == ["sim01", "sim05", "sim08"], done.stdout
    assert done.stdout.split()[3].endswith("/orted")


def test_a_healthy_lab_is_admitted_by_a_real_mpirun_across_its_nodes(lab: Lab, tmp_path: Path) -> None:
    lab.faults()
    proc, gate = lab.fabric_run(tmp_path / "run")
    assert proc.returncode == 0 and gate["admitted"] == "sim[01-08]", proc.stdout + proc.stderr
    fabric = json.loads((tmp_path / "run" / "fabric.json").read_text())
    assert fabric["group"]["nodes"] == NODES and fabric["group"]["status"] == "ok", fabric["group"]
    argv = fabric["group"]["argv"]
    assert argv.startswith("timeout ") and " mpirun -np 8 -N 1 --host sim01:1,sim02:1," in argv, argv
    # NCCL's INFO lines of the group came from every node's own rank: its host name, its real pid
    hosts: dict[str, set[int]] = {}
    for node, records in fabric["nccl_runtime"].items():
        group = next(r for r in records if r["run"] == "group")
        for line in group["lines"].values():
            match = INFO_PREFIX.match(line)
            assert match, line
            hosts.setdefault(match.group(1), set()).add(int(match.group(2)))
        assert node in hosts, (node, group["lines"])
    assert set(hosts) == set(NODES), hosts
    pids = {pid for node_pids in hosts.values() for pid in node_pids}
    assert len(pids) == len(NODES), hosts  # one process per node
    # the same mpirun, started as burnin started it: rank 0 prints every rank's line, each with its node's name.
    # Without NCCL's INFO lines: the other ranks print theirs while rank 0 prints its table, and mpirun forwards
    # what it reads as it reads it, which can cut a line of the table in two around another rank's (as it can
    # on a real machine; burnin reads no verdict from the table).
    quiet = argv.replace("NCCL_DEBUG=INFO", "NCCL_DEBUG=WARN")
    assert quiet != argv, argv
    again = lab.ssh("sim01", quiet)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    ranks = [RANK_LINE.match(line) for line in again.stdout.splitlines()]
    found = [(int(m.group(1)), int(m.group(2)), m.group(3)) for m in ranks if m]
    assert len(found) == 8 * len(NODES), "\n".join(line for line in again.stdout.splitlines() if "Rank" in line)
    assert {host for _, _, host in found} == set(NODES)
    assert [host for rank, _, host in sorted(found)][::8] == NODES  # rank order is node order
    assert len({pid for _, pid, _ in found}) == len(NODES)


def test_a_slow_hca_names_its_node_and_admits_the_rest(lab: Lab, tmp_path: Path) -> None:
    lab.faults(sim04="slow-hca")
    proc, gate = lab.fabric_run(tmp_path / "run", "--localize")
    assert proc.returncode == 1 and gate["rejected"] == "sim04", proc.stdout + proc.stderr
    assert gate["admitted"] == "sim[01-03,05-08]", gate
    assert set(gate["nodes"]["sim04"]["failed"]) & {"IB-08", "NCCL-04"}, gate["nodes"]["sim04"]


def test_a_switch_side_rail_fault_is_found_and_localised_by_multi_node_runs(lab: Lab, tmp_path: Path) -> None:
    """rail-degraded: nothing on sim06 shows it, nor IB-08's loopback; the mpirun group, pairs and rails do."""
    lab.faults(sim06="rail-degraded@mlx5_3")
    proc, gate = lab.fabric_run(tmp_path / "run", "--localize")
    assert proc.returncode == 1 and gate["rejected"] == "sim06", proc.stdout + proc.stderr
    assert gate["admitted"] == "sim[01-05,07-08]", gate
    decision = gate["nodes"]["sim06"]
    assert sorted(decision["failed"]) == ["NCCL-03", "NCCL-04"] and decision["incomplete"] == [], decision
    reason = next(r for r in decision["reasons"] if r.startswith("NCCL-04"))
    assert "slow HCA mlx5_3" in reason, reason
    fabric = json.loads((tmp_path / "run" / "fabric.json").read_text())
    assert not fabric["group_passed"] and fabric["localization"]["named"] == ["sim06"], fabric["localization"]
    log = (tmp_path / "run" / "fabric-commands.log").read_text()
    assert "mpirun -np 2 -N 1 --host sim06:1," in log or ",sim06:1 " in log


def test_sigterm_during_the_mpirun_leaves_no_rank_on_any_node(lab: Lab, tmp_path: Path) -> None:
    lab.faults()
    config = tmp_path / "fabric.yaml"
    config.write_text('extra_env:\n  BURNIN_SIM_PACE: "1"\n')  # each *_perf runs as long as the real tool
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "burnin.cli.main", "run", "--via", "ssh", "--inventory",
                             str(lab.inventory), "--suite", "fabric", "--fabric-config", str(config),
                             "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + WAIT_S
        ranks: dict[int, str] = {}
        while proc.poll() is None and time.monotonic() < deadline:
            ranks = mpi_ranks(lab.state)
            if len(set(ranks.values())) >= 2:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the run ended before its mpirun ranks were seen: " + proc.communicate()[1]
        assert len(set(ranks.values())) >= 2, f"no mpirun ranks on two nodes within {WAIT_S:g} s: {ranks}"
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 3, stderr
    assert "interrupted" in stderr
    deadline = time.monotonic() + 60
    left = mpi_processes(lab.state)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = mpi_processes(lab.state)
    assert not left, left


def test_the_megatron_suite_runs_torchrun_on_every_node_as_one_run(lab: Lab, tmp_path: Path) -> None:
    """One torchrun per node (--nnodes 8 --node_rank R): the agents meet at sim01, so the 8-node run is one run
    (before: each node modelled the master and itself, and every node was MEG-04 incomplete)."""
    lab.faults(sim03="train-slow")
    out = tmp_path / "run"
    proc = burnin("run", "--via", "ssh", "--inventory", str(lab.inventory), "--suite", "megatron", "--out", str(out),
                  timeout=900)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    gate = json.loads((out / "gate.json").read_text())
    assert gate["rejected"] == "sim03" and gate["admitted"] == "sim[01-02,04-08]", gate
    assert gate["nodes"]["sim03"]["failed"] == ["MEG-04"], gate["nodes"]["sim03"]
    multi = json.loads((out / "facts" / "sim08.json").read_text())["megatron"]["multi"]
    assert multi["group"] == [n for n in NODES if n != "sim03"] and multi["run"], multi
    first = (out / "megatron" / "multi" / "+".join(multi["group"]) / "rank-0.log").read_text()
    assert "using world size: 56, data-parallel size: 7," in first, first[:400]
