"""STO-04's path part: the judge on recorded pings (pass, fail, incomplete), STO-04 with and without the
storage suite's ``storage_pathmtu`` section, and the measurement over a fake transport and simulated nodes.

The ping outputs are real iputils 20221126 output (Debian 12), captured in network namespaces; the parser's
tests (tests/unit/parsers/test_parse_ping.py) say how, and hold the full samples.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from storage_support import with_routing

from burnin.checks import load_all
from burnin.evaluate.verdict import Finding, Status
from burnin.facts import Facts
from burnin.launch.base import Hold
from burnin.launch.dryrun import DryRunLauncher
from burnin.launch.ssh import TransportLauncher
from burnin.parsers.ping import parse_ping
from burnin.phases import DRY_RUN_REASON
from burnin.sim import SimNode, build_rack
from burnin.storage.pathmtu import PING_TIMEOUT_S, measure_node, measure_pathmtu, ping_argv, plan
from burnin.storage.pathmtu_judge import SECTION, judge_target, path_mtu_findings
from burnin.topology.model import StorageRouting, StorageTarget, Topology
from burnin.transport.base import CommandResult
from burnin.transport.local import LocalTransport

PASS, FAIL, INCOMPLETE = Status.PASS, Status.FAIL, Status.INCOMPLETE
NEAR, FAR = "10.20.0.10", "10.20.8.11"
TARGET = StorageTarget("nfs-home", address=NEAR)

REPLIES = """PING 10.20.0.10 (10.20.0.10) 8972(9000) bytes of data.
8980 bytes from 10.20.0.10: icmp_seq=1 ttl=64 time=0.148 ms
8980 bytes from 10.20.0.10: icmp_seq=2 ttl=64 time=0.112 ms
8980 bytes from 10.20.0.10: icmp_seq=3 ttl=64 time=0.105 ms

--- 10.20.0.10 ping statistics ---
3 packets transmitted, 3 received, 0% packet loss, time 405ms
rtt min/avg/max/mdev = 0.105/0.121/0.148/0.018 ms
"""
TOTAL_LOSS = """PING 10.20.0.10 (10.20.0.10) 8972(9000) bytes of data.

--- 10.20.0.10 ping statistics ---
3 packets transmitted, 0 received, {errors}100% packet loss, time 406ms
"""
LOCAL_ERROR = "ping: local error: message too long, mtu=1500\n" * 3
FRAG_NEEDED = """PING 10.20.0.10 (10.20.0.10) 8972(9000) bytes of data.
From 10.98.1.254 icmp_seq=1 Frag needed and DF set (mtu = 1500)

--- 10.20.0.10 ping statistics ---
3 packets transmitted, 0 received, +3 errors, 100% packet loss, time 408ms
"""
HOST_UNREACHABLE = """PING 10.20.0.10 (10.20.0.10) 8972(9000) bytes of data.
From 10.98.1.1 icmp_seq=1 Destination Host Unreachable
From 10.98.1.1 icmp_seq=2 Destination Host Unreachable

--- 10.20.0.10 ping statistics ---
3 packets transmitted, 0 received, +2 errors, 100% packet loss, time 2971ms
pipe 3
"""
SMALL_REPLIES = REPLIES.replace("8972(9000)", "56(84)").replace("8980 bytes", "64 bytes")


def ping(stdout: str = "", stderr: str = "", status: int | None = 1, **extra: Any) -> dict[str, Any]:
    return {"argv": ["ping", "-n", "-M", "do", "-s", "8972", "-c", "3", "-i", "0.2", "-W", "1", NEAR],
            "exit_status": status, "stdout": stdout, "stderr": stderr, "error": None, **extra}


def judged(record: object) -> Finding:
    return judge_target(TARGET, record, 9000)


# ------------------------------------------------------------------ one target


def test_replies_pass() -> None:
    finding = judged(ping(REPLIES, status=0))
    assert (finding.status, finding.subject) == (PASS, "path to 10.20.0.10")
    assert finding.measured == "MTU 9000 (8972-byte DF ping: 3/3 answered)"


def test_local_error_fails_with_the_mtu() -> None:
    finding = judged(ping(TOTAL_LOSS.format(errors="+3 errors, "), LOCAL_ERROR))
    assert finding.status is FAIL
    assert finding.measured == "MTU 1500 (8972-byte DF ping: local error, mtu=1500)"


def test_frag_needed_from_a_router_fails_naming_the_router() -> None:
    finding = judged(ping(FRAG_NEEDED, LOCAL_ERROR[:47]))
    assert finding.status is FAIL
    assert finding.measured == ("MTU 1500 (8972-byte DF ping: local error, mtu=1500; "
                                "Frag needed and DF set (mtu = 1500) from 10.98.1.254)")


def test_sendmsg_message_too_long_fails_without_a_number() -> None:
    finding = judged(ping(TOTAL_LOSS.format(errors=""), "ping: sendmsg: Message too long\n" * 3))
    assert finding.status is FAIL and finding.measured.startswith("MTU below 9000 (8972-byte DF ping: sendmsg")


def test_silent_big_but_answered_small_is_an_mtu_black_hole() -> None:
    finding = judged(ping(TOTAL_LOSS.format(errors=""), small=ping(SMALL_REPLIES, status=0)))
    assert finding.status is FAIL
    assert finding.measured.startswith("drops 9000-byte packets (8972-byte DF pings: 0 answered; small pings: 3 "
                                       "answered")


@pytest.mark.parametrize(("record", "note"), [
    (ping(stderr="ping: connect: Network is unreachable\n", status=2),
     "unreachable (connect: Network is unreachable): path MTU not measured"),
    (ping(HOST_UNREACHABLE), "unreachable (From 10.98.1.1: Destination Host Unreachable)"),
    (ping(TOTAL_LOSS.format(errors=""), small=ping(TOTAL_LOSS.format(errors="").replace("8972(9000)", "56(84)"))),
     "no reply to the 8972-byte DF ping nor to small pings (target silent or unreachable)"),
    (ping(TOTAL_LOSS.format(errors="")), "no reply to the 8972-byte DF ping and no small ping to compare"),
    (ping(stderr="sh: 1: ping: not found\n", status=127), "ping did not run (sh: 1: ping: not found)"),
    (ping("garbage\n", status=0), "output unreadable (ping: no ping header"),
    (ping(status=None, error="ping timed out after 20.0 s"), "ping 10.20.0.10: ping timed out after 20.0 s"),
    (ping(stderr="ping: socket: Operation not permitted\n", status=2), "ping: socket: Operation not permitted"),
    (ping(REPLIES.replace("8972(9000)", "1472(1500)"), status=0), "ping sent 1472-byte payloads, not the 8972"),
    (None, "ping 10.20.0.10 not run"),
])
def test_nothing_learnt_about_the_mtu_is_incomplete(record: object, note: str) -> None:
    finding = judged(record)
    assert finding.status is INCOMPLETE and note in finding.note, finding.note


def test_node_text_is_made_printable() -> None:
    finding = judged(ping("\x1b[31mgarbage\n", status=0))
    assert finding.status is INCOMPLETE and "\x1b" not in finding.note


def test_ipv6_target_expects_the_ipv6_payload() -> None:
    v6 = StorageTarget("v6", address="fd12::2")
    text = ("PING fd12::2(fd12::2) 8952 data bytes\n8960 bytes from fd12::2: icmp_seq=1 ttl=64 time=0.058 ms\n\n"
            "--- fd12::2 ping statistics ---\n1 packets transmitted, 1 received, 0% packet loss, time 0ms\n")
    finding = judge_target(v6, ping(text, status=0), 9000)
    assert finding.status is PASS and finding.measured == "MTU 9000 (8952-byte DF ping: 1/1 answered)"


# ------------------------------------------------------------------ STO-04 with and without the section


def sto04(data: dict[str, Any], topology: Topology) -> Any:
    return load_all()["STO-04"].func(Facts("sim01", data), topology)


def section(near: dict[str, Any], far: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"mtu": 9000, "targets": {NEAR: near, FAR: far or ping(REPLIES.replace(NEAR, FAR), status=0)}}


def test_without_the_section_sto04_is_the_interface_check(facts: dict[str, Any], sto_topology: Topology) -> None:
    verdict = sto04(facts, sto_topology)
    assert verdict.status is PASS and verdict.reason == "STO-04 ok: MTU 9000 on 2 BlueField netdevs"
    assert verdict.expected == "MTU 9000 on every BlueField netdev"


def test_with_the_section_every_target_is_judged(facts: dict[str, Any], sto_topology: Topology) -> None:
    facts[SECTION] = section(ping(REPLIES, status=0))
    verdict = sto04(facts, sto_topology)
    assert verdict.status is PASS, verdict.reason
    assert [f.subject for f in verdict.findings] == ["enp41s0f0np0", "enp177s0f0np0", "path to 10.20.0.10",
                                                     "path to 10.20.8.0/22 (10.20.8.11)"]
    assert verdict.reason == ("STO-04 ok: MTU 9000 on 2 BlueField netdevs; 2 storage targets answer "
                              "don't-fragment pings of MTU 9000")


def test_a_refused_ping_fails_sto04_naming_target_and_mtu(facts: dict[str, Any], sto_topology: Topology) -> None:
    facts[SECTION] = section(ping(TOTAL_LOSS.format(errors="+3 errors, "), LOCAL_ERROR))
    verdict = sto04(facts, sto_topology)
    assert verdict.status is FAIL
    assert verdict.reason == (
        "STO-04 path to 10.20.0.10 MTU 1500 (8972-byte DF ping: local error, mtu=1500) (expected MTU 9000 on "
        "every BlueField netdev; 8972-byte don't-fragment pings (MTU 9000) answered by every storage target)")


def test_a_silent_target_makes_sto04_incomplete(facts: dict[str, Any], sto_topology: Topology) -> None:
    facts[SECTION] = section(ping(HOST_UNREACHABLE))
    verdict = sto04(facts, sto_topology)
    assert verdict.status is INCOMPLETE and "path to 10.20.0.10: unreachable" in verdict.reason


def test_dry_run_section_is_incomplete(facts: dict[str, Any], sto_topology: Topology) -> None:
    facts[SECTION] = {"unavailable": "--dry-run: nothing was pinged"}
    verdict = sto04(facts, sto_topology)
    assert verdict.status is INCOMPLETE
    assert verdict.reason == ("STO-04 could not be measured: storage targets: path MTU not measured: --dry-run: "
                              "nothing was pinged")


def test_path_failure_still_reported_when_the_interfaces_are_unread(facts: dict[str, Any],
                                                                    sto_topology: Topology) -> None:
    data = copy.deepcopy(facts)
    data["sources"]["storage"] = {"ok": False, "error": "timed out"}
    before = sto04(data, sto_topology)
    assert before.status is INCOMPLETE and before.reason == "STO-04 could not be measured: storage: timed out"
    data[SECTION] = section(ping(TOTAL_LOSS.format(errors="+3 errors, "), LOCAL_ERROR))
    verdict = sto04(data, sto_topology)
    assert verdict.status is FAIL and "not measured: BlueField netdevs storage: timed out" in verdict.reason


def test_missing_target_entry_and_bad_section(facts: dict[str, Any], sto_topology: Topology) -> None:
    facts[SECTION] = {"mtu": 9000, "targets": {NEAR: ping(REPLIES, status=0)}}
    assert "path to 10.20.8.0/22 (10.20.8.11): ping 10.20.8.11 not run" in sto04(facts, sto_topology).reason
    assert sto_topology.storage is not None
    assert path_mtu_findings({"mtu": 9000}, sto_topology.storage)[0].note == "path MTU facts hold no targets"
    facts[SECTION] = ["not", "a", "dict"]
    assert sto04(facts, sto_topology).reason == "STO-04 could not be measured: path MTU facts unreadable"


# ------------------------------------------------------------------ the measurement


class FakeTransport:
    """Answers ping with canned results per (address, small?) and records what it was asked."""

    name = "fake"

    def __init__(self, answers: Mapping[tuple[str, bool], CommandResult | Exception]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, list[str], float]] = []

    def run(self, node: str, argv: Sequence[str], *, timeout: float, stdin: bytes | None = None,
            env: Mapping[str, str] | None = None) -> CommandResult:
        self.calls.append((node, list(argv), timeout))
        answer = self.answers[(argv[-1], argv[argv.index("-s") + 1] == "56")]
        if isinstance(answer, Exception):
            raise answer
        return dataclasses.replace(answer, node=node, argv=tuple(argv))

    def close(self) -> None:
        pass


def result(stdout: str = "", stderr: str = "", status: int | None = 0) -> CommandResult:
    return CommandResult("n", (), status, stdout, stderr, 0.4)


def test_ping_argv() -> None:
    assert ping_argv(NEAR, 9000) == ["ping", "-n", "-M", "do", "-s", "8972", "-c", "3", "-i", "0.2", "-W", "1", NEAR]
    assert ping_argv("fd12::2", 9000)[:7] == ["ping", "-6", "-n", "-M", "do", "-s", "8952"]
    assert ping_argv(NEAR, 9000, vrf="vrf-storage")[-3:] == ["-I", "vrf-storage", NEAR]
    assert ping_argv(NEAR, 9000, small=True)[5] == "56"
    assert "-q" not in ping_argv(NEAR, 9000)


def test_measure_records_each_target_and_pings_small_only_when_nothing_was_learnt(sto_topology: Topology) -> None:
    assert sto_topology.storage is not None
    transport = FakeTransport({
        (NEAR, False): result(TOTAL_LOSS.format(errors=""), status=1),
        (NEAR, True): result(SMALL_REPLIES, status=0),
        (FAR, False): result(TOTAL_LOSS.format(errors="+3 errors, "), LOCAL_ERROR, status=1),
    })
    found = measure_node(TransportLauncher(transport, name="fake"), "n1", sto_topology.storage)
    assert [(argv[-1], argv[5]) for _, argv, _ in transport.calls] == [(NEAR, "8972"), (NEAR, "56"), (FAR, "8972")]
    assert {timeout for *_, timeout in transport.calls} == {PING_TIMEOUT_S}
    near, far = found["targets"][NEAR], found["targets"][FAR]
    assert found["mtu"] == 9000 and near["exit_status"] == 1 and near["small"]["parsed"]["statistics"]["received"] == 3
    assert far["parsed"]["local_mtus"] == [1500, 1500, 1500] and "small" not in far


def test_measure_records_garbage_with_an_excerpt_and_transport_errors(sto_topology: Topology) -> None:
    assert sto_topology.storage is not None
    transport = FakeTransport({(NEAR, False): result("<html>proxy error</html>\n", status=0),
                               (FAR, False): OSError("connection reset")})
    found = measure_node(TransportLauncher(transport, name="fake"), "n1", sto_topology.storage)["targets"]
    assert found[NEAR]["parse_error"].startswith("ping: no ping header") and "proxy error" in found[NEAR]["excerpt"]
    assert found[FAR]["error"] == "OSError: connection reset" and found[FAR]["exit_status"] is None


def test_measure_pings_inside_the_vrf(sto_topology: Topology) -> None:
    topology = with_routing(sto_topology, StorageRouting(vrf="vrf-storage"), "vrf")
    assert topology.storage is not None
    transport = FakeTransport({(a, False): result(REPLIES, status=0) for a in (NEAR, FAR)})
    measure_node(TransportLauncher(transport, name="fake"), "n1", topology.storage)
    assert all(argv[-3:-1] == ["-I", "vrf-storage"] for _, argv, _ in transport.calls)


def test_the_plan_shows_each_full_size_ping_on_every_node(sto_topology: Topology) -> None:
    assert sto_topology.storage is not None
    said: list[str] = []
    transport = FakeTransport({})
    dry = DryRunLauncher(TransportLauncher(transport, name="fake"), said.append, DRY_RUN_REASON)
    assert dry.hold(["n1", "n2"], Hold("storage", "the storage suite", 60),
                    plan(["n1", "n2"], sto_topology.storage)) == DRY_RUN_REASON
    assert said[0].startswith("# storage STO-04 on each node: path MTU 9000")
    assert said[1:] == [f"[n[1-2]] ping -n -M do -s 8972 -c 3 -i 0.2 -W 1 {a}" for a in (NEAR, FAR)]
    assert transport.calls == []


def test_the_phase_without_a_storage_fabric_or_its_nodes_records_why(sto_topology: Topology) -> None:
    from burnin.storage.measure import StorageSettings
    from burnin.storage.phase import run_storage_phase

    facts = {"n1": Facts("n1", {})}
    bare = dataclasses.replace(sto_topology, name="bare", storage=None)
    run_storage_phase(TransportLauncher(FakeTransport({}), name="fake"), facts, ["n1"], topology=bare,
                      settings=StorageSettings())
    assert facts["n1"].data[SECTION] == {"unavailable": "topology bare declares no storage fabric"}

    class Unheld(TransportLauncher):
        def hold(self, nodes: Any, how: Any, plan: Any = ()) -> str | None:
            return "no Slurm allocation for the storage suite: Requested nodes are busy"

    run_storage_phase(Unheld(FakeTransport({}), name="fake"), facts, ["n1"], topology=sto_topology,
                      settings=StorageSettings())
    assert facts["n1"].data[SECTION] == {"unavailable": "no Slurm allocation for the storage suite: Requested "
                                                        "nodes are busy"}


# ------------------------------------------------------------------ simulated nodes, end to end below the CLI


@pytest.fixture(scope="module")
def rack(sim_base: Path, sto_topology: Topology) -> list[SimNode]:
    return build_rack(sim_base / "pathmtu", sto_topology, ["sim01", "sim02", "sim03"],
                      {"sim02": ["storage-mtu-1500"], "sim03": ["storage-route-via-ib"]})


@pytest.mark.rack
def test_simulated_nodes_through_the_local_transport(rack: list[SimNode], sto_topology: Topology,
                                                    healthy_storage_facts: dict[str, Any]) -> None:
    by_name = {n.name: n for n in rack}
    transport = LocalTransport(lambda node: {**by_name[node].environment(), "LC_ALL": "C"})
    facts = {n: Facts(n, copy.deepcopy(healthy_storage_facts)) for n in by_name}
    assert sto_topology.storage is not None
    measure_pathmtu(TransportLauncher(transport, name="local"), facts, list(by_name), sto_topology.storage)
    verdicts = {n: load_all()["STO-04"].func(f, sto_topology) for n, f in facts.items()}
    assert verdicts["sim01"].status is PASS, verdicts["sim01"].reason
    assert verdicts["sim02"].status is FAIL and verdicts["sim02"].reason.startswith(
        "STO-04 path to 10.20.0.10 MTU 1500 (8972-byte DF ping: local error, mtu=1500)")
    assert verdicts["sim03"].status is FAIL and verdicts["sim03"].reason.startswith(
        "STO-04 path to 10.20.0.10 MTU 4092 (8972-byte DF ping: local error, mtu=4092)")
    assert "10.20.8.11" not in verdicts["sim02"].reason + verdicts["sim03"].reason


def _ping(node: SimNode, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **node.environment(), "LC_ALL": "C"}
    return subprocess.run(["ping", *argv], env=env, capture_output=True, text=True, timeout=30, check=False)


DF = ("-n", "-M", "do", "-s", "8972", "-c", "3", "-i", "0.2", "-W", "1")


@pytest.mark.rack
def test_shim_prints_what_the_parser_reads(rack: list[SimNode]) -> None:
    healthy, mtu1500, _ = rack
    answered = parse_ping(_ping(healthy, *DF, NEAR).stdout)
    assert (answered.destination, answered.payload_bytes, answered.replies, answered.received) == (NEAR, 8972, 3, 3)
    refused = _ping(mtu1500, *DF, NEAR)
    assert refused.returncode == 1 and refused.stderr == "ping: local error: message too long, mtu=1500\n" * 3
    assert parse_ping(refused.stdout + refused.stderr).path_mtu == 1500
    quiet = _ping(mtu1500, "-q", *DF, NEAR)  # like the real one: -q hides the evidence
    assert quiet.stderr == "" and not parse_ping(quiet.stdout).too_long
    fits = _ping(mtu1500, "-n", "-M", "do", "-s", "1472", "-c", "1", NEAR)
    assert fits.returncode == 0 and parse_ping(fits.stdout).received == 1
    fragmented = _ping(mtu1500, "-n", "-s", "8972", "-c", "1", NEAR)  # no DF: the kernel fragments
    assert fragmented.returncode == 0
    lost = _ping(healthy, *DF, "192.0.2.1")
    assert lost.returncode == 2 and lost.stderr == "ping: connect: Network is unreachable\n"
    assert _ping(healthy, "-V").stdout == "ping from iputils 20221126\n"
    assert _ping(healthy, "-x", NEAR).returncode == 2
    assert _ping(healthy, *DF, "-I", "eth9", NEAR).stderr == "ping: SO_BINDTODEVICE eth9: No such device\n"


@pytest.mark.rack
def test_shim_follows_the_vrf_and_the_policy_table(sim_base: Path, sto_topology: Topology) -> None:
    vrf = with_routing(sto_topology, StorageRouting(vrf="vrf-st"), "site-vrf")
    node, = build_rack(sim_base / "pathmtu-vrf", vrf, ["sim01"], {"sim01": ["storage-mtu-1500"]})
    assert _ping(node, *DF, NEAR).stderr == "ping: connect: Network is unreachable\n"  # main table: no route
    inside = _ping(node, *DF, "-I", "vrf-st", NEAR)
    assert inside.stdout.startswith(f"PING {NEAR} ({NEAR}) from 10.20.0.3 vrf-st: 8972(9000) bytes of data.")
    assert parse_ping(inside.stdout + inside.stderr).path_mtu == 1500
    assert parse_ping(_ping(node, *DF, "-I", "vrf-st", FAR).stdout).received == 3
    table = with_routing(sto_topology, StorageRouting(table=100), "site-table")
    node, = build_rack(sim_base / "pathmtu-table", table, ["sim01"], {"sim01": ["storage-route-via-ib"]})
    via_ib = _ping(node, *DF, NEAR)
    assert parse_ping(via_ib.stdout + via_ib.stderr).path_mtu == 4092
