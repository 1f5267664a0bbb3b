"""`burnin sim up --ssh N` / `burnin sim down`: real sshd per node, stopped by pid, nothing else."""

from __future__ import annotations

import ipaddress
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from sshrack import Rack, burnin, make_state_dir

from burnin_lab import ssh as lab_ssh

pytestmark = pytest.mark.sim_ssh


def _cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def test_cli_up_and_down_stop_exactly_their_pids(ssh_rack: Rack) -> None:
    state = make_state_dir("burnin-sim-ssh-cli-")
    try:
        up = burnin("sim", "up", "--ssh", "2", "--fault", "sim02:pcie-x8", "--state", str(state))
        assert up.returncode == 0, up.stderr
        lab = json.loads((state / "lab.json").read_text())
        assert lab["kind"] == "ssh"
        pids = [entry["pid"] for entry in lab["nodes"].values()]
        for entry in lab["nodes"].values():
            if lab.get("netns"):  # a namespace per node (the default as root): a management /31 of 198.18.0.0/15
                assert ipaddress.ip_address(entry["address"]) in ipaddress.ip_network("198.18.0.0/15")
            else:
                assert entry["address"].startswith("127.")
            assert lab_ssh.pid_alive(entry["pid"]) and "sshd" in _cmdline(entry["pid"])
            assert entry["config"] in _cmdline(entry["pid"])
        inventory = (state / "inventory.yaml").read_text()
        assert "ssh_config: ssh/client/ssh_config" in inventory and "sim02: {}" in inventory
        again = burnin("sim", "up", "--ssh", "2", "--state", str(state))
        assert again.returncode == 2 and "already has a running rack" in again.stderr
        ssh = subprocess.run(["ssh", "-F", lab["ssh_config"], "sim02", "echo $BURNIN_SIM_NODE; id -un"],
                             capture_output=True, text=True, timeout=120, check=False)
        assert ssh.stdout.split() == ["sim02", lab["user"]], ssh.stderr  # strict OpenSSH accepts it too
        down = burnin("sim", "down", "--state", str(state))
        assert down.returncode == 0, down.stderr
        assert not any(lab_ssh.pid_alive(pid) for pid in pids)
        others = lab_ssh.read_lab(ssh_rack.state)["nodes"].values()
        assert all(lab_ssh.pid_alive(entry["pid"]) for entry in others)  # the session rack is untouched
        assert burnin("sim", "down", "--state", str(state)).returncode == 0  # idempotent
    finally:
        if (state / "lab.json").exists():
            lab_ssh.down(state)
        shutil.rmtree(state, ignore_errors=True)


def test_sshd_config_gives_each_node_its_own_environment(ssh_rack: Rack) -> None:
    config = (Path(ssh_rack.lab["nodes"]["sim03"]["dir"]) / "sshd_config").read_text()
    assert "BURNIN_SIM_NODE=sim03" in config and "PasswordAuthentication no" in config
    assert f"AllowUsers {lab_ssh.LOGIN_USER}" in config and "UsePAM no" in config
    known = ssh_rack.known_hosts.read_text()
    assert ssh_rack.address("sim13") in known and ssh_rack.address("sim14") not in known
