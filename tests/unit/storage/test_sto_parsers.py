"""The storage-fabric parsers on real outputs.

Real samples, read in place from ``../shared/reference-pending`` (see its
SOURCES.md): every file under ``ibdev2netdev/`` (plain and ``column -t``
annotated output, several nodes in one file; the ``ip -br -c a`` blocks around
them are read with ip-addr too), ``ip/`` (``ip r s`` before and after adding a
duplicate route) and ``nccl/`` (``NCCL_DEBUG=INFO`` init of a 2-node, 16-rank
RoCE job, NCCL 2.27.5). Missing is a failure under CI, a skip elsewhere.

Formats with no real sample in shared/ (SOURCES.md): ``ip route get``, ``ip -d
link`` with a VRF, ``ip rule``, ``mlxconfig q`` on a BlueField, ``mlnx_qos -i``.
- ``ip route get``, ``ip route`` with a policy table and multipath, ``ip [-d]
  link``, ``ip addr`` (text and ``-j``): :func:`test_live_iproute2_outputs`
  runs this machine's iproute2 in a network namespace of its own (root and
  ``unshare -n``; skipped without them) and checks that the text and JSON forms
  give the same records. A VRF device cannot be made here (the kernel has no VRF
  support), so ``vrf table``/``vrf_slave table`` are read from the layout
  iproute2's ``print_linkinfo`` prints (written below, not captured).
- ``mlnx_qos -i``: written after the output quoted in NVIDIA/Mellanox's
  community page "mlnx_qos" (MLNX_OFED 4.2, community.mellanox.com/docs/DOC-2792)
  and NVIDIA's MLNX_OFED documentation "Quality of Service"; whitespace is not
  guaranteed verbatim there.
- ``mlxconfig q``: written after the ``Device #1:`` / ``Configurations:`` layout
  of NVIDIA MFT's documentation (``-e`` adds ``Default Current Next Boot``
  columns) and the BlueField mode parameters of NVIDIA's BlueField DPU
  documentation ("Modes of Operation": ``INTERNAL_CPU_OFFLOAD_ENGINE``
  ``ENABLED(0)`` DPU / ``DISABLED(1)`` NIC).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from burnin.errors import ParseError
from burnin.parsers import parse, to_jsonable
from burnin.parsers.ibdev2netdev import parse_ibdev2netdev
from burnin.parsers.iproute import parse_ip_addr, parse_ip_link, parse_ip_route
from burnin.parsers.mlnx_qos import parse_mlnx_qos
from burnin.parsers.mlxconfig import parse_mlxconfig_query, value_code
from burnin.parsers.nccl_info import parse_nccl_info
from burnin.parsers.sysctl import parse_sysctl

REPO = Path(__file__).resolve().parents[3]


def pending(folder: str) -> list[Path]:
    reference = Path(os.environ.get("BURNIN_REFERENCE_DIR", REPO.parent / "shared" / "reference"))
    path = reference.parent / "reference-pending" / folder
    if not path.is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"real outputs not found at {path} (CI must have ../shared)")
        pytest.skip(f"real outputs not found at {path}")
    files = sorted(p for p in path.iterdir() if p.is_file())
    assert files, path
    return files


def one(folder: str, prefix: str) -> str:
    return next(p for p in pending(folder) if p.name.startswith(prefix)).read_text(encoding="utf-8")


@pytest.mark.parametrize(("folder", "tool"), [("ibdev2netdev", "ibdev2netdev"), ("ip", "ip-route"),
                                              ("nccl", "nccl-info")])
def test_every_pending_file_parses_to_strict_json(folder: str, tool: str) -> None:
    for path in pending(folder):
        record = parse(tool, path.read_text(encoding="utf-8"))
        json.dumps(to_jsonable(record), allow_nan=False)


# ------------------------------------------------------------------ ibdev2netdev


def test_ibdev2netdev_hgx_node_with_bond() -> None:
    report = parse_ibdev2netdev(one("ibdev2netdev", "ibdev2netdev-ip-br-a-roce-8rail-hgx-node0007"))
    assert len(report.entries) == 12
    assert [e.device for e in report.entries][:4] == ["mlx5_0", "mlx5_1", "mlx5_10", "mlx5_11"]  # ls order
    assert report.netdev_of("mlx5_0") == "enp25s0np0"
    assert report.devices_of("bond0") == ("mlx5_3", "mlx5_9")
    down = [e.device for e in report.entries if e.up is False]
    assert down == ["mlx5_10", "mlx5_4"]


def test_ibdev2netdev_three_nodes_keep_every_entry_in_order() -> None:
    report = parse_ibdev2netdev(one("ibdev2netdev", "ibdev2netdev-ip-br-a-roce-8rail-3nodes"))
    assert len(report.entries) == 12 + 12 + 11
    assert [e.netdev for e in report.entries if e.device == "mlx5_0"] == ["enp25s0np0", "ens108np0", "ens3np0"]


def test_ibdev2netdev_column_t_with_comments() -> None:
    report = parse_ibdev2netdev(one("ibdev2netdev", "ibdev2netdev-column-t"))
    assert len(report.entries) == 12
    ib = [e for e in report.entries if e.netdev.startswith("ibp")]
    assert len(ib) == 8 and {e.state for e in ib} == {"Down"}
    assert report.netdev_of("mlx5_1") == "enp27s0f0np0" and report.entries[1].up is True


def test_ibdev2netdev_verbose_form() -> None:
    text = ("0000:29:00.0 mlx5_8 (MT41692 - 900-9D3B6-00CV-AA0) NVIDIA BlueField-3 fw 32.39.2048 port 1 (ACTIVE) "
            "==> enp41s0f0np0 (Up)\n")
    entry = parse_ibdev2netdev(text).entries[0]
    assert (entry.pci, entry.device, entry.firmware, entry.port_state, entry.netdev, entry.up) == (
        "0000:29:00.0", "mlx5_8", "32.39.2048", "ACTIVE", "enp41s0f0np0", True)
    assert entry.description == "MT41692 - 900-9D3B6-00CV-AA0"


def test_ip_brief_blocks_around_the_real_ibdev2netdev_outputs() -> None:
    addrs = parse_ip_addr(one("ibdev2netdev", "ibdev2netdev-ip-br-a-roce-8rail-hgx-node0007"))
    by_name = {i.name: i for i in addrs.interfaces}
    assert by_name["enp25s0np0"].operstate == "UP"
    assert [(a.local, a.prefixlen) for a in by_name["enp25s0np0"].addresses] == [("10.99.91.59", 31)]
    assert by_name["bond0"].addresses[0].local == "10.73.175.137"
    assert by_name["enp83s0f0np0"].operstate == "DOWN" and by_name["enp83s0f0np0"].addresses == ()


# ------------------------------------------------------------------ ip route


def test_ip_route_show_rails_and_the_added_duplicate() -> None:
    routes = parse_ip_route(one("ip", "ip-route-show")).routes
    assert len(routes) == 20 + 21  # before and after `ip route add ... metric 10`
    default = routes[0]
    assert (default.dst, default.gateway, default.dev, default.protocol, default.metric) == (
        "default", "10.82.101.254", "bond0", "static", 300)
    twice = [r.metric for r in routes if r.dst == "10.99.91.0/24"]
    assert twice == [102, 10, 102]
    docker = next(r for r in routes if r.dev == "docker0")
    assert docker.flags == ("linkdown",) and docker.scope == "link" and docker.prefsrc == "172.17.0.1"
    assert all(r.table is None for r in routes)


def test_ip_route_get_text_and_json_agree() -> None:
    text = "10.30.0.10 via 10.20.0.1 dev st0 table 100 src 10.20.0.2 uid 0 \n    cache \n"
    data = ('[{"dst":"10.30.0.10","gateway":"10.20.0.1","dev":"st0","table":"100","prefsrc":"10.20.0.2",'
            '"flags":[],"uid":0,"cache":[]}]\n')
    assert parse_ip_route(text) == parse_ip_route(data)
    route = parse_ip_route(text).routes[0]
    assert (route.dev, route.table, route.gateway) == ("st0", "100", "10.20.0.1")
    local = parse_ip_route("local 10.20.0.2 dev lo table local src 10.20.0.2 uid 0 \n    cache <local> \n").routes[0]
    assert (local.type, local.table) == ("local", "local")


def test_ip_link_vrf_layout_text_and_json() -> None:
    text = (
        "9: vrf-storage: <NOARP,MASTER,UP,LOWER_UP> mtu 65575 qdisc noqueue state UP mode DEFAULT group default "
        "qlen 1000\n    link/ether 00:00:00:00:00:00 brd ff:ff:ff:ff:ff:ff promiscuity 0  allmulti 0 minmtu 1280 "
        "maxmtu 65575 \n    vrf table 1000 addrgenmode eui64 numtxqueues 1 numrxqueues 1 \n"
        "12: enp41s0f0np0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 9000 qdisc mq master vrf-storage state UP mode "
        "DEFAULT group default qlen 1000\n    link/ether a0:88:c2:00:00:01 brd ff:ff:ff:ff:ff:ff promiscuity 0  "
        "allmulti 0 minmtu 68 maxmtu 9978 \n    vrf_slave table 1000 addrgenmode eui64 numtxqueues 64 "
        "numrxqueues 64 parentbus pci parentdev 0000:29:00.0 \n")
    links = {link.name: link for link in parse_ip_link(text).links}
    assert (links["vrf-storage"].kind, links["vrf-storage"].vrf_table) == ("vrf", 1000)
    member = links["enp41s0f0np0"]
    assert (member.master, member.slave_kind, member.slave_table, member.kind, member.mtu) == (
        "vrf-storage", "vrf", 1000, None, 9000)
    data = json.dumps([{"ifindex": 12, "ifname": "enp41s0f0np0", "flags": ["UP"], "mtu": 9000,
                        "master": "vrf-storage", "operstate": "UP",
                        "linkinfo": {"info_slave_kind": "vrf", "info_slave_data": {"table": 1000}}}])
    parsed = parse_ip_link(data).links[0]
    assert (parsed.master, parsed.slave_kind, parsed.slave_table) == ("vrf-storage", "vrf", 1000)


def _ns_available() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    return subprocess.run(["unshare", "-n", "true"], capture_output=True, check=False).returncode == 0


LIVE = r'''
set -e
ip link set lo up
ip link add st0 type veth peer name st0p
ip link set st0 mtu 9000 up; ip link set st0p up
ip addr add 10.20.0.2/24 dev st0
ip link add ib0 type veth peer name ib0p
ip link set ib0 up; ip link set ib0p up
ip addr add 192.168.10.2/24 dev ib0
ip route add 10.30.0.0/16 via 10.20.0.1 dev st0 table 100
ip rule add to 10.30.0.0/16 lookup 100 pref 100
ip route add 10.40.0.0/16 proto static metric 5 \
  nexthop via 10.20.0.1 dev st0 weight 1 nexthop via 192.168.10.1 dev ib0 weight 2
for form in "" "-j"; do
  echo "@@route-get$form"; ip $form route get 10.30.0.10
  echo "@@route-get-main$form"; ip $form route get 10.20.0.10
  echo "@@route$form"; ip $form route show table all
  echo "@@link$form"; ip -d $form link show
  echo "@@addr$form"; ip $form addr show
done
echo "@@unreachable"; ip -j route get 8.8.8.8 2>&1 || echo "exit $?"
'''


@pytest.mark.rack
@pytest.mark.skipif(not _ns_available(), reason="needs root and `unshare -n` (a network namespace of its own)")
def test_live_iproute2_outputs() -> None:
    """This machine's iproute2, in a namespace of its own: text and JSON give the same records."""
    proc = subprocess.run(["unshare", "-n", "sh", "-c", LIVE], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    parts = dict(block.split("\n", 1) for block in proc.stdout.split("@@")[1:])
    for name, parser in (("route-get", parse_ip_route), ("route-get-main", parse_ip_route),
                         ("route", parse_ip_route), ("link", parse_ip_link), ("addr", parse_ip_addr)):
        assert parser(parts[name]) == parser(parts[f"{name}-j"]), name
    got = parse_ip_route(parts["route-get-j"]).routes[0]
    assert (got.dst, got.dev, got.table, got.gateway, got.prefsrc) == ("10.30.0.10", "st0", "100", "10.20.0.1",
                                                                       "10.20.0.2")
    assert parse_ip_route(parts["route-get-main"]).routes[0].table is None
    multipath = next(r for r in parse_ip_route(parts["route"]).routes if r.dst == "10.40.0.0/16")
    assert [(h.gateway, h.dev, h.weight) for h in multipath.nexthops] == [("10.20.0.1", "st0", 1),
                                                                          ("192.168.10.1", "ib0", 2)]
    links = {link.name: link for link in parse_ip_link(parts["link"]).links}
    assert links["st0"].mtu == 9000 and links["st0"].kind == "veth" and links["st0"].link == "st0p"
    addrs = {i.name: i for i in parse_ip_addr(parts["addr-j"]).interfaces}
    assert [(a.local, a.prefixlen) for a in addrs["st0"].addresses if a.family == "inet"] == [("10.20.0.2", 24)]
    assert "Network is unreachable" in parts["unreachable"] and "exit 2" in parts["unreachable"]


@pytest.mark.parametrize("text", ["", "hello\n", "[", "[1, 2", "{}", "[{\"x\": 1}]", "default\n", "10.0.0.1\n",
                                  "[" * 5000])
def test_ip_parsers_refuse_what_is_no_ip_output(text: str) -> None:
    for parser in (parse_ip_route, parse_ip_addr, parse_ip_link):
        with pytest.raises(ParseError):
            parser(text)


# ------------------------------------------------------------------ NCCL INFO


def test_nccl_info_init_of_a_real_roce_job() -> None:
    report = parse_nccl_info(one("nccl", "nccl-debug-info-init"))
    assert report.version == "2.27.5+cuda12.9"
    assert report.settings["NCCL_IB_HCA"] == "mlx5_0,mlx5_1,mlx5_2,mlx5_5,mlx5_6,mlx5_7,mlx5_8,mlx5_11"
    assert report.settings["NCCL_SOCKET_IFNAME"] == "enp25s0np0"
    host, = report.hosts
    assert host.host == "tpgds-aihub0008" and host.ranks == 8
    ib = host.net_devices["IB"]
    assert [d.name for d in ib] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_11"]
    assert {d.transport for d in ib} == {"RoCE"} and {d.port for d in ib} == {1}
    assert host.oob == ("enp25s0np0:10.99.91.63",) and host.bootstrap == ("enp25s0np0:10.99.91.63",)
    assert sorted(d.name for d in host.used_devices("IB")) == sorted(d.name for d in ib)
    assert {u.mode for u in host.used} == {"GDRDMA"} and host.networks == ("IB",)


def test_nccl_info_socket_transport_and_labels() -> None:
    text = ("0: n1:11:11 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0> [1]ib0:fe80::1%ib0<0>\n"
            "0: n1:11:11 [0] NCCL INFO Bootstrap : Using ib0:10.1.0.1<0>\n"
            "1: n2:12:12 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_8:1/RoCE ; OOB ib0:10.1.0.2<0>\n"
            "1: n2:12:12 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [send] via NET/IB/1\n")
    report = parse_nccl_info(text)
    n1, n2 = report.hosts
    assert [(d.name, d.address, d.port) for d in n1.net_devices["Socket"]] == [("eth0", "10.0.0.1", None),
                                                                               ("ib0", "fe80::1%ib0", None)]
    assert [d.name for d in n2.used_devices("IB")] == ["mlx5_8"]  # a storage device did carry a channel
    with pytest.raises(ParseError, match="NCCL_DEBUG=INFO"):
        parse_nccl_info("NCCL WARN something\n")


# ------------------------------------------------------------------ vendor tools

MLXCONFIG_E = """
Device #1:
----------

Device type:        BlueField3
Name:               900-9D3B6-00CV-AA0_Ax
Description:        NVIDIA BlueField-3 B3220 P-Series FHHL DPU; 200GbE (default mode) / NDR200 IB
Device:             0000:29:00.0

Configurations:                                     Default              Current              Next Boot
        INTERNAL_CPU_MODEL                          EMBEDDED_CPU(1)      EMBEDDED_CPU(1)      EMBEDDED_CPU(1)
*       INTERNAL_CPU_OFFLOAD_ENGINE                 ENABLED(0)           DISABLED(1)          ENABLED(0)
        PCI_DOWNSTREAM_PORT_OWNER[4..15]            Array[4..15]         Array[4..15]         Array[4..15]
The '*' shows parameters with next value different from default/current value.
"""


def test_mlxconfig_with_default_current_next_boot_columns() -> None:
    report = parse_mlxconfig_query(MLXCONFIG_E)
    device, = report.devices
    assert (device.device_type, device.device) == ("BlueField3", "0000:29:00.0")
    assert device.columns == ("Default", "Current", "Next Boot")
    assert device.current("INTERNAL_CPU_OFFLOAD_ENGINE") == "DISABLED(1)"
    assert device.next_boot("INTERNAL_CPU_OFFLOAD_ENGINE") == "ENABLED(0)"
    param = device.param("INTERNAL_CPU_OFFLOAD_ENGINE")
    assert param is not None and param.modified
    assert device.param("PCI_DOWNSTREAM_PORT_OWNER[4..15]") is not None
    assert value_code("EMBEDDED_CPU(1)") == 1 and value_code("9000") == 9000 and value_code("Array[4..15]") is None


def test_mlxconfig_errors_are_kept() -> None:
    text = "\nDevice #1:\n----------\n\nDevice type:    ConnectX7\nDevice:         0000:18:00.0\n\n" \
           "Configurations:                              Next Boot\n" \
           "-E- The Device doesn't support INTERNAL_CPU_OFFLOAD_ENGINE parameter\n"
    report = parse_mlxconfig_query(text)
    assert report.errors == ("The Device doesn't support INTERNAL_CPU_OFFLOAD_ENGINE parameter",)
    assert report.devices[0].current("INTERNAL_CPU_OFFLOAD_ENGINE") is None
    assert parse_mlxconfig_query("-E- Failed to open device: 0000:99:00.0\n").devices == ()


MLNX_QOS_PCP = """DCBX mode: OS controlled
Priority trust state: pcp
Cable len: 10
PFC configuration:
\tpriority    0   1   2   3   4   5   6   7
\tenabled     1   0   1   0   0   0   1   1

tc: 0 ratelimit: unlimited, tsa: ets, bw: 10%
\t priority:  1
tc: 6 ratelimit: unlimited, tsa: strict
\t priority:  6
"""


def test_mlnx_qos_pcp_trust_and_several_pfc_priorities() -> None:
    qos = parse_mlnx_qos(MLNX_QOS_PCP)
    assert qos.trust == "pcp" and qos.dcbx_mode == "OS controlled" and qos.cable_len_m == 10
    assert qos.pfc_priorities == (0, 2, 6, 7) and qos.pfc_buffer is None
    assert [(t.tc, t.tsa, t.bw_percent, t.priorities) for t in qos.tcs] == [(0, "ets", 10, (1,)),
                                                                           (6, "strict", None, (6,))]
    with pytest.raises(ParseError, match="other than 0 and 1"):
        parse_mlnx_qos(MLNX_QOS_PCP.replace("enabled     1", "enabled     7"))


def test_sysctl_lines() -> None:
    values = parse_sysctl("net.ipv4.conf.all.arp_ignore = 1\nnet.ipv4.conf.bond0/100.arp_ignore = 2\n"
                          "kernel.numa_balancing = 0\nsysctl: permission denied on key 'x'\n")
    assert values.interface_values("arp_ignore") == {"all": 1, "bond0.100": 2}
    assert values.integer("kernel.numa_balancing") == 0 and values.integer("missing") is None
