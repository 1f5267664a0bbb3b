"""This node's own devices from sysfs (burnin.watch.devices), on a simulated node's tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from burnin.sim import SimNode, build_node
from burnin.topology import find_topology
from burnin.watch.devices import NodeDevices, hca_labels, read_devices


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> SimNode:
    return build_node(tmp_path_factory.mktemp("devices") / "node", find_topology("hgx-h100-8gpu"), "sim01")


@pytest.mark.rack
def test_a_simulated_h100_nodes_devices(node: SimNode) -> None:
    devices = read_devices(str(node.root))
    assert len(devices.gpus) == 8 and devices.has_gpu("0000:1b:00") and devices.has_gpu("00000000:1B:00.0")
    assert not devices.has_gpu("0000:83:00")  # an NVSwitch: NVIDIA's, no display controller
    assert devices.has_nvidia_function("0000:83:00.0") and devices.has_nvidia_function("0000:1B:00.0")
    assert len(devices.nvidia) == 12  # 8 GPUs, 4 NVSwitches
    assert devices.has_hca("0000:4f:00.0") and not devices.has_hca("0000:1b:00.0")
    assert not devices.has_nvidia_function("0000:02:00.0")  # an NVMe drive
    assert devices.has_netdev("ibp24s0") and not devices.has_netdev("ib0")
    assert hca_labels(str(node.root))["0000:4f:00.0"].startswith("mlx5_")


def test_no_sysfs_no_devices(tmp_path: Path) -> None:
    assert read_devices(str(tmp_path)) == NodeDevices()
    assert hca_labels(str(tmp_path / "nowhere")) == {}


def test_unreadable_files_name_no_device(tmp_path: Path) -> None:
    (tmp_path / "sys/bus/pci/devices/0000:1b:00.0").mkdir(parents=True)  # no vendor, no class
    gpu = tmp_path / "sys/bus/pci/devices/0000:52:00.0"
    gpu.mkdir()
    (gpu / "vendor").write_text("0x10DE\n")  # no class file: NVIDIA's, but not known as a GPU
    devices = read_devices(str(tmp_path))
    assert devices.gpus == frozenset() and devices.nvidia == {"0000:52:00.0"}


def test_a_vga_class_nvidia_device_is_a_gpu(tmp_path: Path) -> None:
    gpu = tmp_path / "sys/bus/pci/devices/0000:52:00.0"
    gpu.mkdir(parents=True)
    (gpu / "vendor").write_text("0x10de\n")
    (gpu / "class").write_text("0x030000\n")
    assert read_devices(str(tmp_path)).gpus == {"0000:52:00"}


def test_nvml_gpus_are_added() -> None:
    devices = NodeDevices(gpus=frozenset({"0000:1b:00"})).with_gpus({"00000000:52:00.0"})
    assert devices.gpus == {"0000:1b:00", "0000:52:00"}


def test_hca_labels_from_sysfs(tmp_path: Path) -> None:
    device = tmp_path / "sys/devices/pci0000:4c/0000:4f:00.0"
    (device / "infiniband/mlx5_2").mkdir(parents=True)
    (device / "infiniband/mlx5_2/device").symlink_to("../..")
    (tmp_path / "sys/class/infiniband").mkdir(parents=True)
    (tmp_path / "sys/class/infiniband/mlx5_2").symlink_to(device / "infiniband/mlx5_2")
    assert hca_labels(str(tmp_path)) == {"0000:4f:00.0": "mlx5_2"}
