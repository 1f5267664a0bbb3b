"""Outputs and shims of a simulated node's storage tools.

The tools: ``ip``, ``ibdev2netdev``, ``mlxconfig``, ``mlnx_qos``, ``ethtool``.

Formats follow the real tools: ``ip`` as iproute2 6.1 prints them (text and
``-j``; route get adds ``table`` outside main and ``uid 0`` + ``cache``),
``ibdev2netdev`` (MLNX_OFED, sorted by device name), ``mlxconfig q`` (MFT 4.x,
``Device #1:`` block with a ``Next Boot`` column), ``mlnx_qos -i`` (MLNX_OFED
23.x) and ``ethtool`` / ``-i`` / ``-S`` of mlx5_core. Outputs are rendered to
``out/storage/``; each shim is a small POSIX sh script that picks a file.
"""

from __future__ import annotations

import ipaddress
import json
from typing import Any

from burnin.sim.formats import ping, write_tool
from burnin.sim.state import NodeState
from burnin.sim.storage import SimNetdev, SimRoute, SimStorage, derive, resolve

OUT = "storage"
_IB_BROADCAST = "00:ff:ff:ff:ff:12:40:1b:ff:ff:00:00:00:00:00:00:ff:ff:ff:ff"
_BF_DESCRIPTION = ("NVIDIA BlueField-3 B3220 P-Series FHHL DPU; 200GbE (default mode) / NDR200 IB; Dual-port QSFP112; "
                   "PCIe Gen5.0 x16 with x16 PCIe extension option; 16 Arm cores; 32GB on-board DDR; integrated BMC; "
                   "Crypto Enabled")


# ------------------------------------------------------------------ ip


def _flags(netdev: SimNetdev) -> list[str]:
    return ["BROADCAST", "MULTICAST", "UP", "LOWER_UP"] if netdev.up else ["BROADCAST", "MULTICAST"]


def _link_type(netdev: SimNetdev) -> str:
    return "infiniband" if netdev.kind == "ipoib" else "ether"


def _broadcast(netdev: SimNetdev) -> str:
    return _IB_BROADCAST if netdev.kind == "ipoib" else "ff:ff:ff:ff:ff:ff"


def _ifindex(netdev: SimNetdev) -> int:
    return 10 + netdev.index


def _lo_json(details: bool) -> dict[str, Any]:
    item: dict[str, Any] = {"ifindex": 1, "ifname": "lo", "flags": ["LOOPBACK", "UP", "LOWER_UP"], "mtu": 65536,
                            "qdisc": "noqueue", "operstate": "UNKNOWN", "group": "default", "txqlen": 1000,
                            "link_type": "loopback", "address": "00:00:00:00:00:00", "broadcast": "00:00:00:00:00:00"}
    if details:
        item.update({"promiscuity": 0, "allmulti": 0, "min_mtu": 0, "max_mtu": 0})
    return item


def _link_json(storage: SimStorage, netdev: SimNetdev, details: bool) -> dict[str, Any]:
    item: dict[str, Any] = {"ifindex": _ifindex(netdev), "ifname": netdev.name, "flags": _flags(netdev),
                            "mtu": netdev.mtu, "qdisc": "mq"}
    if netdev.master:
        item["master"] = netdev.master
    item.update({"operstate": "UP" if netdev.up else "DOWN", "group": "default", "txqlen": 1000 if
                 netdev.kind == "bluefield" else 256, "link_type": _link_type(netdev), "address": netdev.mac,
                 "broadcast": _broadcast(netdev)})
    if details:
        item.update({"promiscuity": 0, "allmulti": 0, "min_mtu": 68,
                     "max_mtu": 9978 if netdev.kind == "bluefield" else 4092})
        if netdev.master and storage.vrf_table is not None:
            item["linkinfo"] = {"info_slave_kind": "vrf", "info_slave_data": {"table": storage.vrf_table}}
        item.update({"inet6_addr_gen_mode": "eui64", "num_tx_queues": 64, "num_rx_queues": 64,
                     "parentbus": "pci", "parentdev": netdev.bus_id})
    return item


def _vrf_json(storage: SimStorage, details: bool) -> dict[str, Any]:
    item: dict[str, Any] = {"ifindex": 9, "ifname": storage.vrf, "flags": ["NOARP", "MASTER", "UP", "LOWER_UP"],
                            "mtu": 65575, "qdisc": "noqueue", "operstate": "UP", "group": "default",
                            "txqlen": 1000, "link_type": "ether", "address": "00:00:00:00:00:00",
                            "broadcast": "ff:ff:ff:ff:ff:ff"}
    if details:
        item.update({"promiscuity": 0, "allmulti": 0, "min_mtu": 1280, "max_mtu": 65575,
                     "linkinfo": {"info_kind": "vrf", "info_data": {"table": storage.vrf_table}},
                     "inet6_addr_gen_mode": "eui64", "num_tx_queues": 1, "num_rx_queues": 1})
    return item


def _links(storage: SimStorage, details: bool) -> list[dict[str, Any]]:
    items = [_lo_json(details)]
    if storage.vrf:
        items.append(_vrf_json(storage, details))
    items += [_link_json(storage, n, details) for n in storage.netdevs]
    return items


def _addr_info(netdev: SimNetdev) -> list[dict[str, Any]]:
    if not netdev.interface:
        return []
    local, _, prefix = netdev.interface.partition("/")
    network = ipaddress.ip_network(netdev.interface, strict=False)
    return [{"family": "inet", "local": local, "prefixlen": int(prefix), "broadcast": str(network.broadcast_address),
             "scope": "global", "label": netdev.name, "valid_life_time": 4294967295,
             "preferred_life_time": 4294967295}]


def _addrs(storage: SimStorage) -> list[dict[str, Any]]:
    lo = _lo_json(False)
    lo["addr_info"] = [{"family": "inet", "local": "127.0.0.1", "prefixlen": 8, "scope": "host", "label": "lo",
                        "valid_life_time": 4294967295, "preferred_life_time": 4294967295}]
    items = [lo]
    if storage.vrf:
        vrf = _vrf_json(storage, False)
        vrf["addr_info"] = []
        items.append(vrf)
    for netdev in storage.netdevs:
        item = _link_json(storage, netdev, False)
        item["addr_info"] = _addr_info(netdev)
        items.append(item)
    return items


def _link_text(item: dict[str, Any], details: bool) -> str:
    master = f" master {item['master']}" if item.get("master") else ""
    mode = " mode DEFAULT" if "addr_info" not in item else ""
    head = (f"{item['ifindex']}: {item['ifname']}: <{','.join(item['flags'])}> mtu {item['mtu']} "
            f"qdisc {item['qdisc']}{master} state {item['operstate']}{mode} group default qlen {item['txqlen']}\n")
    link = f"    link/{item['link_type']} {item['address']} brd {item['broadcast']}"
    if details:
        link += f" promiscuity 0  allmulti 0 minmtu {item['min_mtu']} maxmtu {item['max_mtu']} "
    out = head + link + "\n"
    if details:
        info = item.get("linkinfo") or {}
        kind = ""
        if info.get("info_kind") == "vrf":
            kind = f"vrf table {info['info_data']['table']} "
        elif info.get("info_slave_kind") == "vrf":
            kind = f"vrf_slave table {info['info_slave_data']['table']} "
        queues = item.get("num_tx_queues", 1)
        rest = f"addrgenmode eui64 numtxqueues {queues} numrxqueues {queues}"
        if item.get("parentdev"):
            rest += f" parentbus pci parentdev {item['parentdev']}"
        out += f"    {kind}{rest} \n"
    for address in item.get("addr_info", []):
        brd = f" brd {address['broadcast']}" if address.get("broadcast") else ""
        out += (f"    inet {address['local']}/{address['prefixlen']}{brd} scope {address['scope']} "
                f"{address.get('label', item['ifname'])}\n       valid_lft forever preferred_lft forever\n")
    return out


def _brief(storage: SimStorage) -> str:
    lines = []
    for item in _addrs(storage):
        addresses = " ".join(f"{a['local']}/{a['prefixlen']}" for a in item["addr_info"])
        lines.append(f"{item['ifname']:<16} {item['operstate']:<14} {addresses} ")
    return "\n".join(lines) + "\n"


def _route_json(route: SimRoute, *, show_table: bool) -> dict[str, Any]:
    item: dict[str, Any] = {"dst": route.dst}
    if route.gateway:
        item["gateway"] = route.gateway
    item["dev"] = route.dev
    if show_table and route.table:
        item["table"] = route.table
    for key in ("protocol", "scope"):
        value = getattr(route, key)
        if value:
            item[key] = value
    if route.prefsrc:
        item["prefsrc"] = route.prefsrc
    if route.metric is not None:
        item["metric"] = route.metric
    item["flags"] = []
    return item


def _route_text(route: SimRoute, *, show_table: bool) -> str:
    words = [route.dst]
    if route.gateway:
        words += ["via", route.gateway]
    words += ["dev", route.dev]
    if show_table and route.table:
        words += ["table", route.table]
    if route.protocol:
        words += ["proto", route.protocol]
    if route.scope:
        words += ["scope", route.scope]
    if route.prefsrc:
        words += ["src", route.prefsrc]
    if route.metric is not None:
        words += ["metric", str(route.metric)]
    return " ".join(words) + " \n"


def _route_get(storage: SimStorage, address: str, vrf: str | None) -> tuple[str, str] | None:
    route = resolve(storage, address, vrf)
    if route is None:
        return None
    item: dict[str, Any] = {"dst": address}
    if route.gateway:
        item["gateway"] = route.gateway
    item["dev"] = route.dev
    if route.table:
        item["table"] = route.table
    item.update({"prefsrc": route.prefsrc, "flags": [], "uid": 0, "cache": []})
    text = address + (f" via {route.gateway}" if route.gateway else "") + f" dev {route.dev}"
    text += (f" table {route.table}" if route.table else "") + f" src {route.prefsrc} uid 0 \n    cache \n"
    return json.dumps([item], separators=(",", ":")) + "\n", text


def _rules(storage: SimStorage) -> tuple[str, str]:
    rules: list[dict[str, Any]] = [{"priority": 0, "src": "all", "table": "local"}]
    if storage.vrf:
        rules.append({"priority": 1000, "src": "all", "l3mdev": None, "table": "unspec"})
    for rule in sorted(storage.rules, key=lambda r: (r.priority, r.dst)):
        dst, _, length = rule.dst.partition("/")
        rules.append({"priority": rule.priority, "src": "all", "dst": dst, "dstlen": int(length or 32),
                      "table": rule.table})
    rules += [{"priority": 32766, "src": "all", "table": "main"}, {"priority": 32767, "src": "all", "table": "default"}]
    lines = []
    for r in rules:
        to = f" to {r['dst']}/{r['dstlen']}" if "dst" in r else ""
        what = "lookup [l3mdev-table]" if "l3mdev" in r else f"lookup {r['table']}"
        lines.append(f"{r['priority']}:\tfrom all{to} {what}")
    return json.dumps(rules, separators=(",", ":")) + "\n", "\n".join(lines) + "\n"


def _dumps(items: list[dict[str, Any]]) -> str:
    return json.dumps(items, separators=(",", ":")) + "\n"


def ip_outputs(storage: SimStorage) -> dict[str, str]:
    out = {
        f"{OUT}/ip/addr.json": _dumps(_addrs(storage)),
        f"{OUT}/ip/addr.txt": "".join(_link_text(i, False) for i in _addrs(storage)),
        f"{OUT}/ip/addr-br.txt": _brief(storage),
        f"{OUT}/ip/link.json": _dumps(_links(storage, False)),
        f"{OUT}/ip/link.txt": "".join(_link_text(i, False) for i in _links(storage, False)),
        f"{OUT}/ip/link-d.json": _dumps(_links(storage, True)),
        f"{OUT}/ip/link-d.txt": "".join(_link_text(i, True) for i in _links(storage, True)),
    }
    main = [r for r in storage.routes if not r.table]
    out[f"{OUT}/ip/route.json"] = _dumps([_route_json(r, show_table=False) for r in main])
    out[f"{OUT}/ip/route.txt"] = "".join(_route_text(r, show_table=False) for r in main)
    ordered = sorted(storage.routes, key=lambda r: (r.table or "main") == "main")
    out[f"{OUT}/ip/route-all.json"] = _dumps([_route_json(r, show_table=True) for r in ordered])
    out[f"{OUT}/ip/route-all.txt"] = "".join(_route_text(r, show_table=True) for r in ordered)
    for table in sorted({r.table for r in storage.routes if r.table}):
        routes = [r for r in storage.routes if r.table == table]
        out[f"{OUT}/ip/route-table-{table}.json"] = _dumps([_route_json(r, show_table=False) for r in routes])
        out[f"{OUT}/ip/route-table-{table}.txt"] = "".join(_route_text(r, show_table=False) for r in routes)
    out[f"{OUT}/ip/rule.json"], out[f"{OUT}/ip/rule.txt"] = _rules(storage)
    for item_json in _addrs(storage):
        name = item_json["ifname"]
        out[f"{OUT}/ip/dev/{name}.addr.json"] = _dumps([item_json])
        out[f"{OUT}/ip/dev/{name}.addr.txt"] = _link_text(item_json, False)
    for details, variant in ((False, "link"), (True, "link-d")):
        for item_json in _links(storage, details):
            name = item_json["ifname"]
            out[f"{OUT}/ip/dev/{name}.{variant}.json"] = _dumps([item_json])
            out[f"{OUT}/ip/dev/{name}.{variant}.txt"] = _link_text(item_json, details)
    if storage.vrf and storage.vrf_table is not None:
        header = "Name              Table\n-----------------------\n"
        out[f"{OUT}/ip/vrf.txt"] = f"{header}{storage.vrf:<17} {storage.vrf_table}\n"
        out[f"{OUT}/ip/vrf.json"] = _dumps([{"name": storage.vrf, "table": storage.vrf_table}])
        for ext in ("json", "txt"):
            out[f"{OUT}/ip/route-vrf-{storage.vrf}.{ext}"] = out[f"{OUT}/ip/route-table-{storage.vrf_table}.{ext}"]
    for address in storage.destinations:
        for vrf in (None, storage.vrf) if storage.vrf else (None,):
            got = _route_get(storage, address, vrf)
            if got is None:
                continue
            folder = f"{OUT}/ip/route-get" + (f"/vrf-{vrf}" if vrf else "")
            out[f"{folder}/{address}.json"], out[f"{folder}/{address}.txt"] = got
    return out


# ------------------------------------------------------------------ vendor tools


def ibdev2netdev(state: NodeState, storage: SimStorage) -> tuple[str, str]:
    """Plain and ``-v`` output, sorted by device name as the script's ``ls`` sorts them."""
    plain, verbose = [], []
    by_bus = {n.bus_id: n for n in storage.netdevs}
    for hca in sorted(state.hcas, key=lambda h: h.name):
        netdev = by_bus.get(hca.bus_id)
        name = netdev.name if netdev else (hca.netdev or "")
        if not name:
            continue
        up = "Up" if (netdev.up if netdev else hca.state.startswith("4")) else "Down"
        port_state = hca.state.split(":", 1)[-1].strip()
        part = "MT41692 - 900-9D3B6-00CV-AA0" if hca.role == "storage" else "MT4129 - MCX75310AAS-NEA"
        card = "NVIDIA BlueField-3" if hca.role == "storage" else "NVIDIA ConnectX-7"
        plain.append(f"{hca.name} port 1 ==> {name} ({up})")
        verbose.append(f"{hca.bus_id} {hca.name} ({part}) {card} fw {hca.fw_ver} port 1 ({port_state}) ==> "
                       f"{name} ({up})")
    return "\n".join(plain) + "\n", "\n".join(verbose) + "\n"


def mlxconfig(netdev: SimNetdev) -> str:
    """``mlxconfig -d BDF q`` of a BlueField: the mode parameters and a few of their neighbours."""
    offload = "DISABLED(1)" if netdev.mode == "nic" else "ENABLED(0)"
    params = [("INTERNAL_CPU_MODEL", "EMBEDDED_CPU(1)"), ("INTERNAL_CPU_PAGE_SUPPLIER", "ECPF(0)"),
              ("INTERNAL_CPU_ESWITCH_MANAGER", "ECPF(0)"), ("INTERNAL_CPU_IB_VPORT0", "ECPF(0)"),
              ("INTERNAL_CPU_OFFLOAD_ENGINE", offload), ("LINK_TYPE_P1", "ETH(2)"), ("LINK_TYPE_P2", "ETH(2)"),
              ("SRIOV_EN", "True(1)"), ("NUM_OF_VFS", "16")]
    lines = ["", "Device #1:", "----------", "", "Device type:        BlueField3",
             "Name:               900-9D3B6-00CV-AA0_Ax", f"Description:        {_BF_DESCRIPTION}",
             f"Device:             {netdev.bus_id}", "", f"Configurations:{'Next Boot':>46}"]
    for name, value in params:
        mark = "*" if name == "INTERNAL_CPU_OFFLOAD_ENGINE" and netdev.mode == "nic" else " "
        lines.append(f"{mark:<8}{name:<44}{value}")
    return "\n".join(lines) + "\n"


def mlnx_qos(netdev: SimNetdev) -> str:
    lines = ["DCBX mode: OS controlled", f"Priority trust state: {netdev.trust}", "dscp2prio mapping:"]
    for prio in range(8):
        dscp = ",".join(f"{d:02d}" for d in range(prio * 8 + 7, prio * 8 - 1, -1))
        lines.append(f"\tprio:{prio} dscp:{dscp},")
    lines += ["default priority:", "Receive buffer size (bytes): 130944,130944,0,0,0,0,0,0,max_buffer_size=262016",
              "Cable len: 7", "PFC configuration:", "\tpriority    0   1   2   3   4   5   6   7",
              "\tenabled     " + "   ".join(str(v) for v in netdev.pfc) + "   ",
              "\tbuffer      " + "   ".join(str(v) for v in netdev.pfc) + "   "]
    lossless = [p for p, on in enumerate(netdev.pfc) if on]
    lossy = [p for p in range(8) if p not in lossless and p != 6]
    lines.append(f"tc: 0 ratelimit: unlimited, tsa: ets, bw: {50 if lossless else 100}%")
    lines += [f"\t priority:  {p}" for p in lossy]
    for tc in lossless:
        lines.append(f"tc: {tc} ratelimit: unlimited, tsa: ets, bw: 50%")
        lines.append(f"\t priority:  {tc}")
    lines += ["tc: 6 ratelimit: unlimited, tsa: vendor", "\t priority:  6"]
    return "\n".join(lines) + "\n"


def ethtool(netdev: SimNetdev, state: NodeState) -> dict[str, str]:
    hca = next((h for h in state.hcas if h.bus_id == netdev.bus_id), None)
    fw = f"{hca.fw_ver} ({hca.board_id})" if hca else "32.39.2048 (MT_0000000884)"
    speed = f"{netdev.rate_gbps * 1000}Mb/s" if netdev.up else "Unknown!"
    info = (f"driver: {'mlx5_core' if netdev.kind == 'bluefield' else 'mlx5_core[ib_ipoib]'}\n"
            "version: 24.04-0.6.6\n"
            f"firmware-version: {fw}\nexpansion-rom-version: \nbus-info: {netdev.bus_id}\n"
            "supports-statistics: yes\nsupports-test: yes\nsupports-eeprom-access: no\n"
            "supports-register-dump: no\nsupports-priv-flags: yes\n")
    settings = (f"Settings for {netdev.name}:\n\tSupported ports: [ FIBRE ]\n\tSpeed: {speed}\n\tDuplex: Full\n"
                "\tAuto-negotiation: on\n\tPort: Direct Attach Copper\n\tPHYAD: 0\n\tTransceiver: internal\n"
                f"\tLink detected: {'yes' if netdev.up else 'no'}\n")
    stats = ["NIC statistics:", f"     rx_bytes: {netdev.rx_bytes}", f"     tx_bytes: {netdev.tx_bytes}",
             f"     rx_bytes_phy: {netdev.rx_bytes + 4096}", f"     tx_bytes_phy: {netdev.tx_bytes + 4096}"]
    for prio in range(8):
        stats += [f"     rx_prio{prio}_pause: 0", f"     tx_prio{prio}_pause: 0"]
    stats += ["     tx_pause_storm_warning_events: 0", "     tx_pause_storm_error_events: 0"]
    return {"i": info, "settings": settings, "S": "\n".join(stats) + "\n"}


def outputs(state: NodeState) -> dict[str, str]:
    """``out/storage/...`` -> text: everything the storage shims print."""
    storage = derive(state)
    out = ip_outputs(storage)
    out[f"{OUT}/ibdev2netdev.txt"], out[f"{OUT}/ibdev2netdev-v.txt"] = ibdev2netdev(state, storage)
    for netdev in storage.netdevs:
        for kind, text in ethtool(netdev, state).items():
            out[f"{OUT}/ethtool/{netdev.name}.{kind}.txt"] = text
        if netdev.kind == "bluefield":
            out[f"{OUT}/mlnx_qos/{netdev.name}.txt"] = mlnx_qos(netdev)
            if netdev.bus_id.endswith(".0"):
                out[f"{OUT}/mlxconfig/{netdev.bus_id}.txt"] = mlxconfig(netdev)
    return out


# ------------------------------------------------------------------ shims

_NAME_OK = r"""case "$dev" in ""|*[!A-Za-z0-9_.:@-]*) echo "Device \"$dev\" does not exist." >&2; exit 1 ;; esac"""

IP = r'''out="${0%/*}/../out/storage/ip"
json=0 details=0 brief=0
while [ $# -gt 0 ]; do
  case "$1" in
    -j|-json|--json) json=1 ;;
    -d|-details|--details) details=1 ;;
    -br|-brief|--brief) brief=1 ;;
    -4|-p|-pretty|--pretty|-c|-color|--color|-color=*|--color=*|-s|-stats|-o|-oneline) ;;
    -V|-Version) echo "ip utility, iproute2-6.1.0, libbpf 1.1.2"; exit 0 ;;
    -*) echo "Option \"$1\" is unknown, try \"ip -help\"." >&2; exit 255 ;;
    *) break ;;
  esac
  shift
done
ext=txt; [ $json = 1 ] && ext=json
obj=${1:-help}; [ $# -gt 0 ] && shift
show() {
  [ -f "$out/$1.$ext" ] || { echo "ip (burnin simulator): no output for '$1'" >&2; exit 1; }
  exec cat "$out/$1.$ext"
}
case "$obj" in
  a|ad|add|addr|addre|addres|address|l|li|lin|link)
    case "$obj" in l|li|lin|link) what=link; [ $details = 1 ] && what=link-d ;; *) what=addr ;; esac
    case "$1" in show|list|ls|s) shift ;; esac
    if [ $# -eq 0 ]; then
      [ $brief = 1 ] && [ $what = addr ] && exec cat "$out/addr-br.txt"
      show "$what"
    fi
    [ "$1" = dev ] && shift
    dev=$1
    NAME_OK
    [ -f "$out/dev/$dev.$what.$ext" ] || { echo "Device \"$dev\" does not exist." >&2; exit 1; }
    exec cat "$out/dev/$dev.$what.$ext" ;;
  r|ro|rou|rout|route)
    sub=${1:-show}; [ $# -gt 0 ] && shift
    case "$sub" in
      show|list|ls|s|l)
        case "$1" in
          "") show route ;;
          table) case "$2" in all) show route-all ;; main|254) show route ;; *) show "route-table-$2" ;; esac ;;
          vrf) dev=$2
               NAME_OK
               [ -f "$out/route-vrf-$dev.$ext" ] || { echo "Cannot find device \"$dev\"" >&2; exit 1; }
               show "route-vrf-$dev" ;;
          *) echo "ip (burnin simulator): route show takes 'table T' or 'vrf V' only" >&2; exit 1 ;;
        esac ;;
      get)
        folder="$out/route-get"
        if [ "$1" = vrf ]; then
          dev=$2
          NAME_OK
          [ -f "$out/route-vrf-$dev.$ext" ] || { echo "Cannot find device \"$dev\"" >&2; exit 1; }
          folder="$folder/vrf-$dev"; shift 2
        fi
        [ "$1" = to ] && shift
        addr=$1
        case "$addr" in ""|*[!0-9a-fA-F.:]*)
          echo "Error: any valid prefix is expected rather than \"$addr\"." >&2; exit 1 ;;
        esac
        [ -f "$folder/$addr.$ext" ] && exec cat "$folder/$addr.$ext"
        echo "RTNETLINK answers: Network is unreachable" >&2; exit 2 ;;
      *) echo "Command \"$sub\" is unknown, try \"ip route help\"." >&2; exit 255 ;;
    esac ;;
  ru|rul|rule) show rule ;;
  vrf) [ -f "$out/vrf.$ext" ] || exit 0; show vrf ;;
  help|-h) echo "Usage: ip [ OPTIONS ] OBJECT { COMMAND | help }  (simulated: addr, link, route, rule, vrf)"
           exit 255 ;;
  *) echo "Object \"$obj\" is unknown, try \"ip help\"." >&2; exit 1 ;;
esac
'''.replace("NAME_OK", _NAME_OK)

IBDEV2NETDEV = r'''out="${0%/*}/../out/storage"
case "$1" in
  "") exec cat "$out/ibdev2netdev.txt" ;;
  -v) exec cat "$out/ibdev2netdev-v.txt" ;;
  *) echo "usage: ibdev2netdev [-v]" >&2; exit 1 ;;
esac
'''

MLXCONFIG = r'''out="${0%/*}/../out/storage/mlxconfig"
dev= verb= params=
while [ $# -gt 0 ]; do
  case "$1" in
    -d|--dev) shift; dev=$1 ;;
    -e|--enable_verbosity|-y|--yes) ;;
    q|query) verb=q ;;
    -*) echo "-E- Unknown flag \"$1\"" ; exit 1 ;;
    *) params="$params $1" ;;
  esac
  shift
done
[ "$verb" = q ] || { echo "-E- mlxconfig (burnin simulator) answers only: -d DEVICE q [PARAM...]"; exit 1; }
case "$dev" in ??:??.?) dev=0000:$dev ;; esac
case "$dev" in ""|*[!0-9a-fA-F:.]*) echo "-E- Failed to open device: $dev. No such file or directory"; exit 1 ;; esac
file="$out/$(printf '%s' "$dev" | tr 'A-F' 'a-f').txt"
[ -f "$file" ] || { echo "-E- Failed to query device current configuration of $dev"; exit 1; }
[ -z "$params" ] && exec cat "$file"
exec awk -v want="$params" '
BEGIN { n = split(want, w, " "); for (i = 1; i <= n; i++) keep[w[i]] = 1 }
/^Configurations:/ { print; body = 1; next }
body == 0 { print; next }
{ line = $0; sub(/^\*/, " ", line); split(line, f, " "); if (f[1] in keep) { print; found[f[1]] = 1 } }
END {
  for (k in keep) if (!(k in found)) { printf "-E- The Device doesn'"'"'t support %s parameter\n", k; bad = 1 }
  exit bad
}
' "$file"
'''

MLNX_QOS = r'''out="${0%/*}/../out/storage/mlnx_qos"
dev=
while [ $# -gt 0 ]; do
  case "$1" in
    -i|--interface) shift; dev=$1 ;;
    -i*) dev=${1#-i} ;;
    *) echo "mlnx_qos (burnin simulator) answers only: -i INTERFACE" >&2; exit 1 ;;
  esac
  shift
done
case "$dev" in ""|*[!A-Za-z0-9_.:@-]*) echo "Interface name is required" >&2; exit 1 ;; esac
[ -f "$out/$dev.txt" ] && exec cat "$out/$dev.txt"
echo "Netlink error: Operation not supported for $dev" >&2; exit 1
'''

ETHTOOL = r'''out="${0%/*}/../out/storage/ethtool"
kind=settings
case "$1" in
  -i|--driver) kind=i; shift ;;
  -S|--statistics) kind=S; shift ;;
  -*) echo "ethtool (burnin simulator) answers only: [-i|-S] DEVNAME" >&2; exit 1 ;;
esac
dev=$1
case "$dev" in ""|*[!A-Za-z0-9_.:@-]*) echo "ethtool: bad command line argument(s)" >&2; exit 1 ;; esac
[ -f "$out/$dev.$kind.txt" ] && exec cat "$out/$dev.$kind.txt"
echo "netlink error: no device matches name ($dev)" >&2; exit 1
'''


def scripts() -> dict[str, str]:
    """``bin/<tool>`` -> body (after the shim preamble)."""
    return {"ip": IP, "ibdev2netdev": IBDEV2NETDEV, "mlxconfig": MLXCONFIG, "mlnx_qos": MLNX_QOS, "ethtool": ETHTOOL}


_PREAMBLE = "#!/bin/sh\n# burnin simulator: {tool} of node {node}, printed from pre-rendered state.\n"


def render_scripts(state: NodeState) -> dict[str, str]:
    """``bin/<tool>`` -> whole script, for every storage tool."""
    return {**{tool: _PREAMBLE.format(tool=tool, node=state.name) + body for tool, body in scripts().items()},
            **write_tool.render_scripts(state), "ping": ping.render_script(state)}
