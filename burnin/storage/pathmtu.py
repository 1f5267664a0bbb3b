"""STO-04's path-MTU measurement: a don't-fragment ping that fills the storage MTU to every storage target.

Per node, through the phase's launcher, for each storage target (its
``address``, or a subnet's ``probe``):

    ping -n -M do -s <MTU-28> -c 3 -i 0.2 -W 1 <address>        (IPv4; 9000 -> 8972)
    ping -6 -n -M do -s <MTU-48> -c 3 -i 0.2 -W 1 <address>     (IPv6)

with ``-I <vrf>`` in front of the address when the topology puts storage in a
VRF (ping then looks up the VRF's table; a policy table needs nothing: its
``ip rule`` applies to ping's packets). Not ``-q``: quiet ping neither prints
nor counts the ``local error: message too long, mtu=N`` that is the evidence.
``-i 0.2`` is the shortest interval iputils allows a user who is not root, and
the command needs no root where ``net.ipv4.ping_group_range`` lets the user
open ICMP sockets (or ping has ``cap_net_raw``). When the full-size pings get
no reply and no sign of an MTU, the phase pings again with the default 56-byte
payload so the check can tell a hop that drops jumbo frames silently from a
target that does not answer at all.

What ping printed goes into the node's ``storage_pathmtu`` facts section (per
target: argv, exit status, stdout, stderr, the parsed report or the parse
error with an excerpt); STO-04 judges it (burnin.storage.pathmtu_judge).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from burnin.errors import ParseError
from burnin.facts import Facts
from burnin.launch.base import Each, Launcher, NodeCommand, Note, PlanItem
from burnin.parsers import to_jsonable
from burnin.parsers.ping import df_payload, parse_ping
from burnin.storage.pathmtu_judge import SECTION, expected_path_mtu, is_ipv6
from burnin.topology.model import StorageFabric
from burnin.transport.base import CommandResult

PING_TIMEOUT_S = 20.0
"""Three requests 0.2 s apart, each waited for 1 s; unanswered ARP can hold ping 3 s. Generous on purpose."""
KEEP_CHARS = 4000
"""Output kept per stream in the facts (ping prints a few hundred characters)."""


def ping_argv(address: str, mtu: int, *, vrf: str | None = None, small: bool = False) -> list[str]:
    """The ping command line for one target (``small``: the default 56-byte payload, to compare)."""
    ipv6 = is_ipv6(address)
    argv = ["ping", "-6"] if ipv6 else ["ping"]
    argv += ["-n", "-M", "do", "-s", str(56 if small else df_payload(mtu, ipv6)), "-c", "3", "-i", "0.2", "-W", "1"]
    if vrf:
        argv += ["-I", vrf]
    return [*argv, address]


def record(result: CommandResult) -> dict[str, Any]:
    """What one ping did, for the facts: argv, exit status, output, and ping's report or why it has none."""
    entry: dict[str, Any] = {"argv": list(result.argv), "exit_status": result.exit_status,
                             "stdout": result.stdout[:KEEP_CHARS], "stderr": result.stderr[:KEEP_CHARS],
                             "error": None}
    if result.error or result.timed_out:
        entry["error"] = result.describe_failure()
        return entry
    try:
        entry["parsed"] = to_jsonable(parse_ping(f"{result.stdout}\n{result.stderr}"))
    except ParseError as exc:
        entry["parse_error"] = str(exc)
        entry["excerpt"] = exc.excerpt
    return entry


def _needs_small_ping(result: CommandResult) -> bool:
    """Full-size pings unanswered, with no MTU evidence and no unreachable: would small ones get through?"""
    if result.error or result.timed_out:
        return False
    try:
        report = parse_ping(f"{result.stdout}\n{result.stderr}")
    except ParseError:
        return False
    return report.received == 0 and not report.too_long and not report.unreachable and not report.messages


def _ping(launcher: Launcher, node: str, argv: Sequence[str]) -> CommandResult:
    return launcher.per_node([NodeCommand(node, tuple(argv), PING_TIMEOUT_S)])[node]


def measure_node(launcher: Launcher, node: str, fabric: StorageFabric) -> dict[str, Any]:
    """The node's ``storage_pathmtu`` section."""
    mtu = expected_path_mtu(fabric)
    vrf = fabric.routing.vrf if fabric.routing is not None else None
    targets: dict[str, Any] = {}
    for target in fabric.targets:
        address = target.destination
        result = _ping(launcher, node, ping_argv(address, mtu, vrf=vrf))
        entry = record(result)
        if _needs_small_ping(result):
            entry["small"] = record(_ping(launcher, node, ping_argv(address, mtu, vrf=vrf, small=True)))
        targets[address] = entry
    return {"mtu": mtu, "targets": targets}


def plan(nodes: Sequence[str], fabric: StorageFabric) -> list[PlanItem]:
    """What :func:`measure_node` runs on every node, in order."""
    mtu = expected_path_mtu(fabric)
    vrf = fabric.routing.vrf if fabric.routing is not None else None
    items: list[PlanItem] = [Note(f"storage STO-04 on each node: path MTU {mtu} to every storage target (a target "
                                  "that answers no full-size ping and shows no MTU is pinged again with 56 bytes)")]
    return items + [Each(tuple(nodes), tuple(ping_argv(t.destination, mtu, vrf=vrf)), PING_TIMEOUT_S)
                    for t in fabric.targets]


def measure_pathmtu(launcher: Launcher, facts: Mapping[str, Facts], nodes: Sequence[str],
                    fabric: StorageFabric) -> None:
    """Ping every storage target from every node and record the ``storage_pathmtu`` section into its facts."""
    from burnin.launch.base import fan_out

    sections = fan_out(list(nodes), lambda node: measure_node(launcher, node, fabric), workers=32)
    for node, section in zip(nodes, sections, strict=True):
        facts[node].data[SECTION] = section
