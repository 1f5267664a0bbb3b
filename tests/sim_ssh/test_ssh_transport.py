"""The SSH transport against real sshd: faults of the transport itself, reuse, leaks, bastions."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest
from sshrack import TRANSPORT_FAULTS, Rack

from burnin.dispatch.ssh import SshDispatcher
from burnin.inventory import load_inventory
from burnin_lab import ssh as lab_ssh

pytestmark = pytest.mark.sim_ssh

# Bounds (failure limits, never measurements): a healthy node answers in a second or two, but a
# 2-core CI machine running two workers and a browser can make that many seconds.
HANG_TIMEOUT = 30.0  # the hung node is cut off after this; every healthy one must answer first
TIMEOUT = 60.0  # a gather or a command on reachable nodes
SETTLE_S = 30.0  # fds of closed connections are given back within this


def _dispatcher(rack: Rack, hosts: str, **kwargs: object) -> SshDispatcher:
    return SshDispatcher.for_nodes(inventory=load_inventory(rack.inventory), hosts=hosts,
                                   ssh_config=kwargs.pop("ssh_config", rack.ssh_config),  # type: ignore[arg-type]
                                   **kwargs)  # type: ignore[arg-type]


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _fds_back_to(before: int) -> int:
    """The fd count once it is back to ``before`` (a leak stays above it until SETTLE_S: the count then)."""
    deadline = time.monotonic() + SETTLE_S
    while (now := _fds()) > before and time.monotonic() < deadline:
        time.sleep(0.05)
    return now


def _copy_config(rack: Rack, tmp_path: Path, extra: str = "") -> Path:
    """The rack's ssh_config with a private copy of known_hosts (tests may write to it)."""
    known = tmp_path / "known_hosts"
    known.write_text(rack.known_hosts.read_text())
    text = rack.ssh_config.read_text().replace(str(rack.known_hosts), str(known))
    path = tmp_path / "ssh_config"
    path.write_text(extra + text)
    return path


def test_each_transport_fault_is_incomplete_for_that_node_only(ssh_rack: Rack) -> None:
    nodes = ["sim01", *TRANSPORT_FAULTS]
    dispatcher = _dispatcher(ssh_rack, ",".join(nodes))
    facts = dispatcher.gather(sources="all", timeout=HANG_TIMEOUT)
    dispatcher.close()
    reasons = {node: facts[node].unreachable or "" for node in nodes}
    assert reasons["sim01"] == "" and facts["sim01"].data["hostname"] == "sim01"
    assert re.search(r"timed out after \d", reasons["sim09"]), reasons           # hang
    assert "collector output is not JSON" in reasons["sim10"], reasons           # garbage
    assert "GARBAGE" in reasons["sim10"], reasons                                # with an excerpt
    assert "python3 not found on the node" in reasons["sim11"], reasons          # no python3
    assert "authentication failed" in reasons["sim12"], reasons                  # refused key
    assert "host key CHANGED" in reasons["sim13"], reasons                       # wrong host key
    assert "host key unknown" in reasons["sim14"], reasons                       # not in known_hosts


def test_a_command_that_ends_before_reading_its_input_reports_its_own_exit(ssh_rack: Rack) -> None:
    """The no-python3 node's shell exits 127 while the collector is still being sent: that is its answer,
    not a lost connection (which one came first depended on the machine's load)."""
    dispatcher = _dispatcher(ssh_rack, "sim01")
    try:  # far more input than the channel's window: the command is gone before it is all sent
        result = dispatcher.transport.run("sim01", ["sh", "-c", "echo bye >&2; exit 7"], stdin=b"x" * (16 << 20),
                                          timeout=TIMEOUT)
        assert (result.exit_status, result.error, result.stderr) == (7, None, "bye\n"), result
        assert dispatcher.transport.run("sim01", ["true"], timeout=TIMEOUT).ok  # the connection is still good
    finally:
        dispatcher.close()


def test_stopped_sshd_is_unreachable_and_comes_back(ssh_rack: Rack) -> None:
    lab_ssh.stop_node(ssh_rack.state, "sim07")
    try:
        dispatcher = _dispatcher(ssh_rack, "sim07,sim08")
        facts = dispatcher.gather(sources="kernel", timeout=TIMEOUT)
        dispatcher.close()
        assert "unreachable: connection refused" in (facts["sim07"].unreachable or "")
        assert facts["sim08"].unreachable is None
    finally:
        lab_ssh.start_node(ssh_rack.state, "sim07")
    dispatcher = _dispatcher(ssh_rack, "sim07")
    assert dispatcher.gather(sources="kernel", timeout=TIMEOUT)["sim07"].unreachable is None
    dispatcher.close()


def test_one_connection_per_node_reused_for_every_command(ssh_rack: Rack) -> None:
    dispatcher = _dispatcher(ssh_rack, "sim01,sim02")
    transport = dispatcher.transport
    for _ in range(3):
        result = transport.run("sim01", ["sh", "-c", "echo $BURNIN_SIM_NODE"], timeout=TIMEOUT)
        assert result.ok and result.stdout.strip() == "sim01", result
    assert transport.run("sim02", ["true"], timeout=TIMEOUT).ok
    assert transport.connects == 2 and transport.open_connections() == 2
    odd = transport.run("sim01", ["printf", "%s|", "a b", "$(id)", "x;y"], timeout=TIMEOUT)
    assert odd.stdout == "a b|$(id)|x;y|"  # every word arrives verbatim: nothing pasted into a shell
    dispatcher.close()
    assert transport.open_connections() == 0


def test_no_connection_or_fd_leak_across_gathers(ssh_rack: Rack) -> None:
    hosts = "sim[01-08],sim12,sim13"
    warm = _dispatcher(ssh_rack, hosts)
    warm.gather(sources="kernel", timeout=TIMEOUT)
    warm.close()
    time.sleep(0.2)
    before = _fds()
    for _ in range(2):
        dispatcher = _dispatcher(ssh_rack, hosts)
        facts = dispatcher.gather(sources="kernel", timeout=TIMEOUT)
        assert dispatcher.transport.open_connections() == 0  # each node closed once its facts are in
        dispatcher.close()
        assert sum(1 for f in facts.values() if f.unreachable is None) == 8
    after = _fds_back_to(before)
    assert after <= before, f"fds before {before}, after {after}"


def test_accept_new_records_unknown_keys_but_refuses_changed(ssh_rack: Rack, tmp_path: Path) -> None:
    config = _copy_config(ssh_rack, tmp_path)
    dispatcher = _dispatcher(ssh_rack, "sim13,sim14", ssh_config=config, accept_new=True)
    facts = dispatcher.gather(sources="kernel", timeout=TIMEOUT)
    dispatcher.close()
    assert facts["sim14"].unreachable is None
    assert "host key CHANGED" in (facts["sim13"].unreachable or "")
    recorded = (tmp_path / "known_hosts").read_text()
    assert ssh_rack.address("sim14") in recorded
    strict = _dispatcher(ssh_rack, "sim14", ssh_config=config)  # now known: strict mode accepts it
    assert strict.gather(sources="kernel", timeout=TIMEOUT)["sim14"].unreachable is None
    strict.close()


def test_proxyjump_through_a_shared_bastion(ssh_rack: Rack, tmp_path: Path) -> None:
    extra = "Host sim02 sim03 sim04\n  ProxyJump sim01\n\n"
    config = _copy_config(ssh_rack, tmp_path, extra)
    dispatcher = _dispatcher(ssh_rack, "sim02,sim03,sim04", ssh_config=config)
    facts = dispatcher.gather(sources="kernel", timeout=TIMEOUT)
    assert {n: f.unreachable for n, f in facts.items()} == dict.fromkeys(["sim02", "sim03", "sim04"])
    assert dispatcher.transport.connects == 4  # one bastion connection carries all three
    dispatcher.close()


def test_hosts_and_ssh_config_without_inventory(ssh_rack: Rack) -> None:
    dispatcher = SshDispatcher.for_nodes(hosts="sim[02-03]", ssh_config=ssh_rack.ssh_config)
    facts = dispatcher.gather(sources="kernel", timeout=TIMEOUT)
    dispatcher.close()
    assert {n: f.data.get("hostname") for n, f in facts.items()} == {"sim02": "sim02", "sim03": "sim03"}


def test_many_nodes_never_hold_more_than_fanout_connections(ssh_rack: Rack, tmp_path: Path) -> None:
    """128 inventory nodes mapped onto the 8 healthy sshd: bounded connections, flat fds."""
    from burnin.launch.gather import facts_from_result

    config = tmp_path / "ssh_config"
    config.write_text(f"Host n*\n  User {ssh_rack.lab['user']}\n  IdentityFile {ssh_rack.lab['identity']}\n"
                      f"  IdentitiesOnly yes\n  UserKnownHostsFile {ssh_rack.known_hosts}\n")
    lines = [f"ssh_config: {config}", "nodes:"]
    for i in range(128):
        target = f"sim{i % 8 + 1:02d}"
        lines.append(f"  n{i:03d}: {{address: {ssh_rack.address(target)}, "
                     f"port: {ssh_rack.lab['nodes'][target]['port']}}}")
    inventory = tmp_path / "big.yaml"
    inventory.write_text("\n".join(lines) + "\n")
    fanout = 16
    dispatcher = SshDispatcher.for_nodes(inventory=load_inventory(inventory), fanout=fanout)
    transport = dispatcher.transport
    peak = [0]

    def sample(_: str, __: object) -> None:
        peak[0] = max(peak[0], transport.open_connections())

    time.sleep(0.1)
    before = _fds()
    results = dispatcher.launcher({}).once_per_node(dispatcher.nodes, ["echo", '{"sources": {}}'], stdin=None,
                                                    timeout_s=TIMEOUT, on_done=sample)
    facts = {node: facts_from_result(result) for node, result in results.items()}
    dispatcher.close()
    assert all(f.unreachable is None for f in facts.values()), next(
        f.unreachable for f in facts.values() if f.unreachable)
    assert transport.connects == 128 and 0 < peak[0] <= fanout
    after = _fds_back_to(before)
    assert after <= before, f"fds before {before}, after {after}"
