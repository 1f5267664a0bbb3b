"""STO-03's measurement: write and read each storage mount while the fabric byte counters look on.

Per node, through the phase's launcher: read every compute HCA's port
counters (``/sys/class/infiniband/<hca>/ports/1/counters/port_{xmit,rcv}_data``,
4-byte units) and its IPoIB netdev's byte counters, and every BlueField netdev's byte counters
(``/sys/class/net/<dev>/statistics/{tx,rx}_bytes``), write then read the
configured amount to each storage mount with the site's tool (``fio`` when
present, ``dd`` otherwise), remove the file, read the counters again. The
deltas, in bytes, go into the node's ``storage_traffic`` facts section, which
STO-03 judges (burnin.checks.storage_traffic). Counter paths lie below the root
the node's collector reported (``/`` on a real node).
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from burnin.errors import ParseError, UsageError
from burnin.facts import Facts
from burnin.launch.base import Each, Launcher, NodeCommand, Note, PlanItem, fan_out
from burnin.parsers.storage_io import parse_dd_bytes, parse_fio_bytes
from burnin.topology.model import StorageFabric, Topology
from burnin.transport.base import CommandResult

SECTION = "storage_traffic"
IB_COUNTER_UNIT = 4
"""port_xmit_data / port_rcv_data count 4-byte words (IBA PortCounters)."""
Tool = Literal["auto", "fio", "dd"]
_KEYS = ("tool", "size_mib", "timeout_s")


@dataclass(frozen=True)
class StorageSettings:
    """What STO-03 writes: the tool (``auto``: fio when present, dd otherwise), how much, how long it may take."""

    tool: Tool = "auto"
    size_mib: int = 1024
    timeout_s: float = 600.0


def load_storage_settings(path: Path | None) -> StorageSettings:
    """The site's settings (``--storage-config FILE``, YAML); the defaults without a file."""
    if path is None:
        return StorageSettings()
    from burnin.topology.load import load_yaml_document

    data, _lines = load_yaml_document(path)
    if data is None:
        return StorageSettings()
    if not isinstance(data, dict):
        raise UsageError(f"--storage-config {path}: must be a YAML mapping of {', '.join(_KEYS)}")
    unknown = sorted(str(k) for k in data if k not in _KEYS)
    if unknown:
        raise UsageError(f"--storage-config {path}: unknown key {unknown[0]} (known: {', '.join(_KEYS)})")
    tool = data.get("tool", "auto")
    if tool not in ("auto", "fio", "dd"):
        raise UsageError(f"--storage-config {path}: tool {tool!r} is not one of auto, fio, dd")
    size = data.get("size_mib", 1024)
    if not isinstance(size, int) or isinstance(size, bool) or not 1 <= size <= 1 << 20:
        raise UsageError(f"--storage-config {path}: size_mib {size!r} is not a whole number of MiB in 1..1048576")
    timeout = data.get("timeout_s", 600)
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not 1 <= timeout <= 86400:
        raise UsageError(f"--storage-config {path}: timeout_s {timeout!r} is not a number of seconds in 1..86400")
    return StorageSettings(tool, size, float(timeout))


# ------------------------------------------------------------------ commands


def test_file(mount: str, node: str) -> str:
    return posixpath.join(mount, f".burnin-sto03-{node}")


def write_argv(tool: str, path: str, size_mib: int) -> list[str]:
    if tool == "fio":
        return ["fio", "--name=burnin-sto03", f"--filename={path}", "--rw=write", "--bs=1M", f"--size={size_mib}M",
                "--direct=1", "--end_fsync=1", "--output-format=json"]
    return ["dd", "if=/dev/zero", f"of={path}", "bs=1M", f"count={size_mib}", "oflag=direct", "conv=fsync"]


def read_argv(tool: str, path: str, size_mib: int) -> list[str]:
    if tool == "fio":
        return ["fio", "--name=burnin-sto03", f"--filename={path}", "--rw=read", "--bs=1M", f"--size={size_mib}M",
                "--direct=1", "--output-format=json"]
    return ["dd", f"if={path}", "of=/dev/null", "bs=1M", f"count={size_mib}", "iflag=direct"]


def moved_bytes(tool: str, result: CommandResult, direction: Literal["read", "write"]) -> int:
    """What the tool says it moved (fio: JSON on stdout; dd: its summary line on stderr)."""
    if tool == "fio":
        return parse_fio_bytes(result.stdout, direction)
    return parse_dd_bytes(result.stderr + "\n" + result.stdout)


# ------------------------------------------------------------------ counters


@dataclass(frozen=True)
class Counter:
    """One byte counter: which device, which direction, its file, and its unit in bytes."""

    device: str
    kind: Literal["compute", "storage"]
    direction: str
    path: str
    unit: int = 1


def counters(root: str, compute_hcas: Sequence[str], storage_netdevs: Sequence[str],
             ipoib: Mapping[str, str] | None = None) -> list[Counter]:
    """The byte counters to sample: each compute HCA's port (and its IPoIB netdev's, when the topology names
    one: IP traffic routed onto the compute fabric shows there byte for byte), each BlueField netdev's."""
    out: list[Counter] = []
    for hca in compute_hcas:
        for direction, name in (("xmit", "port_xmit_data"), ("rcv", "port_rcv_data")):
            out.append(Counter(hca, "compute", direction, posixpath.join(
                root, f"sys/class/infiniband/{hca}/ports/1/counters/{name}"), IB_COUNTER_UNIT))
        netdev = (ipoib or {}).get(hca)
        if netdev:
            for direction, name in (("ipoib_tx", "tx_bytes"), ("ipoib_rx", "rx_bytes")):
                out.append(Counter(hca, "compute", direction,
                                   posixpath.join(root, f"sys/class/net/{netdev}/statistics/{name}")))
    for dev in storage_netdevs:
        for direction in ("tx", "rx"):
            out.append(Counter(dev, "storage", direction,
                               posixpath.join(root, f"sys/class/net/{dev}/statistics/{direction}_bytes")))
    return out


class MeasureError(Exception):
    """Why a node's measurement stopped (recorded as the section's ``error``)."""


def _run(launcher: Launcher, node: str, argv: Sequence[str], timeout: float) -> CommandResult:
    return launcher.per_node([NodeCommand(node, tuple(argv), timeout)])[node]


def read_counters(launcher: Launcher, node: str, items: Sequence[Counter]) -> list[int]:
    """Each counter's value in bytes (one ``cat`` of every file)."""
    result = _run(launcher, node, ["cat", *(c.path for c in items)], 30)
    if not result.ok:
        raise MeasureError(f"reading the byte counters: {result.describe_failure()}")
    lines = result.stdout.split()
    if len(lines) != len(items):
        raise MeasureError(f"reading the byte counters: {len(lines)} values for {len(items)} counter files")
    values: list[int] = []
    for counter, text in zip(items, lines, strict=True):
        if not text.isdigit():
            raise MeasureError(f"{counter.path} reads {text[:40]!r}, not a counter value")
        values.append(int(text) * counter.unit)
    return values


# ------------------------------------------------------------------ one node


def _tool(launcher: Launcher, node: str, settings: StorageSettings) -> str:
    if settings.tool != "auto":
        return settings.tool
    return "fio" if _run(launcher, node, ["fio", "--version"], 30).ok else "dd"


def _io(launcher: Launcher, node: str, tool: str, argv: Sequence[str], timeout: float,
        direction: Literal["read", "write"]) -> int:
    result = _run(launcher, node, argv, timeout)
    if not result.ok:
        raise MeasureError(f"{direction} with {' '.join(argv)}: {result.describe_failure()}")
    try:
        return moved_bytes(tool, result, direction)
    except ParseError as exc:
        raise MeasureError(f"{direction} with {tool}: {exc}") from None


def measure_node(launcher: Launcher, node: str, *, root: str, mounts: Sequence[str],
                 compute_hcas: Sequence[str], storage_netdevs: Sequence[str],
                 settings: StorageSettings, ipoib: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The node's ``storage_traffic`` section: bytes written/read and each counter's delta in bytes."""
    section: dict[str, Any] = {"size_mib": settings.size_mib, "mounts": list(mounts)}
    if not mounts:
        section["unavailable"] = "the topology's storage targets name no mount point to write to"
        return section
    items = counters(root, compute_hcas, storage_netdevs, ipoib)
    try:
        tool = _tool(launcher, node, settings)
        section["tool"] = tool
        before = read_counters(launcher, node, items)
        written = read = 0
        for mount in mounts:
            path = test_file(mount, node)
            try:
                written += _io(launcher, node, tool, write_argv(tool, path, settings.size_mib), settings.timeout_s,
                               "write")
                read += _io(launcher, node, tool, read_argv(tool, path, settings.size_mib), settings.timeout_s,
                            "read")
            finally:
                _run(launcher, node, ["rm", "-f", path], 60)
        after = read_counters(launcher, node, items)
    except MeasureError as exc:
        section["error"] = str(exc)
        return section
    section["bytes_written"] = written
    section["bytes_read"] = read
    deltas: dict[str, dict[str, dict[str, int]]] = {"compute": {}, "storage": {}}
    for counter, start, end in zip(items, before, after, strict=True):
        deltas[counter.kind].setdefault(counter.device, {})[counter.direction] = end - start
    section["compute"] = deltas["compute"]
    section["storage"] = deltas["storage"]
    return section


def plan(nodes: Sequence[str], *, mounts: Sequence[str], compute_hcas: Sequence[str], storage_netdevs: Sequence[str],
         settings: StorageSettings, ipoib: Mapping[str, str] | None = None) -> list[PlanItem]:
    """What :func:`measure_node` runs on each node, in order (``NODE``: the node's name, ``ROOT``: the root its
    collector reported, ``/`` on a real node)."""
    if not nodes or not mounts:
        return []
    each = tuple(nodes)

    def on_each(argv: Sequence[str], timeout: float) -> Each:
        return Each(each, tuple(argv), timeout)

    read = on_each(["cat", *(c.path for c in counters("ROOT", compute_hcas, storage_netdevs, ipoib))], 30)
    items: list[PlanItem] = [
        Note("storage STO-03 on each node (NODE: its name; ROOT: the root its collector reported, / on a real node)")]
    tools = [settings.tool]
    if settings.tool == "auto":
        items += [on_each(["fio", "--version"], 30), Note("with fio when it answers, else with dd:")]
        tools = ["fio", "dd"]
    items.append(read)
    for mount in mounts:
        path = test_file(mount, "NODE")
        for tool in tools:
            items += [on_each(write_argv(tool, path, settings.size_mib), settings.timeout_s),
                      on_each(read_argv(tool, path, settings.size_mib), settings.timeout_s)]
        items.append(on_each(["rm", "-f", path], 60))
    return [*items, read]


# ------------------------------------------------------------------ the phase


def phase_time_limit(topology: Topology, settings: StorageSettings) -> float:
    """Seconds the phase may take on a node: a write and a read per mount, the counters, the pings."""
    fabric = topology.storage
    mounts = [t for t in fabric.targets if t.mount] if fabric is not None else []
    return 2 * len(mounts) * settings.timeout_s + 300.0


def compute_hca_names(topology: Topology) -> list[str]:
    fabric = topology.storage
    if fabric is not None and fabric.nccl_ib_hca:
        return list(fabric.nccl_ib_hca)
    return [h.name for h in topology.compute_hcas]


def ipoib_netdevs(topology: Topology) -> dict[str, str]:
    """Compute HCA -> its IPoIB netdev, where the topology names one."""
    return {h.name: h.netdev for h in topology.hcas if h.netdev and h.name in compute_hca_names(topology)}


def traffic_plan(nodes: Sequence[str], topology: Topology, fabric: StorageFabric,
                 settings: StorageSettings) -> list[PlanItem]:
    """:func:`plan` for the topology's storage fabric."""
    return plan(nodes, mounts=[t.mount for t in fabric.targets if t.mount], compute_hcas=compute_hca_names(topology),
                storage_netdevs=[n.name for n in fabric.netdevs], settings=settings, ipoib=ipoib_netdevs(topology))


def measure_traffic(launcher: Launcher, facts: Mapping[str, Facts], nodes: Sequence[str], *, topology: Topology,
                    fabric: StorageFabric, settings: StorageSettings) -> None:
    """Measure every node and record its ``storage_traffic`` section into its facts."""
    mounts = [t.mount for t in fabric.targets if t.mount]
    netdevs = [n.name for n in fabric.netdevs]
    hcas = compute_hca_names(topology)
    ipoib = ipoib_netdevs(topology)

    def one(node: str) -> dict[str, Any]:
        return measure_node(launcher, node, root=str(facts[node].data.get("root") or "/"), mounts=mounts,
                            compute_hcas=hcas, storage_netdevs=netdevs, settings=settings, ipoib=ipoib)

    for node, section in zip(nodes, fan_out(list(nodes), one, workers=32), strict=True):
        facts[node].data[SECTION] = section
