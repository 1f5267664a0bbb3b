"""STO-04's path part: a don't-fragment ping that fills the storage MTU must reach every storage target.

The storage suite's phase (burnin.storage.pathmtu) pinged each target with
``ping -n -M do -s <MTU-28> -c 3 -i 0.2 -W 1`` (IPv6: ``-6``, ``MTU-48``) and
recorded what ping printed in the node's ``storage_pathmtu`` section. Per target:

- **pass**: at least one reply to the full-size don't-fragment requests, and no
  sign that one was too big;
- **fail**: the kernel refused the packet as larger than the route's MTU
  (``local error: message too long, mtu=1500``, ``sendmsg: Message too long``),
  a router answered Fragmentation needed / Packet too big, or the target
  answered the small pings the phase then sent but none of the full-size ones
  (a hop drops jumbo frames without telling: an MTU black hole);
- **incomplete**: nothing was learnt about the MTU: ping missing, timed out,
  unreadable, or the target unreachable or silent to small pings too. An
  unreachable target is not an MTU failure; STO-01 judges the route.

This module only judges; STO-04 itself (burnin.checks.storage) adds these
findings to its interface-MTU ones when the section is present.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Any

from burnin.errors import ParseError
from burnin.evaluate.verdict import Finding, Unmeasurable, bad, ok, unknown
from burnin.facts import Facts
from burnin.text import printable
from burnin.topology.model import StorageFabric, StorageTarget

if TYPE_CHECKING:
    from burnin.parsers.ping import PingReport

SECTION = "storage_pathmtu"
MISSING_TOOL_STATUS = 127


def path_mtu_section(facts: Facts) -> dict[str, Any] | None:
    """The phase's section; None when the storage suite's phase did not run (the node suite, the probe)."""
    if facts.unreachable:
        return None
    section = facts.data.get(SECTION)
    if section is None:
        return None
    if not isinstance(section, dict):
        raise Unmeasurable("path MTU facts unreadable")
    return section


def expected_path_mtu(fabric: StorageFabric) -> int:
    """The MTU every storage path must carry: the BlueField netdevs' (the smallest, where they differ)."""
    return min(n.mtu for n in fabric.netdevs)


def is_ipv6(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).version == 6
    except ValueError:
        return ":" in address


def expected_text(fabric: StorageFabric) -> str:
    from burnin.parsers.ping import df_payload  # the ping parser only where a phase pinged: not in the probe

    mtu = expected_path_mtu(fabric)
    return f"{df_payload(mtu)}-byte don't-fragment pings (MTU {mtu}) answered by every storage target"


def _output(record: dict[str, Any]) -> str:
    return f"{record.get('stdout') or ''}\n{record.get('stderr') or ''}"


def _ran(record: object, what: str) -> PingReport:
    """The parsed output of one recorded ping, or Unmeasurable saying why there is none."""
    if not isinstance(record, dict):
        raise Unmeasurable(f"{what} not run")
    if record.get("error"):
        raise Unmeasurable(f"{what}: {printable(str(record['error']))[:160]}")
    status = record.get("exit_status")
    text = _output(record)
    if status == MISSING_TOOL_STATUS or (status not in (0, 1, 2) and not text.strip()):
        tail = text.strip().splitlines()[-1:] or [f"exit status {status}"]
        raise Unmeasurable(f"{what}: ping did not run ({printable(tail[0])[:120]})")
    from burnin.parsers.ping import parse_ping

    try:
        return parse_ping(text)
    except ParseError as exc:
        raise Unmeasurable(f"{what}: output unreadable ({printable(str(exc))[:200]})") from None


def _evidence(report: PingReport) -> str:
    """What says the packet was too big, as ping printed it."""
    parts: list[str] = []
    if report.local_mtus:
        parts.append(f"local error, mtu={min(report.local_mtus)}")
    for hop in report.icmp_errors:
        if hop.too_big:
            parts.append(f"{printable(hop.message)} from {printable(hop.source)}")
            break
    if report.send_too_long:
        parts.append("sendmsg: Message too long")
    return "; ".join(parts)


def judge_target(target: StorageTarget, record: object, mtu: int) -> Finding:
    """One target's path-MTU finding from what the phase recorded for it."""
    from burnin.parsers.ping import df_payload

    subject = f"path to {target.label}"
    ipv6 = is_ipv6(target.destination)
    payload = df_payload(mtu, ipv6)
    expected = f"MTU {mtu}: {payload}-byte don't-fragment ping answered"
    what = f"{payload}-byte DF ping"
    try:
        report = _ran(record, f"ping {target.destination}")
        if report.too_long:
            found = report.path_mtu
            measured = f"MTU {found}" if found is not None else f"MTU below {mtu}"
            return bad(subject, f"{measured} ({what}: {_evidence(report)})", expected)
        if report.payload_bytes is not None and report.payload_bytes != payload:
            raise Unmeasurable(f"ping sent {report.payload_bytes}-byte payloads, not the {payload} MTU {mtu} needs")
        if report.received > 0:
            sent = report.statistics.transmitted if report.statistics is not None else report.received
            return ok(subject, f"MTU {mtu} ({what}: {report.received}/{sent} answered)", expected)
        if report.unreachable:
            raise Unmeasurable(f"unreachable ({printable(report.unreachable[0])[:120]}): path MTU not measured")
        if report.messages:
            raise Unmeasurable(f"ping: {printable(report.messages[0])[:160]}")
        small = _small(record)
        if small is None:
            raise Unmeasurable(f"no reply to the {what} and no small ping to compare: path MTU not measured")
        if small.received > 0:
            return bad(subject, f"drops {mtu}-byte packets ({what}s: 0 answered; small pings: "
                                f"{small.received} answered: a hop drops jumbo frames without telling)", expected)
        raise Unmeasurable(f"no reply to the {what} nor to small pings (target silent or unreachable): "
                           "path MTU not measured")
    except Unmeasurable as exc:
        return unknown(subject, exc.reason, expected)


def _small(record: object) -> PingReport | None:
    small = record.get("small") if isinstance(record, dict) else None
    if small is None:
        return None
    return _ran(small, "small ping")


def path_mtu_findings(section: dict[str, Any], fabric: StorageFabric) -> list[Finding]:
    """One finding per storage target (one for the whole section when the phase measured nothing)."""
    mtu = expected_path_mtu(fabric)
    for key in ("unavailable", "error"):
        if section.get(key):
            return [unknown("storage targets", f"path MTU not measured: {printable(str(section[key]))[:200]}",
                            expected_text(fabric))]
    targets = section.get("targets")
    if not isinstance(targets, dict):
        return [unknown("storage targets", "path MTU facts hold no targets", expected_text(fabric))]
    return [judge_target(target, targets.get(target.destination), mtu) for target in fabric.targets]
