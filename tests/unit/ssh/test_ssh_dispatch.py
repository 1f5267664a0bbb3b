"""SshDispatcher without any sshd: flags, node names, and nodes that cannot be reached.

Unreachable endpoints are loopback sockets: a closed port (refused), a port that
accepts and never speaks (hung handshake), one that answers garbage.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from burnin.dispatch.ssh import SshDispatcher
from burnin.errors import UsageError


def _args(**values: object) -> argparse.Namespace:
    base: dict[str, object] = {"hosts": None, "inventory": None, "ssh_config": None,
                               "accept_new_host_keys": False, "fanout": 64}
    base.update(values)
    return argparse.Namespace(**base)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


class SilentServer:
    def __init__(self, port: int, held: list[socket.socket]) -> None:
        self.port = port
        self.held = held

    def hang_up(self) -> None:
        while self.held:
            self.held.pop().close()


@pytest.fixture
def silent_server() -> Iterator[SilentServer]:
    """Accepts connections and never says a word (a hung sshd)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield SilentServer(server.getsockname()[1], held)
    stop.set()
    thread.join()
    SilentServer(0, held).hang_up()
    server.close()


@pytest.fixture
def garbage_server() -> Iterator[int]:
    """Answers every connection with text that is not an SSH banner, then hangs up."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                conn = server.accept()[0]
            except OSError:
                continue
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()


def _config(tmp_path: Path, ports: dict[str, int]) -> Path:
    lines = []
    for name, port in ports.items():
        lines += [f"Host {name}", "  HostName 127.0.0.1", f"  Port {port}", "  ConnectTimeout 2",
                  f"  UserKnownHostsFile {tmp_path}/known_hosts", f"  IdentityFile {tmp_path}/no_key", ""]
    path = tmp_path / "ssh_config"
    path.write_text("\n".join(lines))
    return path


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_needs_hosts_or_inventory() -> None:
    with pytest.raises(UsageError, match="--hosts NODESET or --inventory"):
        SshDispatcher.from_args(_args(), "hgx-h100-8gpu")


@pytest.mark.parametrize("hosts", ["node;reboot", "$(id)", "a b"])
def test_node_names_are_validated(hosts: str) -> None:
    with pytest.raises(UsageError):
        SshDispatcher.from_args(_args(hosts=hosts), "hgx-h100-8gpu")


@pytest.mark.parametrize("fanout", [0, -1])
def test_fanout_must_be_positive(tmp_path: Path, fanout: int) -> None:
    with pytest.raises(UsageError, match="--fanout"):
        SshDispatcher.from_args(_args(hosts="n1", ssh_config=_config(tmp_path, {"n1": 1}), fanout=fanout),
                                "hgx-h100-8gpu")


def test_hosts_expand_and_resolve_through_the_config(tmp_path: Path) -> None:
    config = _config(tmp_path, {"n1": 2201, "n2": 2202})
    dispatcher = SshDispatcher.from_args(_args(hosts="n[1-2]", ssh_config=config), "hgx-h100-8gpu")
    assert dispatcher.nodes == ["n1", "n2"]
    assert dispatcher.topology_by_node == {}
    dispatcher.close()


def test_inventory_topologies_and_ssh_config(tmp_path: Path) -> None:
    config = _config(tmp_path, {"n1": 2201})
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(f"ssh_config: {config.name}\nnodes:\n  n1: {{topology: other}}\n  n2: {{}}\n")
    other = tmp_path / "topos"
    other.mkdir()
    from burnin.resources import topologies_dir

    (other / "other.yaml").write_text((topologies_dir() / "hgx-h100-8gpu.yaml").read_text())
    os.environ["BURNIN_TOPOLOGY_PATH"] = str(other)
    try:
        dispatcher = SshDispatcher.from_args(_args(inventory=inventory, hosts="n1"), "hgx-h100-8gpu")
    finally:
        del os.environ["BURNIN_TOPOLOGY_PATH"]
    assert dispatcher.nodes == ["n1"]
    assert dispatcher.topology_by_node == {"n1": "other"}
    dispatcher.close()


def test_unreachable_nodes_are_incomplete_with_the_cause(tmp_path: Path, silent_server: SilentServer,
                                                         garbage_server: int) -> None:
    config = _config(tmp_path, {"refused": _closed_port(), "hung": silent_server.port,
                                "garbled": garbage_server})
    (tmp_path / "known_hosts").write_text("")
    before = _fds()
    dispatcher = SshDispatcher.from_args(_args(hosts="refused,hung,garbled", ssh_config=config),
                                         "hgx-h100-8gpu")
    done: list[str] = []
    facts = dispatcher.gather(sources="all", timeout=5.0, on_done=done.append)
    dispatcher.close()
    assert sorted(done) == ["garbled", "hung", "refused"]
    reasons = {node: f.unreachable for node, f in facts.items()}
    assert "connection refused" in (reasons["refused"] or ""), reasons
    assert (reasons["refused"] or "").startswith("unreachable")
    assert "no SSH banner from 127.0.0.1" in (reasons["hung"] or ""), reasons
    assert "closed the connection without an SSH banner" in (reasons["garbled"] or ""), reasons
    # bounded by burnin's own timeouts, not the OS's: the reason says which one ran out
    assert re.search(r"within \d+(\.\d+)? s", reasons["hung"] or ""), reasons
    silent_server.hang_up()
    time.sleep(0.2)
    assert _fds() <= before, "file descriptors leaked"


def test_whole_gather_is_bounded_by_its_timeout_times_waves(tmp_path: Path,
                                                            silent_server: SilentServer) -> None:
    names = [f"h{i}" for i in range(4)]
    config = _config(tmp_path, dict.fromkeys(names, silent_server.port))
    dispatcher = SshDispatcher.from_args(_args(hosts="h[0-3]", ssh_config=config, fanout=2),
                                         "hgx-h100-8gpu")
    facts = dispatcher.gather(sources="all", timeout=1.0)
    dispatcher.close()
    # every silent node ends on the 1 s timeout it was given, or what was left of it when a loaded
    # machine reached the banner wait late (the wall time is bench/fanout's business)
    bounds = {n: re.search(r"within (\d+(?:\.\d+)?) s", f.unreachable or "") for n, f in facts.items()}
    assert all(m is not None and 0 < float(m.group(1)) <= 1.0 for m in bounds.values()), \
        {n: f.unreachable for n, f in facts.items()}


def test_a_thousand_unreachable_nodes_leak_nothing(tmp_path: Path) -> None:
    """The failure path at rack scale: every node refused, fds back to where they were."""
    port = _closed_port()
    config = tmp_path / "ssh_config"
    config.write_text(f"Host n*\n  HostName 127.0.0.1\n  Port {port}\n  ConnectTimeout 2\n"
                      f"  UserKnownHostsFile {tmp_path}/known_hosts\n  IdentityFile {tmp_path}/no_key\n")
    dispatcher = SshDispatcher.from_args(_args(hosts="n[0001-1000]", ssh_config=config), "hgx-h100-8gpu")
    before = _fds()
    facts = dispatcher.gather(sources="all", timeout=10)
    dispatcher.close()
    assert len(facts) == 1000
    assert all("connection refused" in (f.unreachable or "") for f in facts.values())
    assert _fds() <= before
