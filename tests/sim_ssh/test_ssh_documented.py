"""The SSH lab's documented examples, run as README.md and docs/ssh.md show them, at their shown sizes.

- README "Real nodes: SSH and Slurm" (and docs/ssh.md "Try it"): ``burnin sim up --ssh 8 --fault
  sim05:pcie-x8``, then ``burnin run --via ssh --inventory DIR/inventory.yaml`` rejects exactly sim05
  (GPU-08), exit 1; ``ssh -F DIR/ssh/client/ssh_config sim03 nvidia-smi`` works; ``burnin sim down``
  leaves no namespace, interface or process. As root the lab is a kernel-network one (``--netns auto``):
  every node's fabric addresses are real, so one taken by another node or a storage target shows.
- A healthy 64-node kernel-network SSH lab (``sim up --ssh 64``: ``bench/fanout``'s size) is admitted
  whole. One lab start (one test) serves every 64-node assertion.

The address plan behind both is burnin.sim.addressing (tested purely in tests/unit/sim/test_sim_addressing.py).
"""

from __future__ import annotations

import ipaddress
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from sshrack import burnin, make_state_dir, require_netns

from burnin_lab.ssh import pid_alive

pytestmark = pytest.mark.sim_ssh

TARGETS = {"10.20.0.10", "10.20.8.11"}  # nfs-home, parallel-fs's probe (topologies/hgx-h100-8gpu.yaml)
BIG = 64
BIG_TIMEOUT_S = 3600.0
"""A failure limit for a 64-node lab's start, run and stop on a loaded 2-core machine, not a speed bound."""


def _ip(*args: str) -> str:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=True, timeout=120).stdout


def _lab(state: Path) -> dict[str, Any]:
    lab: dict[str, Any] = json.loads((state / "lab.json").read_text())
    return lab


def _gate(folder: Path) -> dict[str, Any]:
    gate: dict[str, Any] = json.loads(folder.read_text()) if folder.is_file() else \
        json.loads(next(folder.glob("reports/*/gate.json")).read_text())
    return gate


def _fabric_interfaces(ns: str) -> list[ipaddress.IPv4Interface]:
    """Every IPv4 address on the fabric netdevs of a node's namespace (not lo, its management /31 or mesh0)."""
    return [ipaddress.IPv4Interface(f"{info['local']}/{info['prefixlen']}")
            for link in json.loads(_ip("-j", "-n", ns, "-4", "addr", "show"))
            if link["ifname"] not in ("lo", "mgmt0", "mesh0") for info in link.get("addr_info", [])]


def _assert_distinct_fabric_addresses(record: dict[str, Any], per_node: int) -> None:
    """What the kernel holds: no node shares an address with another node, a storage target, a gateway
    (IPoIB .254, BlueField .1) or its subnet's network or broadcast address."""
    seen: dict[ipaddress.IPv4Address, str] = {}
    for node, entry in record["nodes"].items():
        interfaces = _fabric_interfaces(entry["netns"])
        assert len(interfaces) == per_node, (node, interfaces)
        for interface in interfaces:
            net, ip = interface.network, interface.ip
            gateway = net.network_address + (254 if net.prefixlen == 24 else 1)
            assert str(ip) not in TARGETS, f"{node} holds storage target address {ip}"
            assert ip not in (net.network_address, net.broadcast_address, gateway), (node, interface)
            assert seen.setdefault(ip, node) == node, f"{node} and {seen[ip]} share {ip}"


def _down_and_check_clean(state: Path) -> None:
    lab = _lab(state)
    record = lab["netns"]
    started = json.loads((state / "ssh" / "supervisor.pids").read_text())["pids"]
    pids = [*started.values(), lab["supervisor"]]
    down = burnin("sim", "down", "--state", str(state), timeout=BIG_TIMEOUT_S)
    assert down.returncode == 0, down.stdout + down.stderr
    assert not set(record["namespaces"]) & set(_ip("netns", "list").split())
    links = _ip("-br", "link").split()
    assert not [name for name in record["host_ifnames"] if any(w.startswith(name) for w in links)], links
    assert not [pid for pid in pids if pid_alive(pid)]  # a zombie, or one reaped while looked at, is gone


def _cleanup(state: Path) -> None:
    if (state / "lab.json").exists() and _lab(state).get("supervisor"):
        burnin("sim", "down", "--state", str(state), timeout=BIG_TIMEOUT_S)
    shutil.rmtree(state, ignore_errors=True)


def test_readme_ssh_example_rejects_exactly_sim05_and_down_cleans_up(tmp_path: Path) -> None:
    require_netns()
    state = make_state_dir("burnin-readme-ssh-")
    try:
        up = burnin("sim", "up", "--ssh", "8", "--fault", "sim05:pcie-x8", "--state", str(state))
        assert up.returncode == 0, up.stdout + up.stderr
        assert "the kernel's" in up.stdout  # --netns auto as root: real fabric interfaces
        # as the README shows it (no --out: reports/<run-id>/ under the working folder)
        run = burnin("run", "--via", "ssh", "--inventory", f"{state}/inventory.yaml", cwd=tmp_path)
        assert run.returncode == 1, run.stdout + run.stderr
        gate = _gate(tmp_path)
        assert gate["rejected"] == "sim05", gate["rejected"]
        assert gate["admitted"] == "sim[01-04,06-08]"
        assert gate["nodes"]["sim05"]["failed"] == ["GPU-08"], gate["nodes"]["sim05"]  # docs/ssh.md
        assert "REJECTED sim05" in run.stdout and "REJECTED sim08" not in run.stdout
        # docs/ssh.md: plain OpenSSH reaches a node through the lab's client files
        ssh = subprocess.run(["ssh", "-F", f"{state}/ssh/client/ssh_config", "sim03", "nvidia-smi"],
                             capture_output=True, text=True, timeout=120, check=False)
        assert ssh.returncode == 0 and "H100" in ssh.stdout, ssh.stdout + ssh.stderr
        # no node holds another's address or a storage target's (the kernel routes those via lo)
        _assert_distinct_fabric_addresses(_lab(state)["netns"], per_node=10)
        _down_and_check_clean(state)
    finally:
        _cleanup(state)


@pytest.mark.slow(minutes=5)
def test_a_healthy_64_node_lab_is_admitted_whole(tmp_path: Path) -> None:
    """One 64-node lab start for every 64-node assertion (one test: xdist cannot split it over two workers)."""
    require_netns()
    state = make_state_dir("burnin-ssh-64-")
    try:
        up = burnin("sim", "up", "--ssh", str(BIG), "--state", str(state), timeout=BIG_TIMEOUT_S)
        assert up.returncode == 0, up.stdout + up.stderr
        assert "the kernel's" in up.stdout
        record = _lab(state)["netns"]
        assert len(record["nodes"]) == BIG
        _assert_distinct_fabric_addresses(record, per_node=10)  # 8 IPoIB rails, 2 BlueField netdevs
        run = burnin("run", "--via", "ssh", "--inventory", str(state / "inventory.yaml"), "--out",
                     str(tmp_path / "out"), timeout=BIG_TIMEOUT_S)
        gate = _gate(tmp_path / "out" / "gate.json")
        failing = {n: v["reasons"] for n, v in gate["nodes"].items() if not v["admitted"]}
        assert run.returncode == 0, (failing, run.stdout[-2000:] + run.stderr[-2000:])
        assert gate["admitted"] == f"sim[01-{BIG}]" and not gate["rejected"], gate["rejected"]
        _down_and_check_clean(state)
    finally:
        _cleanup(state)
