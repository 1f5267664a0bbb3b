"""The topology's storage section (validation with file, key and line; the probe's cached copy) and the
collector's storage sources (targets from --sources, time budget, missing tools)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from storage_support import collect

from burnin.checks import load_all
from burnin.collector import storage as collector
from burnin.collector.commands import run_tools
from burnin.errors import ConfigError
from burnin.evaluate.verdict import Status
from burnin.facts import Facts
from burnin.resources import topologies_dir
from burnin.sim import SimNode
from burnin.topology.load import load_topology
from burnin.topology.model import StorageTarget, Topology, storage_from_dict

SHIPPED = topologies_dir() / "hgx-h100-8gpu.yaml"


def test_shipped_topology_declares_the_dgx_storage_fabric(sto_topology: Topology) -> None:
    storage = sto_topology.storage
    assert storage is not None
    assert [(n.name, n.bus_id, n.hca, n.mode, n.mtu) for n in storage.netdevs] == [
        ("enp41s0f0np0", "0000:29:00.0", "mlx5_8", "dpu", 9000),
        ("enp177s0f0np0", "0000:b1:00.0", "mlx5_9", "dpu", 9000)]
    assert [t.destination for t in storage.targets] == ["10.20.0.10", "10.20.8.11"]
    assert list(storage.nccl_ib_hca) == [h.name for h in sto_topology.compute_hcas]
    assert storage.qos is not None and storage.qos.pfc_priorities == (3,)


def _broken(tmp_path: Path, old: str, new: str) -> Path:
    text = SHIPPED.read_text()
    assert old in text, old
    path = tmp_path / "site.yaml"
    path.write_text(text.replace(old, new, 1))
    return path


def _line(path: Path, needle: str) -> int:
    """The last line holding ``needle`` (the replaced line comes after an unchanged twin)."""
    return [n for n, line in enumerate(path.read_text().splitlines(), 1) if needle in line][-1]


@pytest.mark.parametrize(("old", "new", "key", "words"), [
    ("hca: mlx5_8, mode: dpu", "hca: mlx5_0, mode: dpu", "storage.netdevs[0].hca", "compute HCA, not a storage one"),
    ("hca: mlx5_9, mode: dpu", "hca: mlx5_8, mode: dpu", "storage.netdevs[1].hca", "at 0000:29:00.0, the netdev at"),
    ("mode: dpu, mtu: 9000}\n    - {name: enp177", "mode: dpu-ish, mtu: 9000}\n    - {name: enp177",
     "storage.netdevs[0].mode", "'dpu' or 'nic'"),
    ("mtu: 9000}\n    - {name: enp177", "mtu: 20}\n    - {name: enp177", "storage.netdevs[0].mtu", "68"),
    ("probe: 10.20.8.11", "probe: 10.30.8.11", "storage.targets[1]", "not inside subnet 10.20.8.0/22"),
    ("address: 10.20.0.10,", "address: 10.20.0.10, subnet: 10.20.0.0/24,", "storage.targets[0]", "exactly one"),
    ("nccl_ib_hca: [mlx5_0,", "nccl_ib_hca: [mlx5_9,", "storage.nccl_ib_hca[0]", "storage HCA; NCCL must use"),
    ("qos: {trust: dscp, pfc_priorities: [3]", "qos: {trust: dscp, pfc_priorities: [9]", "storage.qos",
     "priority 9 is not 0..7"),
    ("sysctl: {rp_filter: 2,", "sysctl: {rp_filter: 2, arp_ignor: 1,", "storage.sysctl.arp_ignor", "unknown key"),
    ('bluefield_device_ids: ["0xa2dc"]', 'bluefield_device_ids: ["A2DC"]', "storage", "0xa2dc (lower-case hex)"),
])
def test_storage_mistakes_name_file_key_and_line(tmp_path: Path, old: str, new: str, key: str, words: str) -> None:
    path = _broken(tmp_path, old, new)
    with pytest.raises(ConfigError) as info:
        load_topology(path)
    assert info.value.key == key, info.value
    assert words in str(info.value) and str(path) in str(info.value)
    assert info.value.line == _line(path, "storage:" if key == "storage" else new.split("\n")[0])


def test_routing_needs_exactly_one_design(tmp_path: Path) -> None:
    path = _broken(tmp_path, "  qos: {trust", "  routing: {vrf: storage, table: 100}\n  qos: {trust")
    with pytest.raises(ConfigError, match="exactly one of vrf"):
        load_topology(path)
    path = _broken(tmp_path, "  qos: {trust", "  routing: {table: 254}\n  qos: {trust")
    with pytest.raises(ConfigError, match="main/local table"):
        load_topology(path)


def test_the_probes_cached_copy_keeps_the_storage_section(sto_topology: Topology) -> None:
    data = json.loads(json.dumps(dataclasses.asdict(sto_topology)))
    assert storage_from_dict(data["storage"]) == sto_topology.storage
    assert storage_from_dict(None) is None


def test_subnet_target_without_probe_routes_its_first_host() -> None:
    target = StorageTarget(name="pfs", subnet="10.30.0.0/16", mount="/mnt/pfs")
    assert target.destination == "10.30.0.1" and target.label == "10.30.0.0/16 (10.30.0.1)"
    with pytest.raises(ValueError, match="absolute path"):
        StorageTarget(name="x", address="10.0.0.1", mount="mnt")


# ------------------------------------------------------------------ collector


def test_sources_items_name_targets_and_vrf() -> None:
    assert collector.split_items(("nvml", "storage-route=10.0.0.1", "storage", "storage-vrf=v",
                                  "storage-route=10.0.0.1")) == (("nvml", "storage"), ("10.0.0.1",), "v")


def test_collector_reads_the_node_like_the_checks_need(healthy_storage_facts: dict[str, object]) -> None:
    data = healthy_storage_facts["storage"]
    assert isinstance(data, dict)
    assert set(data["routes"]) == {"10.20.0.10", "10.20.8.11"}
    assert data["netdevs"]["enp41s0f0np0"]["device_id"] == "0xa2dc" and data["rdma"]["mlx5_8"] == {
        "pci": "0000:29:00.0"}
    assert data["nccl"]["files"]["/etc/nccl.conf"]["present"] is True
    assert data["sysctl"]["all"] == {"rp_filter": 2, "arp_ignore": 1, "arp_announce": 2}
    nic = healthy_storage_facts["storage_nic"]
    assert isinstance(nic, dict)
    assert set(nic["mlxconfig"]) == {"0000:29:00.0", "0000:b1:00.0"}
    assert set(nic["mlnx_qos"]) == {"enp41s0f0np0", "enp177s0f0np0"}


@pytest.mark.rack
def test_job_environment_is_recorded(healthy_node: SimNode, sto_topology: Topology) -> None:
    data = collect(healthy_node, sto_topology, env={"NCCL_IB_HCA": "^=mlx5_8,mlx5_9", "NCCL_CONF_FILE": "/etc/x.conf"})
    nccl = data["storage"]["nccl"]
    assert nccl["environment"]["NCCL_IB_HCA"] == "^=mlx5_8,mlx5_9"
    assert nccl["files"]["/etc/x.conf"] == {"present": False, "text": None, "error": None}


@pytest.mark.rack
def test_invalid_target_from_the_controller_fails_the_source(healthy_node: SimNode, sto_topology: Topology) -> None:
    data = collect(healthy_node, sto_topology, sources="storage,storage-route=10.0.0.1;reboot")
    assert data["sources"]["storage"]["ok"] is False
    assert "is not an IP address" in data["sources"]["storage"]["error"]


@pytest.mark.rack
def test_missing_ip_tool_is_incomplete_with_the_cause(healthy_node: SimNode, sto_topology: Topology,
                                                      tmp_path: Path) -> None:
    """A node without iproute2: routes and addresses are not measured, and the checks say why."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("mlxconfig", "mlnx_qos"):
        (bin_dir / tool).symlink_to(healthy_node.bin_dir / tool)
    argv = [sys.executable, "-m", "burnin.collector", "--root", str(healthy_node.root), "--sources",
            "storage,storage-nic,storage-route=10.20.0.10,storage-route=10.20.8.11"]
    env = {**os.environ, **healthy_node.environment(), "PATH": f"{bin_dir}:/nonexistent"}
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=True)
    data = json.loads(proc.stdout)
    data["sources"]["storage"]["ok"] = True
    for check_id, words in (("STO-01", "ip: command not found"), ("STO-07", "ip: command not found")):
        verdict = load_all()[check_id].func(Facts("sim01", data), sto_topology)
        assert verdict.status is Status.INCOMPLETE and words in verdict.reason, verdict.reason
    assert load_all()["STO-04"].func(Facts("sim01", data), sto_topology).status is Status.PASS


def test_spent_budget_is_recorded_not_waited_for() -> None:
    records = run_tools({"addr": ["ip", "-j", "addr"]}, 0.0)
    assert records["addr"]["exit_status"] is None and "were spent" in records["addr"]["error"], records
