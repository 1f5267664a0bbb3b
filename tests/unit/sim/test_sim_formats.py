"""Shim outputs follow the real tools' formats (reference/) and every source agrees."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from burnin.parsers.dmesg import parse_xid_events
from burnin.parsers.ibstat import parse_ibstat
from burnin.parsers.lspci import parse_lspci
from burnin.parsers.nvidia_smi import parse_nvlink, parse_smi_query, parse_topo_matrix
from burnin.sim import SimNode, build_rack
from burnin.topology import Topology

pytestmark = pytest.mark.rack

Tool = Callable[..., subprocess.CompletedProcess[str]]
Dirs = Callable[[str], Path]


@pytest.fixture(scope="module")
def faulty(sim_dir: Dirs, sim_topology: Topology) -> SimNode:
    specs = ["xid:79@gpu4", "xid:13@gpu1", "acs-enabled@gpu6", "pcie-gen4@gpu2", "nvlink-down@gpu0",
             "ib-port-down@mlx5_5", "fabric-manager-down"]
    node, = build_rack(sim_dir("faulty"), sim_topology, ["sim09"], {"sim09": specs})
    return node


def _out(tool: Tool, node: SimNode, *argv: str) -> str:
    proc = tool(node, *argv)
    assert proc.returncode == 0, (argv, proc.stdout, proc.stderr)
    return proc.stdout


# ------------------------------------------------------------------ nvidia-smi topo -m


def test_topo_matrix_layout_matches_the_real_tool(healthy_node: SimNode, tool: Tool, reference_dir: Path) -> None:
    text = _out(tool, healthy_node, "nvidia-smi", "topo", "-m")
    real = (reference_dir / "nvidia-smi/topo-m-dgx-h200-8gpu-12nic-tabs.txt").read_text()
    header, real_header = text.splitlines()[0].split("\t"), real.splitlines()[0].split("\t")

    def shape(cells: list[str]) -> list[str]:
        return [re.sub(r"\d+$", "#", c) for c in cells if not c.startswith("NIC")]

    assert shape(header) == shape(real_header)
    assert header.count("NIC0") == 1 and sum(c.startswith("NIC") for c in header) == 10
    rows = text.splitlines()[1:19]
    real_rows = real.splitlines()[1:9]
    for row in rows[:8]:  # GPU rows carry one cell more than the header, as the real tool prints
        assert len(row.split("\t")) == len(header) + 1
        assert row.split("\t")[-2:] == ["", "N/A"]
    assert all(len(r.split("\t")) == len(real_header) + 1 for r in real_rows)
    sglang = (reference_dir / "nvidia-smi/topo-m-h100-8gpu-8nic-sglang-issue30401.txt").read_text()
    legend = sglang[sglang.index("Legend:"):sglang.index("NIC Legend:")]
    assert legend in text
    assert re.search(r"NIC Legend:\n\n(  NIC\d+: mlx5_\d+\n){10}", text)


def test_topo_matrix_pairs_each_gpu_with_its_hca(healthy_node: SimNode, tool: Tool, sim_topology: Topology) -> None:
    matrix = parse_topo_matrix(_out(tool, healthy_node, "nvidia-smi", "topo", "-m"))
    by_name = {name: nic for nic, name in matrix.nic_names.items()}
    for device in sim_topology.gpus.devices:
        gpu = f"GPU{device.index}"
        assert matrix.links[gpu][by_name[str(device.hca)]] == "PIX"
        assert sum(v == "PIX" for v in matrix.links[gpu].values()) == 1
        assert all(v == "NV18" for k, v in matrix.links[gpu].items() if k.startswith("GPU") and k != gpu)
        assert matrix.numa_affinity[gpu] == device.numa_node
        assert matrix.cpu_affinity[gpu] == sim_topology.numa.cpulists[device.numa_node]
    for storage in sim_topology.storage_hcas:
        assert "PIX" not in {matrix.links[g][by_name[storage.name]] for g in matrix.gpus}


# ------------------------------------------------------------------------ nvidia-smi -q


def test_query_lines_use_the_real_labels_and_columns(healthy_node: SimNode, tool: Tool, reference_dir: Path) -> None:
    text = _out(tool, healthy_node, "nvidia-smi", "-q")
    real = (reference_dir / "nvidia-smi/q-full-h100-8gpu-driver535.183.01.txt").read_text()

    def keys(body: str) -> set[str]:
        return {line.split(" : ")[0] if " : " in line else line
                for line in body.splitlines() if line.strip() and not line.startswith(("GPU 0000", "="))}

    ours, theirs = keys(text), keys(real)
    assert ours <= theirs, sorted(ours - theirs)
    assert len(ours) > 120
    for line in text.splitlines():
        if " : " in line:
            assert line.index(" : ") + 1 == 42, line  # the colon sits at column 42
    assert text.startswith("\n==============NVSMI LOG==============\n\n")
    assert re.search(r"^GPU 00000000:1B:00\.0$", text, re.M)


def test_query_agrees_with_nvml(healthy_node: SimNode, tool: Tool, healthy_nvml: dict[str, Any]) -> None:
    query = parse_smi_query(_out(tool, healthy_node, "nvidia-smi", "-q"))
    assert query.driver_version == healthy_nvml["driver"]
    assert query.cuda_version == "12.2"
    assert query.attached_gpus == healthy_nvml["count"] == len(query.gpus)
    for smi, nv in zip(query.gpus, healthy_nvml["gpus"], strict=True):
        assert smi.pci_bus_id == nv["bus_id"]
        assert (smi.uuid, smi.serial, smi.product_name) == (nv["uuid"], nv["serial"], nv["name"])
        assert (smi.pcie_gen_current, smi.link_width_current) == (nv["pcie_gen_curr"], nv["pcie_width_curr"])
        assert smi.power_limit_w == nv["power_enforced"] / 1000
        assert smi.temperature is not None and smi.temperature.gpu_c == nv["temperature"]
        assert (smi.fabric_state, smi.fabric_status) == ("Completed", "Success")
        assert smi.remapped_rows is not None and not smi.remapped_rows.pending
    listing = _out(tool, healthy_node, "nvidia-smi", "-L").splitlines()
    assert listing[0] == f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: {healthy_nvml['gpus'][0]['uuid']})"


def test_nvlink_outputs(faulty: SimNode, tool: Tool, reference_dir: Path) -> None:
    status = _out(tool, faulty, "nvidia-smi", "nvlink", "--status")
    assert "\t Link 7: <inactive>" in status
    assert "\t Link 6: 26.562 GB/s" in status
    gpu0 = parse_nvlink(status).gpus[0]
    assert [link.link for link in gpu0.links if not link.active] == [7]
    errors = _out(tool, faulty, "nvidia-smi", "nvlink", "-e")
    real = (reference_dir / "nvidia-smi/nvlink-e-errors-h100-snippet.txt").read_text().splitlines()
    real_lines = {re.sub(r"\d+", "#", line.strip()) for line in real if "Link" in line}
    assert {re.sub(r"\d+", "#", line.strip()) for line in errors.splitlines() if "Link" in line} == real_lines


def test_summary_table(healthy_node: SimNode, tool: Tool) -> None:
    lines = _out(tool, healthy_node, "nvidia-smi").splitlines()
    assert lines[2].startswith("| NVIDIA-SMI 535.183.01") and "CUDA Version: 12.2" in lines[2]
    assert {len(line) for line in lines[1:]} == {89}
    assert any(line.startswith("|   0  NVIDIA H100 80GB HBM3          On  | 00000000:1B:00.0 Off |")
               for line in lines)


def test_nvidia_smi_errors(healthy_node: SimNode, tool: Tool, sim_dir: Dirs, sim_topology: Topology) -> None:
    bad = tool(healthy_node, "nvidia-smi", "--bogus")
    assert bad.returncode == 2
    assert "Invalid combination of input arguments" in bad.stdout
    lost, = build_rack(sim_dir("lostsmi"), sim_topology, ["sim10"], {"sim10": ["gpu-lost@gpu5"]})
    for argv in (("nvidia-smi",), ("nvidia-smi", "-q"), ("nvidia-smi", "topo", "-m")):
        proc = tool(lost, *argv)
        assert proc.returncode == 15
        assert proc.stdout == ("Unable to determine the device handle for GPU 0000:C3:00.0: GPU is lost.  "
                               "Reboot the system to recover this GPU\n")


# ------------------------------------------------------------------------------ ibstat


def test_ibstat_matches_the_real_layout(healthy_node: SimNode, tool: Tool, reference_dir: Path,
                                        sim_topology: Topology) -> None:
    text = _out(tool, healthy_node, "ibstat")
    real = (reference_dir / "infiniband/ibstat-h100-cx7-roce400-some-ports-down.txt").read_text()

    def keys(body: str) -> list[str]:
        return [line.split(":")[0] if ":" in line else line.split("'")[0] for line in body.splitlines()]

    assert keys(text)[:17] == keys(real)[:17]
    report = parse_ibstat(text)
    assert [ca.name for ca in report.cas] == sorted(h.name for h in sim_topology.hcas)
    for ca in report.cas:
        port = ca.ports[0]
        assert (port.state, port.physical_state, port.rate_gbps) == ("Active", "LinkUp", 400.0)
        hca = next(h for h in sim_topology.hcas if h.name == ca.name)
        assert port.link_layer == hca.link_layer
        assert ca.type == ("MT4129" if hca.role == "compute" else "MT41692")
        sysfs = healthy_node.root / "sys/class/infiniband" / ca.name
        assert ca.node_guid == "0x" + (sysfs / "node_guid").read_text().strip().replace(":", "")
        assert port.base_lid == int((sysfs / "ports/1/lid").read_text(), 16)
    assert _out(tool, healthy_node, "ibstat", "-l").split() == [ca.name for ca in report.cas]
    assert _out(tool, healthy_node, "ibstat", "mlx5_3").startswith("CA 'mlx5_3'\n")
    missing = tool(healthy_node, "ibstat", "mlx5_99")
    assert missing.returncode == 255
    assert re.match(r"ibpanic: \[\d+\] main: stat of IB device 'mlx5_99' failed", missing.stderr)


def test_ibstat_down_port(faulty: SimNode, tool: Tool) -> None:
    block = _out(tool, faulty, "ibstat", "mlx5_5")
    assert "\t\tState: Down\n\t\tPhysical state: Polling\n\t\tRate: 40\n" in block


# ------------------------------------------------------------------------------- dmesg


def test_dmesg_xid_lines(faulty: SimNode, tool: Tool) -> None:
    text = _out(tool, faulty, "dmesg")
    catalog = re.compile(r"NVRM: Xid \(PCI:([0-9a-fA-F:.]+)\): (\d+),")
    found = [m.groups() for m in catalog.finditer(text)]
    assert found == [("0000:9d:00", "79"), ("0000:43:00", "13")]
    assert re.search(r"^\[ *\d+\.\d{6}\] NVRM: Xid \(PCI:0000:9d:00\): 79, pid='<unknown>', name=<unknown>, "
                     r"GPU has fallen off the bus\.$", text, re.M)
    assert re.search(r"^\[ *\d+\.\d{6}\] NVRM: Xid \(PCI:0000:43:00\): 13, pid=\d+, name=\w+, Graphics", text, re.M)
    assert re.search(r"NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535\.183\.01  ", text)
    for argv, stamp in ((("dmesg", "-T"), r"^\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}\] "),
                        (("dmesg", "--time-format", "iso"), r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d{6}\+00:00 "),
                        (("dmesg", "-t"), r"^NVRM: Xid")):
        out = _out(tool, faulty, *argv)
        assert re.search(stamp + ".*" if not stamp.endswith("Xid") else stamp, out, re.M), argv
        events = parse_xid_events(out).events
        assert [(e.pci, e.xid) for e in events] == [("0000:9d:00", 79), ("0000:43:00", 13)]
    limits = parse_xid_events(text).pcie_limits
    assert [(x.device, x.limited_speed_gts) for x in limits] == [("0000:52:00.0", 16.0)]
    bad = tool(faulty, "dmesg", "--follow")
    assert bad.returncode == 1 and "unrecognized option" in bad.stderr


# ------------------------------------------------------------------------------- lspci


def test_lspci_stanzas_follow_the_reference(faulty: SimNode, tool: Tool, reference_dir: Path) -> None:
    text = _out(tool, faulty, "lspci", "-vvv")
    real_port = (reference_dir / "lspci/lspci-vvv-pex890xx-switch-downstream-port-acs-disabled.txt").read_text()
    real_full = (reference_dir / "lspci/lspci-vvv-full-hgx-h100-8gpu-cx7-pex890xx.txt").read_text()
    acs_off = next(line for line in real_port.splitlines() if "ACSCtl:" in line)
    acs_redirect = "\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"
    assert acs_redirect in real_full.splitlines()
    lines = text.splitlines()
    assert lines.count(acs_redirect) == 2  # both downstream ports of GPU6's switch
    assert lines.count(acs_off) > 10
    assert "\t\tLnkSta:\tSpeed 32GT/s (ok), Width x16 (ok)" in real_port.splitlines()
    assert "\t\tLnkSta:\tSpeed 32GT/s (ok), Width x16 (ok)" in lines
    assert "\t\tLnkSta:\tSpeed 16GT/s (downgraded), Width x16 (ok)" in lines
    gpu_header = next(line for line in real_full.splitlines() if "3D controller" in line)
    assert gpu_header.split(" ", 1)[1] in text
    devices = {d.address: d for d in parse_lspci(text).devices}
    gpu = devices["0000:d1:00.0"]
    assert (gpu.device_class, gpu.numa_node, gpu.kernel_driver) == ("3D controller", 1, "nvidia")
    assert devices["0000:52:00.0"].lnksta_downgraded
    gpu6_port = devices["0000:cd:01.0"]  # the switch downstream port above GPU6 (0000:d1:00.0)
    assert gpu6_port.port_type == "Downstream Port" and gpu6_port.secondary_bus == 0xD1
    assert gpu6_port.acs_ctl is not None and gpu6_port.acs_ctl["ReqRedir"]


def test_lspci_filters(healthy_node: SimNode, tool: Tool) -> None:
    nvidia = _out(tool, healthy_node, "lspci", "-d", "10de:").splitlines()
    gpus = [line for line in nvidia if "3D controller: NVIDIA Corporation Device 2330 (rev a1)" in line]
    # and the 4 NVSwitches, as the real HGX H100 lspci (shared/reference/lspci) prints them
    switches = [line[:7] for line in nvidia if line.endswith(" Bridge: NVIDIA Corporation Device 22a3 (rev a1)")]
    assert len(gpus) == 8 and switches == ["83:00.0", "84:00.0", "85:00.0", "86:00.0"] and len(nvidia) == 12
    nvme = _out(tool, healthy_node, "lspci", "-nn", "-d", "1344:").splitlines()
    assert len(nvme) == 10 and nvme[0] == ("02:00.0 Non-Volatile memory controller [0108]: Micron Technology Inc "
                                           "Device 51c3 [1344:51c3] (rev 01) (prog-if 02 [NVM Express])")
    numeric = _out(tool, healthy_node, "lspci", "-n", "-d", "10de:2330").splitlines()
    assert numeric[0] == "1b:00.0 0302: 10de:2330 (rev a1)"
    assert _out(tool, healthy_node, "lspci", "-nn", "-s", "18:00.0").strip() == (
        "18:00.0 Infiniband controller [0207]: Mellanox Technologies MT2910 Family [ConnectX-7] [15b3:1021]")
    one = _out(tool, healthy_node, "lspci", "-vvvD", "-s", "0000:1b:00.0")
    assert one.startswith("0000:1b:00.0 3D controller") and one.count("\n\n") == 1
    assert _out(tool, healthy_node, "lspci", "-s", "ff:00.0") == ""
    assert tool(healthy_node, "lspci", "-X").returncode == 2


# ---------------------------------------------------------------- small shims


def test_systemctl_setpci_lsmod(healthy_node: SimNode, faulty: SimNode, tool: Tool) -> None:
    ok = tool(healthy_node, "systemctl", "is-active", "nvidia-fabricmanager")
    assert (ok.stdout, ok.returncode) == ("active\n", 0)
    down = tool(faulty, "systemctl", "is-active", "nvidia-fabricmanager.service")
    assert (down.stdout, down.returncode) == ("inactive\n", 3)
    quiet = tool(faulty, "systemctl", "is-active", "--quiet", "nvidia-fabricmanager")
    assert (quiet.stdout, quiet.returncode) == ("", 3)
    assert tool(healthy_node, "systemctl", "restart", "x").returncode == 1
    assert _out(tool, healthy_node, "setpci", "-s", "5d:01.0", "ECAP_ACS+0x6.w") == "0000\n"
    assert _out(tool, faulty, "setpci", "-s", "0000:CD:01.0", "ECAP_ACS+6.w") == "001d\n"
    assert tool(healthy_node, "setpci", "-s", "1b:00.0", "ECAP_ACS+0x6.w").returncode == 1
    lsmod = _out(tool, healthy_node, "lsmod").splitlines()
    assert lsmod[0] == "Module                  Size  Used by"
    assert any(line.startswith("nvidia_peermem ") for line in lsmod)
