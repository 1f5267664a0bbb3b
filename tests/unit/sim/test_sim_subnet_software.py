"""The simulator's subnet manager (IB-05) and software stack (INV-10): every source of a node agrees.

sysfs prints LIDs in hex (``0x1``), ``ibstat`` in decimal (``SM lid: 1``), ``ibv_devinfo`` in decimal too:
all three render one HcaState, healthy and under the faults ``sm-unreachable`` and ``sm-split``.
``ofed_info -s`` and ``dcgmi --version`` print their documented shapes (no real capture is in ../shared).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from burnin.errors import UsageError
from burnin.parsers.dcgmi_version import DcgmiVersion, parse_dcgmi_version
from burnin.parsers.ibstat import parse_ibstat
from burnin.parsers.ibv_devinfo import parse_ibv_devinfo
from burnin.parsers.ofed_info import parse_ofed_info
from burnin.sim import SimNode, apply_fault, build_rack, parse_fault_spec
from burnin.topology import Topology
from burnin.topology.model import SoftwareManifest

Tool = Callable[..., subprocess.CompletedProcess[str]]


FAULTS = {"unswept": ["sm-unreachable@mlx5_3"], "split": ["sm-split@mlx5_7"], "drift": ["kernel-drift"]}


@pytest.fixture(scope="module")
def rack(sim_dir: Callable[[str], Path], sim_topology: Topology) -> dict[str, SimNode]:
    nodes = build_rack(sim_dir("subnet-software"), sim_topology, ["healthy", *FAULTS], FAULTS)
    return {node.name: node for node in nodes}


@pytest.fixture(scope="module")
def twins(sim_dir: Callable[[str], Path], sim_topology: Topology) -> dict[str, SimNode]:
    """Healthy nodes of the faulted nodes' names (so the same LIDs and GUIDs)."""
    nodes = build_rack(sim_dir("subnet-software-twins"), sim_topology, list(FAULTS))
    return {node.name: node for node in nodes}


def _sysfs_lids(node: SimNode) -> dict[str, tuple[int, int, str]]:
    out: dict[str, tuple[int, int, str]] = {}
    for hca_dir in sorted((node.root / "sys/class/infiniband").iterdir()):
        port = hca_dir / "ports" / "1"
        lid, sm_lid = ((port / name).read_text().strip() for name in ("lid", "sm_lid"))
        assert lid.startswith("0x") and sm_lid.startswith("0x"), (lid, sm_lid)  # the kernel's 0x%x
        out[hca_dir.name] = (int(lid, 16), int(sm_lid, 16), (port / "state").read_text().strip())
    return out


@pytest.mark.rack
@pytest.mark.parametrize("name", ["healthy", "unswept", "split"])
def test_sysfs_ibstat_and_ibv_devinfo_agree_on_the_subnet_manager(rack: dict[str, SimNode], tool: Tool,
                                                                  name: str) -> None:
    node = rack[name]
    sysfs = _sysfs_lids(node)
    ibstat = parse_ibstat(tool(node, "ibstat").stdout)
    devinfo = parse_ibv_devinfo(tool(node, "ibv_devinfo").stdout)
    assert {ca.name for ca in ibstat.cas} == set(sysfs)
    for ca in ibstat.cas:
        lid, sm_lid, state = sysfs[ca.name]
        (port,) = ca.ports
        assert (port.base_lid, port.sm_lid) == (lid, sm_lid), ca.name
        device = devinfo.device(ca.name)
        assert device is not None
        (vport,) = device.ports
        assert (vport.port_lid, vport.sm_lid) == (lid, sm_lid), ca.name
        assert vport.state_code == int(state.split(":")[0])


@pytest.mark.rack
def test_a_healthy_node_has_one_sm_and_a_lid_on_every_infiniband_port(rack: dict[str, SimNode]) -> None:
    lids = _sysfs_lids(rack["healthy"])
    compute = {name: value for name, value in lids.items() if name not in ("mlx5_8", "mlx5_9")}
    assert {sm for _, sm, _ in compute.values()} == {1}
    assert all(lid for lid, _, _ in compute.values())
    assert len({lid for lid, _, _ in compute.values()}) == len(compute)  # unique LIDs
    assert {(lid, sm) for name, (lid, sm, _) in lids.items() if name in ("mlx5_8", "mlx5_9")} == {(0, 0)}


@pytest.mark.rack
def test_sm_unreachable_leaves_its_port_in_init_without_lids(rack: dict[str, SimNode], twins: dict[str, SimNode],
                                                            tool: Tool) -> None:
    lids = _sysfs_lids(rack["unswept"])
    healthy = _sysfs_lids(twins["unswept"])
    assert lids["mlx5_3"] == (0, 0, "2: INIT")
    assert {k: v for k, v in lids.items() if k != "mlx5_3"} == {k: v for k, v in healthy.items() if k != "mlx5_3"}
    port = rack["unswept"].root / "sys/class/infiniband/mlx5_3/ports/1"
    assert (port / "phys_state").read_text().strip() == "5: LinkUp"
    assert (port / "rate").read_text().strip() == "400 Gb/sec (4X NDR)"
    (ca,) = [c for c in parse_ibstat(tool(rack["unswept"], "ibstat").stdout).cas if c.name == "mlx5_3"]
    assert (ca.ports[0].state, ca.ports[0].physical_state) == ("Initializing", "LinkUp")


@pytest.mark.rack
def test_sm_split_gives_one_port_another_sm(rack: dict[str, SimNode], twins: dict[str, SimNode]) -> None:
    lids = _sysfs_lids(rack["split"])
    healthy = _sysfs_lids(twins["split"])
    assert lids["mlx5_7"] == (healthy["mlx5_7"][0], 5, "4: ACTIVE")
    assert {k: v for k, v in lids.items() if k != "mlx5_7"} == {k: v for k, v in healthy.items() if k != "mlx5_7"}


@pytest.mark.rack
def test_sm_split_picks_a_lid_no_other_port_names(tmp_path: Path, sim_topology: Topology) -> None:
    (node,) = build_rack(tmp_path, sim_topology, ["n1"], {"n1": ["sm-split@mlx5_0"]})
    apply_fault(node.dir, parse_fault_spec("sm-split@mlx5_1", sim_topology))
    state = node.state()
    assert [state.hca(n).sm_lid for n in ("mlx5_0", "mlx5_1", "mlx5_2")] == [5, 6, 1]


@pytest.mark.parametrize("fault", ["sm-unreachable@mlx5_8", "sm-split@mlx5_9"])
def test_sm_faults_refuse_an_ethernet_port(tmp_path: Path, sim_topology: Topology, fault: str) -> None:
    with pytest.raises(UsageError, match="runs Ethernet, which has no subnet manager"):
        build_rack(tmp_path, sim_topology, ["n1"], {"n1": [fault]})


@pytest.mark.rack
def test_the_software_tools_print_the_nodes_stack(rack: dict[str, SimNode], tool: Tool) -> None:
    node = rack["healthy"]
    ofed = tool(node, "ofed_info", "-s")
    assert (ofed.returncode, ofed.stdout) == (0, "MLNX_OFED_LINUX-24.04-0.6.6.0:\n")
    assert parse_ofed_info(ofed.stdout).version == "24.04-0.6.6.0"
    assert tool(node, "ofed_info", "-n").stdout == "24.04-0.6.6.0\n"
    assert tool(node, "ofed_info", "--bogus").returncode == 1
    for flag in ("--version", "-v"):
        dcgmi = tool(node, "dcgmi", flag)
        assert dcgmi.returncode == 0
        assert parse_dcgmi_version(dcgmi.stdout) == DcgmiVersion("3.3.5", "3.3.5")
        assert "Hostengine build info:" in dcgmi.stdout and "Build ID : " in dcgmi.stdout
    diag = tool(node, "dcgmi", "diag", "-r", "1", "-j")
    assert diag.returncode == 0 and '"DCGM GPU Diagnostic"' in diag.stdout  # the soak's dcgmi still answers
    assert (node.root / "proc/sys/kernel/osrelease").read_text().strip() == "5.15.0-112-generic"
    library = node.root / "usr/lib/x86_64-linux-gnu/libnccl.so.2"
    assert library.is_symlink() and Path(library.resolve()).name == "libnccl.so.2.21.5"


@pytest.mark.rack
def test_kernel_drift_moves_only_the_kernel(rack: dict[str, SimNode], twins: dict[str, SimNode], tool: Tool) -> None:
    drift, healthy = rack["drift"], twins["drift"]
    assert (drift.root / "proc/sys/kernel/osrelease").read_text().strip() == "5.15.0-91-generic"
    assert "Linux version 5.15.0-91-generic " in (drift.root / "proc/version").read_text()
    assert "BOOT_IMAGE=/boot/vmlinuz-5.15.0-91-generic " in (drift.root / "proc/cmdline").read_text()
    assert "Linux version 5.15.0-91-generic " in tool(drift, "dmesg").stdout
    for argv in (("ofed_info", "-s"), ("dcgmi", "--version")):
        assert tool(drift, *argv).stdout == tool(healthy, *argv).stdout
    state, twin = drift.state(), healthy.state()
    assert state.host.model_copy(update={"kernel_release": twin.host.kernel_release}) == twin.host


@pytest.mark.rack
def test_kernel_drift_on_a_node_that_runs_the_alternative(tmp_path: Path, sim_topology: Topology) -> None:
    software = SoftwareManifest(source="test", kernel="5.15.0-91-generic")
    topology = replace(sim_topology, software=software)
    (node,) = build_rack(tmp_path, topology, ["n1"], {"n1": ["kernel-drift"]})
    assert node.state().host.kernel_release == "5.15.0-112-generic"


@pytest.mark.rack
def test_a_healthy_node_follows_the_topologys_manifest(tmp_path: Path, sim_topology: Topology, tool: Tool) -> None:
    software = SoftwareManifest(source="test", kernel="6.8.0-1015-nvidia", ofed="OFED-internal-24.10-1.1.4",
                                nccl="2.18.5", dcgm="3.3.1")
    (node,) = build_rack(tmp_path, replace(sim_topology, software=software), ["n1"])
    assert (node.root / "proc/sys/kernel/osrelease").read_text().strip() == "6.8.0-1015-nvidia"
    assert tool(node, "ofed_info", "-s").stdout == "OFED-internal-24.10-1.1.4:\n"
    assert tool(node, "ofed_info", "-n").stdout == "24.10-1.1.4\n"
    assert parse_dcgmi_version(tool(node, "dcgmi", "--version").stdout).version == "3.3.1"
    assert (node.root / "usr/lib/x86_64-linux-gnu/libnccl.so.2.18.5").is_file()


@pytest.mark.rack
def test_dcgmi_names_no_hostengine_version_while_the_hostengine_is_down(tmp_path: Path, sim_topology: Topology,
                                                                        tool: Tool) -> None:
    from burnin.sim.build import render_node

    (node,) = build_rack(tmp_path, sim_topology, ["n1"])
    state = node.state()
    state.host.dcgm.hostengine = False
    render_node(node.dir, state)
    assert parse_dcgmi_version(tool(node, "dcgmi", "--version").stdout) == DcgmiVersion("3.3.5", None)
