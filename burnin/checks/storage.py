"""Storage-fabric isolation checks (STO, check-catalog 8): storage rides the BlueField fabric only.

The fast ones judge what the ``storage`` and ``storage-nic`` collector sources
gathered against the topology's ``storage`` section:

- STO-01 every storage target's route (``ip -j route get``) leaves through a BlueField netdev, whose PCI
  function is a BlueField one (vendor 0x15b3, a ``bluefield_device_ids`` device), in the VRF or policy table
  when the topology names one;
- STO-02 NCCL's static configuration (``/etc/nccl.conf``, ``$NCCL_CONF_FILE``, the environment) selects exactly
  the compute HCAs in ``NCCL_IB_HCA`` and no storage netdev in ``NCCL_SOCKET_IFNAME``; after the fabric suite's
  multi-node runs, also the devices NCCL said it opened (:mod:`burnin.storage.nccl_runtime`);
- STO-04 each BlueField netdev's MTU; STO-05 its RoCE QoS (trust, PFC, ECN); STO-06 its operating mode;
- STO-07 rp_filter/arp_ignore/arp_announce on every fabric netdev, and no address of one fabric inside the
  other's subnets.

A topology without a ``storage`` section declares these checks not applicable
(:func:`burnin.checks.base.not_applicable_reason`); called anyway, a check says
it could not be measured, never that it passed.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any

from burnin.checks.base import (
    PhysicalRange,
    bad,
    check,
    declare_applicability,
    measured_count,
    ok,
    unknown,
)
from burnin.errors import ParseError
from burnin.evaluate.verdict import Finding, Unmeasurable, Verdict, roll_up
from burnin.facts import Facts
from burnin.storage.nccl_runtime import EXPECTED as RUNTIME_EXPECTED
from burnin.storage.nccl_runtime import SECTION as RUNTIME_SECTION
from burnin.storage.nccl_runtime import runtime_findings
from burnin.storage.pathmtu_judge import SECTION as PATH_MTU_SECTION
from burnin.topology.model import StorageFabric, StorageNetdev, Topology

STO_CHECKS = ("STO-01", "STO-02", "STO-04", "STO-05", "STO-06", "STO-07")
MELLANOX = "0x15b3"
ARPHRD_INFINIBAND = 32
MTU = PhysicalRange(68, 65535, "bytes")
SYSCTL_VALUE = PhysicalRange(0, 8)
ECN_FLAG = PhysicalRange(0, 1)
_BLOCKING_ROUTES = ("unreachable", "blackhole", "prohibit", "throw")


def storage_not_applicable(topology: Topology) -> str | None:
    """Why the STO checks do not apply to this node type (None: they do)."""
    if topology.storage is None:
        return f"topology {topology.name} declares no storage fabric (no storage section)"
    return None


def qos_not_applicable(topology: Topology) -> str | None:
    """STO-05 applies only where storage runs RDMA over Ethernet (the topology's storage.qos)."""
    reason = storage_not_applicable(topology)
    if reason is None and topology.storage is not None and topology.storage.qos is None:
        return f"topology {topology.name} declares no RoCE QoS profile for storage (storage.qos)"
    return reason


declare_applicability(("STO-01", "STO-02", "STO-04", "STO-06", "STO-07"), storage_not_applicable)
declare_applicability(("STO-05",), qos_not_applicable)


def collector_sources(base: str, topologies: Iterable[Topology]) -> str:
    """The collector's ``--sources`` value: ``base`` plus each storage fabric's route targets, and the SDC
    workload's size (GPU-14: the largest the node types ask for)."""
    items: dict[str, None] = {}
    sizes = []
    for topology in topologies:
        sizes.append(topology.sdc.size)
        if topology.storage is not None:
            items.update(dict.fromkeys(topology.storage.collector_tokens()))
    return ",".join([base, *items, *([f"sdc-size={max(sizes)}"] if sizes else [])])


# ------------------------------------------------------------------ facts


def _fabric(topology: Topology) -> StorageFabric:
    if topology.storage is None:
        raise Unmeasurable(storage_not_applicable(topology) or "no storage fabric")
    return topology.storage


def _storage(facts: Facts, source: str = "storage") -> dict[str, Any]:
    value: dict[str, Any] = facts._require(source, source.replace("-", "_"))
    if not isinstance(value, dict):
        raise Unmeasurable(f"{source}: facts unreadable")
    return value


def _section(data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key)
    if not isinstance(value, dict):
        raise Unmeasurable(f"storage facts hold no {key}")
    return value


def _stdout(record: Any, what: str) -> str:
    """The stdout of a tool the collector ran, or Unmeasurable with why it did not run cleanly."""
    if not isinstance(record, dict):
        raise Unmeasurable(f"{what} was not run")
    if record.get("error"):
        raise Unmeasurable(str(record["error"]))
    if record.get("exit_status") != 0:
        tail = (str(record.get("stderr") or "") or str(record.get("stdout") or "")).strip().splitlines()[-1:]
        argv = " ".join(str(a) for a in record.get("argv") or [what])
        raise Unmeasurable(f"{argv} exited {record.get('exit_status')}" + (f": {tail[0][:160]}" if tail else ""))
    return str(record.get("stdout") or "")


def _parse(parser: Any, text: str, what: str) -> Any:
    try:
        return parser(text)
    except ParseError as exc:
        raise Unmeasurable(f"{what} unreadable: {exc}") from None


def _rdma_of_pci(data: dict[str, Any], pci: object) -> str | None:
    rdma = data.get("rdma")
    if not isinstance(rdma, dict) or not pci:
        return None
    return next((name for name, info in sorted(rdma.items()) if isinstance(info, dict) and info.get("pci") == pci),
                None)


def _netdev_list(fabric: StorageFabric) -> str:
    return "/".join(n.name for n in fabric.netdevs)


# ------------------------------------------------------------------ STO-01


def _is_bluefield(info: dict[str, Any], netdev: StorageNetdev, fabric: StorageFabric) -> str | None:
    """Why ``info`` (the netdev's sysfs facts) is not the topology's BlueField function, or None."""
    pci, vendor, device = info.get("pci"), info.get("vendor"), info.get("device_id")
    if pci is None:
        return "no PCI device (a virtual netdev)"
    if pci != netdev.bus_id:
        return f"PCI {pci}, not the BlueField at {netdev.bus_id}"
    if vendor is None or device is None:
        raise Unmeasurable(f"{netdev.name} PCI vendor/device of {pci} unreadable")
    if vendor != MELLANOX or device not in fabric.bluefield_device_ids:
        return f"PCI {pci} is {vendor}:{device}, not a BlueField ({MELLANOX}:{'/'.join(fabric.bluefield_device_ids)})"
    return None


def _route_via(dev: str, data: dict[str, Any], netdevs: dict[str, Any]) -> str:
    """``ibp79s0 (IPoIB, mlx5_2)``: the device a route leaves through, and what it is."""
    info = netdevs.get(dev)
    if not isinstance(info, dict):
        return f"{dev} (not in /sys/class/net)"
    rdma = _rdma_of_pci(data, info.get("pci"))
    if info.get("type") == ARPHRD_INFINIBAND:
        return f"{dev} (IPoIB{', ' + rdma if rdma else ''})"
    if info.get("pci") is None:
        return f"{dev} (virtual netdev)"
    what = f"PCI {info.get('pci')} {info.get('vendor')}:{info.get('device_id')}"
    return f"{dev} ({rdma + ', ' if rdma else ''}{what}, not a storage netdev)"


def _route_record(data: dict[str, Any], destination: str) -> Any:
    routes = _section(data, "routes")
    record = routes.get(destination)
    if record is None:
        raise Unmeasurable(f"route to {destination} not looked up (the collector was not given this target)")
    return record


@check("STO-01", "Storage targets routed through BlueField netdevs only", sources=("storage",))
def storage_routes(facts: Facts, topology: Topology) -> Verdict:
    from burnin.parsers.iproute import parse_ip_route

    fabric = _fabric(topology)
    routing = fabric.routing
    expected = f"a BlueField netdev: {_netdev_list(fabric)}"
    if routing is not None:
        expected += f" in VRF {routing.vrf}" if routing.vrf else f" from table {routing.table}"
    data = _storage(facts)
    netdevs = _section(data, "netdevs")
    findings: list[Finding] = []
    for target in fabric.targets:
        subject = target.label
        try:
            record = _route_record(data, target.destination)
            if isinstance(record, dict) and record.get("exit_status") not in (0, None) and not record.get("error") \
                    and "unreachable" in str(record.get("stderr") or "").lower():
                findings.append(bad(subject, "has no route (Network is unreachable)", expected))
                continue
            routes = _parse(parse_ip_route, _stdout(record, f"ip route get {target.destination}"),
                            f"ip route get {target.destination}").routes
            route = routes[0]
            if route.type in _BLOCKING_ROUTES:
                findings.append(bad(subject, f"has a {route.type} route", expected))
                continue
            if route.dev is None:
                raise Unmeasurable(f"ip route get {target.destination} names no device")
            netdev = fabric.netdev(route.dev)
            if netdev is None:
                findings.append(bad(subject, f"routed via {_route_via(route.dev, data, netdevs)}", expected))
                continue
            info = netdevs.get(netdev.name)
            if not isinstance(info, dict):
                raise Unmeasurable(f"{netdev.name} not in /sys/class/net")
            why = _is_bluefield(info, netdev, fabric)
            if why is not None:
                findings.append(bad(subject, f"routed via {netdev.name}: {why}", expected))
                continue
            table = route.table or "main"
            if routing is not None and routing.vrf is not None and info.get("master") != routing.vrf:
                findings.append(bad(subject, f"routed via {netdev.name}, which is not in VRF {routing.vrf} "
                                             f"(master {info.get('master') or 'none'})", expected))
            elif routing is not None and routing.table is not None and table != str(routing.table):
                findings.append(bad(subject, f"routed via {netdev.name} from table {table}", expected))
            else:
                where = f", table {table}" if table != "main" else ""
                findings.append(ok(subject, f"via {netdev.name} (BlueField {netdev.bus_id}{where})", expected))
        except Unmeasurable as exc:
            findings.append(unknown(subject, exc.reason, expected))
    return roll_up("STO-01", facts.node, findings, expected=expected,
                   healthy=f"{len(findings)} storage targets via BlueField netdevs")


# ------------------------------------------------------------------ STO-02


def nccl_selects(selector: str, name: str) -> bool:
    """NCCL_IB_HCA / NCCL_SOCKET_IFNAME semantics.

    ``^`` excludes, ``=`` means exact names (else prefixes), ``:port`` is ignored.
    """
    text, exclude, exact = selector.strip(), False, False
    if text.startswith("^"):
        exclude, text = True, text[1:]
    if text.startswith("="):
        exact, text = True, text[1:]
    items = [item.split(":")[0].strip() for item in text.split(",") if item.strip()]
    hit = any(name == item if exact else name.startswith(item) for item in items)
    return hit != exclude


def parse_nccl_conf(text: str) -> dict[str, str]:
    """``KEY=VALUE`` lines of an nccl.conf (``#`` comments).

    The first setting of a key wins, as in NCCL: it loads the file with
    ``setenv(key, value, 0)``, which never overwrites (src/misc/param.cc).
    """
    values: dict[str, str] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        key, sep, value = line.partition("=")
        if sep and key.strip().startswith("NCCL_"):
            values.setdefault(key.strip(), value.strip())
    return values


def _nccl_sources(data: dict[str, Any]) -> list[tuple[str, dict[str, str]]]:
    """(where, settings) for each place a job's NCCL reads its configuration from."""
    nccl = _section(data, "nccl")
    files = nccl.get("files")
    if not isinstance(files, dict):
        raise Unmeasurable("NCCL configuration files not read")
    out: list[tuple[str, dict[str, str]]] = []
    for path, info in files.items():
        if not isinstance(info, dict):
            raise Unmeasurable(f"{path}: facts unreadable")
        if info.get("error"):
            raise Unmeasurable(str(info["error"]))
        if info.get("present") and isinstance(info.get("text"), str):
            out.append((str(path), parse_nccl_conf(info["text"])))
    environment = nccl.get("environment")
    if not isinstance(environment, dict):
        raise Unmeasurable("environment not read")
    out.append(("environment", {str(k): str(v) for k, v in environment.items() if str(k).startswith("NCCL_")}))
    return out


def _storage_rdma(data: dict[str, Any], topology: Topology, fabric: StorageFabric) -> dict[str, str]:
    """Storage RDMA device -> its netdev (the topology's storage HCAs and the BlueField functions' devices)."""
    out = {h.name: h.netdev or h.name for h in topology.storage_hcas}
    for netdev in fabric.netdevs:
        if netdev.hca:
            out[netdev.hca] = netdev.name
        found = _rdma_of_pci(data, netdev.bus_id)
        if found:
            out.setdefault(found, netdev.name)
    return out


@check("STO-02", "NCCL configured for compute HCAs only, never storage devices", sources=("storage",),
       evidence=(RUNTIME_SECTION,))
def nccl_config(facts: Facts, topology: Topology) -> Verdict:
    fabric = _fabric(topology)
    compute = list(fabric.nccl_ib_hca or (h.name for h in topology.compute_hcas))
    expected = f"NCCL_IB_HCA selecting exactly {','.join(compute)}; no storage netdev in NCCL_SOCKET_IFNAME"
    data = _storage(facts)
    storage_rdma = _storage_rdma(data, topology, fabric)
    rdma = data.get("rdma")
    devices = sorted({*(rdma if isinstance(rdma, dict) else {}), *(h.name for h in topology.hcas)})
    storage_netdevs = [n.name for n in fabric.netdevs]
    findings: list[Finding] = []
    any_hca = False
    for where, settings in _nccl_sources(data):
        problems: list[str] = []
        selector = settings.get("NCCL_IB_HCA")
        if selector is not None:
            any_hca = True
            selected = [d for d in devices if nccl_selects(selector, d)]
            leaked = [f"{d} ({storage_rdma[d]})" for d in selected if d in storage_rdma]
            missing = [d for d in compute if d not in selected]
            foreign = [d for d in selected if d not in compute and d not in storage_rdma]
            if leaked:
                what = "storage devices" if len(leaked) > 1 else "storage device"
                problems.append(f"NCCL_IB_HCA={selector} selects {what} {', '.join(leaked)}")
            if missing:
                problems.append(f"NCCL_IB_HCA={selector} leaves out compute HCA {', '.join(missing)}")
            if foreign:
                problems.append(f"NCCL_IB_HCA={selector} selects non-compute {', '.join(foreign)}")
        ifname = settings.get("NCCL_SOCKET_IFNAME")
        if ifname is not None:
            leaked_if = [n for n in storage_netdevs if nccl_selects(ifname, n)]
            if leaked_if:
                problems.append(f"NCCL_SOCKET_IFNAME={ifname} selects storage netdev {', '.join(leaked_if)}")
        if problems:
            findings.append(bad(where, "; ".join(problems), expected))
        elif selector is not None or ifname is not None:
            findings.append(ok(where, "compute HCAs only", expected))
    if not any_hca:
        storage = ", ".join(sorted(storage_rdma)) or "the storage devices"
        findings.append(bad("node", "NCCL_IB_HCA set neither in /etc/nccl.conf nor in the environment: NCCL opens "
                                    f"every RDMA device, {storage} included", expected))
    healthy = f"NCCL_IB_HCA selects exactly {len(compute)} compute HCAs"
    runtime = runtime_findings(facts, topology, compute=compute, storage_rdma=storage_rdma,
                               storage_netdevs=storage_netdevs)
    if runtime is None:  # no fabric-suite evidence: the static configuration alone
        return roll_up("STO-02", facts.node, findings, expected=expected, healthy=healthy)
    return roll_up("STO-02", facts.node, [*findings, *runtime], expected=f"{expected}; {RUNTIME_EXPECTED}",
                   healthy=f"{healthy}; NCCL opened compute HCAs only in {len(runtime)} runs")


# ------------------------------------------------------------------ STO-04


@check("STO-04", "BlueField netdev MTU; path MTU to every storage target (storage suite)", sources=("storage",),
       evidence=(PATH_MTU_SECTION,))
def storage_mtu(facts: Facts, topology: Topology) -> Verdict:
    """The BlueField netdevs' MTU; where the storage suite's phase pinged the targets, the path MTU too."""
    from burnin.storage.pathmtu_judge import expected_text, path_mtu_findings, path_mtu_section

    fabric = _fabric(topology)
    mtus = sorted({n.mtu for n in fabric.netdevs})
    expected = (f"MTU {mtus[0]} on every BlueField netdev" if len(mtus) == 1
                else ", ".join(f"{n.name} MTU {n.mtu}" for n in fabric.netdevs))
    healthy = f"MTU {'/'.join(str(m) for m in mtus)} on {len(fabric.netdevs)} BlueField netdevs"
    paths = path_mtu_section(facts)
    if paths is None:  # the node suite and the probe: the interfaces only
        return roll_up("STO-04", facts.node, _interface_mtus(facts, fabric, expected), expected=expected,
                       healthy=healthy)
    expected += f"; {expected_text(fabric)}"
    try:
        findings = _interface_mtus(facts, fabric, expected)
    except Unmeasurable as exc:
        findings = [unknown("BlueField netdevs", exc.reason, expected)]
    findings += path_mtu_findings(paths, fabric)
    return roll_up("STO-04", facts.node, findings, expected=expected,
                   healthy=f"{healthy}; {len(fabric.targets)} storage targets answer don't-fragment pings of MTU "
                           f"{mtus[0]}")


def _interface_mtus(facts: Facts, fabric: StorageFabric, expected: str) -> list[Finding]:
    netdevs = _section(_storage(facts), "netdevs")
    findings: list[Finding] = []
    for netdev in fabric.netdevs:
        info = netdevs.get(netdev.name)
        if not isinstance(info, dict):
            findings.append(bad(netdev.name, "absent from /sys/class/net", expected))
            continue
        try:
            mtu = measured_count(info.get("mtu"), netdev.name, "mtu", MTU)
        except Unmeasurable as exc:
            findings.append(unknown(netdev.name, exc.reason, expected))
            continue
        findings.append(ok(netdev.name, f"MTU {mtu}", expected) if mtu == netdev.mtu
                        else bad(netdev.name, f"MTU {mtu}", expected))
    return findings


# ------------------------------------------------------------------ STO-05


def _ecn_on(info: dict[str, Any], point: str, prio: int, name: str) -> bool:
    ecn = info.get("ecn")
    values = ecn.get(point) if isinstance(ecn, dict) else None
    if not isinstance(values, dict):
        raise Unmeasurable(f"/sys/class/net/{name}/ecn/{point} unreadable")
    return measured_count(values.get(str(prio)), name, f"ecn/{point}/enable/{prio}", ECN_FLAG) == 1


@check("STO-05", "RoCE QoS of the storage netdevs (trust, PFC, ECN)", sources=("storage", "storage-nic"), fast=False)
def storage_qos(facts: Facts, topology: Topology) -> Verdict:
    from burnin.parsers.mlnx_qos import parse_mlnx_qos

    fabric = _fabric(topology)
    qos = fabric.qos
    if qos is None:
        raise Unmeasurable(qos_not_applicable(topology) or "no QoS profile")
    want_pfc = sorted(set(qos.pfc_priorities))
    want_ecn = sorted(set(qos.ecn_priorities))
    expected = (f"trust {qos.trust}, PFC on {_prios(want_pfc)} only, "
                f"ECN (roce_np, roce_rp) on {_prios(want_ecn)}")
    netdevs = _section(_storage(facts), "netdevs")
    qos_records = _section(_storage(facts, "storage-nic"), "mlnx_qos")
    findings: list[Finding] = []
    for netdev in fabric.netdevs:
        try:
            info = netdevs.get(netdev.name)
            if not isinstance(info, dict):
                findings.append(bad(netdev.name, "absent from /sys/class/net", expected))
                continue
            report = _parse(parse_mlnx_qos, _stdout(qos_records.get(netdev.name), f"mlnx_qos -i {netdev.name}"),
                            f"mlnx_qos -i {netdev.name}")
            if report.trust is None or report.pfc_enabled is None:
                raise Unmeasurable(f"mlnx_qos -i {netdev.name} printed no trust state or PFC table")
            pfc = list(report.pfc_priorities)
            ecn = [p for p in want_ecn if _ecn_on(info, "roce_np", p, netdev.name)
                   and _ecn_on(info, "roce_rp", p, netdev.name)]
            text = f"trust {report.trust}, PFC on {_prios(pfc)}, ECN on {_prios(ecn)}"
            healthy = report.trust == qos.trust and pfc == want_pfc and ecn == want_ecn
            findings.append(ok(netdev.name, text, expected) if healthy else bad(netdev.name, text, expected))
        except Unmeasurable as exc:
            findings.append(unknown(netdev.name, exc.reason, expected))
    return roll_up("STO-05", facts.node, findings, expected=expected)


def _prios(prios: Iterable[int]) -> str:
    listed = ",".join(str(p) for p in prios)
    return listed or "none"


# ------------------------------------------------------------------ STO-06


def bluefield_mode(offload_engine: int | None, cpu_model: int | None) -> str | None:
    """``dpu``, ``nic`` or ``separated-host`` from the two mlxconfig codes; None when unknown."""
    if offload_engine == 1:
        return "nic"
    if offload_engine == 0:
        return "separated-host" if cpu_model == 0 else "dpu"
    return None


@check("STO-06", "BlueField operating mode (DPU or NIC) as designed", sources=("storage-nic",), fast=False)
def bluefield_operating_mode(facts: Facts, topology: Topology) -> Verdict:
    from burnin.parsers.mlxconfig import parse_mlxconfig_query, value_code

    fabric = _fabric(topology)
    modes = {n.mode for n in fabric.netdevs}
    expected = (f"{modes.pop().upper()} mode on {_netdev_list(fabric)}" if len(modes) == 1
                else ", ".join(f"{n.name} {n.mode.upper()} mode" for n in fabric.netdevs))
    records = _section(_storage(facts, "storage-nic"), "mlxconfig")
    findings: list[Finding] = []
    for netdev in fabric.netdevs:
        function0 = netdev.bus_id[:-1] + "0"
        try:
            what = f"mlxconfig -d {function0} q"
            report = _parse(parse_mlxconfig_query, _stdout(records.get(function0), what), what)
            if not report.devices:
                raise Unmeasurable(f"{what}: {'; '.join(report.errors)[:160] or 'no device block'}")
            device = report.devices[0]
            engine_text = device.current("INTERNAL_CPU_OFFLOAD_ENGINE")
            model_text = device.current("INTERNAL_CPU_MODEL")
            mode = bluefield_mode(value_code(engine_text), value_code(model_text))
            if mode is None:
                raise Unmeasurable(f"{what}: INTERNAL_CPU_OFFLOAD_ENGINE {engine_text or 'not reported'}")
            text = f"{mode.upper()} mode (INTERNAL_CPU_OFFLOAD_ENGINE {engine_text}, INTERNAL_CPU_MODEL {model_text})"
            findings.append(ok(netdev.name, f"{mode.upper()} mode", expected) if mode == netdev.mode
                            else bad(netdev.name, f"{function0} {text}", expected))
        except Unmeasurable as exc:
            findings.append(unknown(netdev.name, exc.reason, expected))
    return roll_up("STO-06", facts.node, findings, expected=expected)


# ------------------------------------------------------------------ STO-07


def _networks_of(interfaces: dict[str, list[ipaddress.IPv4Interface | ipaddress.IPv6Interface]],
                 names: Iterable[str]) -> list[tuple[str, ipaddress.IPv4Network | ipaddress.IPv6Network]]:
    return [(name, iface.network) for name in names for iface in interfaces.get(name, [])]


def _interfaces(data: dict[str, Any]) -> dict[str, list[ipaddress.IPv4Interface | ipaddress.IPv6Interface]]:
    from burnin.parsers.iproute import parse_ip_addr

    addrs = _parse(parse_ip_addr, _stdout(data.get("ip_addr"), "ip -j addr"), "ip -j addr")
    out: dict[str, list[ipaddress.IPv4Interface | ipaddress.IPv6Interface]] = {}
    for iface in addrs.interfaces:
        for address in iface.addresses:
            if address.scope == "link":
                continue
            try:
                out.setdefault(iface.name, []).append(
                    ipaddress.ip_interface(f"{address.local}/{address.prefixlen}"))
            except ValueError:
                raise Unmeasurable(f"ip -j addr: {iface.name} address {address.local}/{address.prefixlen} "
                                   "unreadable") from None
    return out


def _effective(sysctls: dict[str, Any], name: str, setting: str) -> int:
    """The value the kernel applies on ``name``: the larger of ``all`` and the device's own."""
    values = []
    for scope in ("all", name):
        entry = sysctls.get(scope)
        value = entry.get(setting) if isinstance(entry, dict) else None
        values.append(measured_count(value, f"net.ipv4.conf.{scope}", setting, SYSCTL_VALUE))
    return max(values)


@check("STO-07", "No cross-fabric leaks: ARP/rp_filter settings and disjoint subnets", sources=("storage",))
def cross_fabric(facts: Facts, topology: Topology) -> Verdict:
    fabric = _fabric(topology)
    want = fabric.sysctl.expected()
    settings = " ".join(f"{k}={v}" for k, v in want.items())
    expected = f"{settings} on every fabric netdev; storage and compute subnets disjoint"
    data = _storage(facts)
    netdevs = _section(data, "netdevs")
    sysctls = _section(data, "sysctl")
    storage_names = [n.name for n in fabric.netdevs]
    compute_names = [h.netdev for h in topology.compute_hcas if h.netdev]
    findings: list[Finding] = []
    for name in [*storage_names, *compute_names]:
        if name not in netdevs:
            findings.append(unknown(name, "not in /sys/class/net", expected))
            continue
        try:
            found = {setting: _effective(sysctls, name, setting) for setting in want}
        except Unmeasurable as exc:
            findings.append(unknown(name, exc.reason, expected))
            continue
        off = [f"{s}={v}" for s, v in found.items() if v != want[s]]
        findings.append(bad(name, " ".join(off), expected) if off
                        else ok(name, " ".join(f"{s}={v}" for s, v in found.items()), expected))
    try:
        interfaces = _interfaces(data)
    except Unmeasurable as exc:
        findings.append(unknown("addresses", exc.reason, expected))
        return roll_up("STO-07", facts.node, findings, expected=expected)
    storage_nets = _networks_of(interfaces, storage_names)
    for target in fabric.targets:
        if target.subnet is not None:
            storage_nets.append((f"target {target.name}", ipaddress.ip_network(target.subnet)))
    compute_nets = _networks_of(interfaces, compute_names)
    for name in compute_names:
        for iface in interfaces.get(name, []):
            inside = next((f"{where} {net}" for where, net in storage_nets if iface.ip in net), None)
            if inside is not None:
                findings.append(bad(name, f"address {iface} inside storage subnet ({inside})", expected))
    for name in storage_names:
        for iface in interfaces.get(name, []):
            inside = next((f"{where} {net}" for where, net in compute_nets if iface.ip in net), None)
            if inside is not None:
                findings.append(bad(name, f"address {iface} inside compute subnet ({inside})", expected))
    return roll_up("STO-07", facts.node, findings, expected=expected,
                   healthy=f"{settings} on {len(storage_names) + len(compute_names)} netdevs; subnets disjoint")
