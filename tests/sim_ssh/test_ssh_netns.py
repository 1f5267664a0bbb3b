"""Kernel-network lab racks: each node's fabric netdevs are real veths in its own network namespace.

The storage suite and the node suite judge what the kernel says (routes, MTU,
sysctls, byte counters), the faults are real routing and MTU changes, and
`burnin sim down` leaves no namespace, interface or process behind.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sshrack import burnin, make_state_dir, require_netns

from burnin_lab.ssh import pid_alive

pytestmark = pytest.mark.sim_ssh

TARGET = "10.20.0.10"  # nfs-home, on the first BlueField netdev's subnet (topologies/hgx-h100-8gpu.yaml)


def _ip(*args: str) -> str:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=True, timeout=60).stdout


class Lab:
    def __init__(self, state: Path) -> None:
        self.state = state

    @property
    def record(self) -> dict[str, Any]:
        lab = json.loads((self.state / "lab.json").read_text())
        return dict(lab["netns"] or {})

    def ns(self, node: str) -> str:
        return str(self.record["nodes"][node]["netns"])

    def run(self, out: Path, *extra: str) -> tuple[int, dict[str, Any]]:
        proc = burnin("run", "--via", "ssh", "--inventory", str(self.state / "inventory.yaml"), "--out", str(out),
                      *extra)
        assert proc.returncode in (0, 1), proc.stdout + proc.stderr
        return proc.returncode, json.loads((out / "gate.json").read_text())


@pytest.fixture(scope="module")
def netns_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    require_netns()
    state = make_state_dir("burnin-sim-netns-")
    try:
        up = burnin("sim", "up", "--ssh", "4", "--fault", "sim03:storage-route-via-ib", "--state", str(state))
        assert up.returncode == 0, up.stdout + up.stderr
        assert "the kernel's" in up.stdout
        yield Lab(state)
    finally:
        if (state / "lab.json").exists():
            burnin("sim", "down", "--state", str(state))
        shutil.rmtree(state, ignore_errors=True)


def test_the_fault_is_a_real_kernel_route(netns_lab: Lab) -> None:
    route = json.loads(_ip("-j", "-n", netns_lab.ns("sim03"), "route", "get", TARGET))[0]
    healthy = json.loads(_ip("-j", "-n", netns_lab.ns("sim01"), "route", "get", TARGET))[0]
    assert route["dev"] == "ibp79s0" and route["gateway"] == "192.168.2.254"  # mlx5_2's IPoIB netdev
    assert healthy["dev"] == "enp41s0f0np0" and "gateway" not in healthy


def test_storage_suite_rejects_sim03_from_kernel_counters(netns_lab: Lab, tmp_path: Path) -> None:
    config = tmp_path / "storage.yaml"
    config.write_text("size_mib: 16\n")
    code, gate = netns_lab.run(tmp_path / "out", "--suite", "storage", "--storage-config", str(config))
    assert code == 1 and gate["rejected"] == "sim03", gate
    # STO-03 from the byte counters; the live path-MTU ping (STO-04) also meets the IPoIB MTU on that route
    assert "STO-03" in gate["nodes"]["sim03"]["failed"]
    assert set(gate["nodes"]["sim03"]["failed"]) <= {"STO-03", "STO-04"}, gate["nodes"]["sim03"]
    verdicts = json.loads((tmp_path / "out" / "verdicts.json").read_text())
    (sto03,) = [v for v in verdicts if v["node"] == "sim03" and v["check"] == "STO-03"]
    written = 2 * 16 << 20  # two mounts
    assert "mlx5_2 compute HCA's IPoIB netdev moved" in sto03["reason"]
    assert f"while {written} bytes written" in sto03["reason"]
    # the healthy nodes' bytes rode the BlueField veths, counted by the kernel
    healthy = [v for v in verdicts if v["node"] != "sim03" and v["check"] == "STO-03"]
    assert [v["status"] for v in healthy] == ["pass"] * 3, healthy


def test_node_suite_names_the_target_and_ipoib_device_from_the_kernel(netns_lab: Lab, tmp_path: Path) -> None:
    code, gate = netns_lab.run(tmp_path / "out")
    assert code == 1 and gate["rejected"] == "sim03", gate
    verdicts = json.loads((tmp_path / "out" / "verdicts.json").read_text())
    (sto01,) = [v for v in verdicts if v["node"] == "sim03" and v["check"] == "STO-01"]
    assert sto01["status"] == "fail" and f"{TARGET} routed via ibp79s0 (IPoIB, mlx5_2)" in sto01["reason"]
    others = [v for v in verdicts if v["check"].startswith("STO-") and v["node"] != "sim03"]
    assert others and all(v["status"] == "pass" for v in others), others


def test_a_runtime_fault_changes_the_kernel_and_clear_restores_it(netns_lab: Lab, tmp_path: Path) -> None:
    ns = netns_lab.ns("sim02")
    assert burnin("sim", "fault", "--state", str(netns_lab.state), "sim02", "storage-mtu-1500").returncode == 0
    try:
        link = json.loads(_ip("-j", "-n", ns, "link", "show", "enp41s0f0np0"))[0]
        assert link["mtu"] == 1500
        _code, gate = netns_lab.run(tmp_path / "out")
        assert "STO-04" in gate["nodes"]["sim02"]["failed"], gate["nodes"]["sim02"]
    finally:
        assert burnin("sim", "fault", "--state", str(netns_lab.state), "sim02", "clear").returncode == 0
    assert json.loads(_ip("-j", "-n", ns, "link", "show", "enp41s0f0np0"))[0]["mtu"] == 9000


def test_down_leaves_no_namespace_interface_or_process() -> None:
    require_netns()
    state = make_state_dir("burnin-sim-netns-down-")
    try:
        assert burnin("sim", "up", "--ssh", "2", "--state", str(state)).returncode == 0
        record = json.loads((state / "lab.json").read_text())["netns"]
        lab = json.loads((state / "lab.json").read_text())
        started = json.loads((state / "ssh" / "supervisor.pids").read_text())["pids"]  # the storage target too
        pids = [e["pid"] for e in lab["nodes"].values()] + [lab["supervisor"], started["storage-target"]]
        assert set(record["namespaces"]) <= set(_ip("netns", "list").split())
        down = burnin("sim", "down", "--state", str(state))
        assert down.returncode == 0, down.stdout + down.stderr
        listed = _ip("netns", "list")
        assert not [ns for ns in record["namespaces"] if ns in listed.split()], listed
        links = _ip("-br", "link").split()
        assert not [name for name in record["host_ifnames"] if any(w.startswith(name) for w in links)], links
        assert not [pid for pid in pids if pid_alive(pid)]  # a zombie, or one reaped while looked at, is gone
    finally:
        if (state / "lab.json").exists() and json.loads((state / "lab.json").read_text()).get("netns"):
            burnin("sim", "down", "--state", str(state))
        shutil.rmtree(state, ignore_errors=True)
