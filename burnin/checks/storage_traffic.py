"""STO-03: storage I/O rides the BlueField fabric, not the compute HCAs (the storage suite's phase measures it).

The phase (burnin.storage.measure) wrote and read the configured amount to
each storage mount and recorded, in bytes, how much every compute HCA's port
counters (and its IPoIB netdev's, when the topology names it) and every
BlueField netdev's byte counters moved meanwhile; a compute HCA counts the
larger of the two. The check
passes when every compute HCA moved less than 1% of the bytes written and the
BlueField netdevs transmitted at least 90% of them (a network file system adds
headers, never removes payload; a shortfall means the writes went elsewhere).
"""

from __future__ import annotations

from typing import Any

from burnin.checks.base import bad, check, declare_applicability, measured_count, ok, unknown
from burnin.checks.storage import storage_not_applicable
from burnin.evaluate.verdict import Finding, Unmeasurable, Verdict, roll_up
from burnin.facts import Facts
from burnin.topology.model import Topology

SECTION = "storage_traffic"
COMPUTE_SHARE_LIMIT = 0.01
"""A compute HCA may move less than this share of the bytes written (NCCL heartbeats, subnet management)."""
STORAGE_SHARE_FLOOR = 0.9
"""The BlueField netdevs must transmit at least this share of the bytes written."""

declare_applicability(("STO-03",), storage_not_applicable)


def traffic_section(facts: Facts) -> dict[str, Any]:
    """The phase's section, or Unmeasurable with why there is none."""
    if facts.unreachable:
        raise Unmeasurable(facts.unreachable)
    section = facts.data.get(SECTION)
    if section is None:
        raise Unmeasurable("storage traffic not collected: the storage suite's phase did not run (--suite storage)")
    if not isinstance(section, dict):
        raise Unmeasurable("storage traffic facts unreadable")
    for key in ("unavailable", "error"):
        if section.get(key):
            raise Unmeasurable(f"storage traffic not measured: {section[key]}")
    return section


def _deltas(section: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    value = section.get(kind)
    if not isinstance(value, dict) or not value:
        raise Unmeasurable(f"storage traffic facts hold no {kind} counters")
    return {str(k): v for k, v in value.items() if isinstance(v, dict)}


_PORT_COUNTERS = (("xmit", "port_xmit_data delta"), ("rcv", "port_rcv_data delta"))
_IPOIB_COUNTERS = (("ipoib_tx", "IPoIB tx_bytes delta"), ("ipoib_rx", "IPoIB rx_bytes delta"))


def _counter_note(reason: str) -> str:
    """Why a counter delta is unusable; a negative one is a counter that reset or went backwards."""
    return f"{reason} (a counter reset or went backwards)" if "outside its physical range" in reason else reason


def _pair(counters: dict[str, Any], hca: str, keys: tuple[tuple[str, str], ...]) -> tuple[int, int]:
    """Two counter deltas of one compute HCA, each a measured count (Unmeasurable otherwise)."""
    first, second = (measured_count(counters.get(key), hca, label) for key, label in keys)
    return first, second


def judge_traffic(node: str, section: dict[str, Any]) -> Verdict:
    """STO-03's verdict on one node's ``storage_traffic`` section."""
    written = measured_count(section.get("bytes_written"), "storage", "bytes written")
    limit = int(written * COMPUTE_SHARE_LIMIT)
    if limit <= 0:  # under 100 bytes: 1% of them is under one byte, which no compute HCA could stay below
        raise Unmeasurable(f"the storage write moved {written} bytes: too few to attribute")
    read = measured_count(section.get("bytes_read", 0), "storage", "bytes read")
    mounts = ", ".join(str(m) for m in section.get("mounts") or []) or "the storage mounts"
    floor = int(written * STORAGE_SHARE_FLOOR)
    io = f"{written} bytes written and {read} read on {mounts}"
    expected = (f"each compute HCA < {limit} bytes (1% of the {written} written); "
                f"BlueField netdevs transmit >= {floor} (90%)")
    findings: list[Finding] = []
    for hca, counters in sorted(_deltas(section, "compute").items()):
        try:
            xmit, rcv = _pair(counters, hca, _PORT_COUNTERS)
            has_ipoib = any(key in counters for key, _ in _IPOIB_COUNTERS)
            ip_tx, ip_rx = _pair(counters, hca, _IPOIB_COUNTERS) if has_ipoib else (0, 0)
        except Unmeasurable as exc:
            findings.append(unknown(hca, _counter_note(exc.reason.removeprefix(f"{hca} ")), expected))
            continue
        moved = xmit + rcv
        text = f"compute HCA moved {moved} bytes (xmit {xmit}, rcv {rcv}) while {io}"
        if ip_tx + ip_rx > moved:  # IP over the compute fabric, counted where the port counters do not
            moved = ip_tx + ip_rx
            text = f"compute HCA's IPoIB netdev moved {moved} bytes (tx {ip_tx}, rx {ip_rx}) while {io}"
        findings.append(ok(hca, text, expected) if moved < limit else bad(hca, text, expected))
    carried = 0
    storage = _deltas(section, "storage")
    try:
        carried = sum(measured_count(c.get("tx"), dev, "tx_bytes delta") for dev, c in storage.items())
    except Unmeasurable as exc:
        findings.append(unknown("BlueField netdevs", _counter_note(exc.reason), expected))
    else:
        names = "+".join(sorted(storage))
        text = f"({names}) transmitted {carried} bytes while {written} bytes were written"
        findings.append(ok("BlueField netdevs", text, expected) if carried >= floor
                        else bad("BlueField netdevs", text, expected))
    return roll_up("STO-03", node, findings, expected=expected,
                   healthy=f"{written} bytes written on {mounts}: BlueField netdevs transmitted {carried}, "
                           f"compute HCAs under 1%")


@check("STO-03", "Storage I/O moves over the BlueField netdevs, not the compute HCAs",
       sources=(SECTION,), fast=False)
def storage_traffic(facts: Facts, topology: Topology) -> Verdict:
    return judge_traffic(facts.node, traffic_section(facts))
