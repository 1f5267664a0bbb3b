"""What burnin says when SSH setup goes wrong: the cause in words, never a file's content.

The peers here are tiny TCP servers on 127.0.0.1 (port 0) started by the test:
no sshd is needed.
"""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from burnin.errors import TransportError, UsageError
from burnin.text import has_control
from burnin.transport.ssh import SshTransport
from burnin.transport.ssh_config import Endpoint, KnownHosts, SshConfigResolver

SECRET = "root:$6$Zq8sEcReThAsH$abcdefghijklmnop:19700:0:99999:7:::"

# --------------------------------------------------------------- ssh_config


def _resolver_error(tmp_path: Path, content: bytes) -> str:
    path = tmp_path / "config"
    path.write_bytes(content)
    with pytest.raises(UsageError) as caught:
        SshConfigResolver(path).resolve("node1")
    return str(caught.value)


def test_a_file_that_is_not_ssh_config_is_named_with_its_line_not_quoted(tmp_path: Path) -> None:
    # What ``--ssh-config /etc/shadow`` looks like: the message must not print the hash.
    message = _resolver_error(tmp_path, f"# comment\n\n{SECRET}\nbin:*:19700:0:99999:7:::\n".encode())
    assert str(tmp_path / "config") in message
    assert "line 3" in message
    assert "Zq8s" not in message and "$6$" not in message and "99999" not in message


def test_unbalanced_quotes_in_a_host_pattern_name_the_line(tmp_path: Path) -> None:
    message = _resolver_error(tmp_path, b'Host ok\n  User a\nHost "secret-pattern\n  User b\n')
    assert "line 3" in message and "secret-pattern" not in message


def test_a_non_utf8_config_names_the_byte_offset(tmp_path: Path) -> None:
    message = _resolver_error(tmp_path, b"Host a\n  User \xff\xfe\n")
    assert "not UTF-8" in message and "byte offset 14" in message


def test_a_port_that_is_not_a_number_names_the_line_not_the_value(tmp_path: Path) -> None:
    message = _resolver_error(tmp_path, b"Host other\n  Port 2022\nHost node1\n  Port hunter2\n")
    assert re.search(r"config line 4: port for node1 is not a number", message), message
    assert "hunter2" not in message


def test_a_known_hosts_line_with_a_bad_key_is_named_not_quoted(tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    known.write_text(f"# header\nnode1 ssh-ed25519 {SECRET}\n")
    with pytest.raises(TransportError) as caught:
        KnownHosts((known,)).known_types("node1")
    message = str(caught.value)
    assert f"{known} line 2" in message and "Zq8s" not in message


# ------------------------------------------------------------- silent peers


@pytest.fixture
def peer() -> Iterator[Callable[[bytes | None], int]]:
    """Start a TCP server on 127.0.0.1 that sends ``greeting`` (None: closes at once) and then
    stays silent; returns its port."""
    servers: list[socket.socket] = []
    accepted: list[socket.socket] = []

    def start(greeting: bytes | None) -> int:
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        servers.append(server)

        def serve() -> None:
            while True:
                try:
                    conn, _ = server.accept()
                except OSError:
                    return
                if greeting is None:
                    conn.close()
                    continue
                if greeting:
                    conn.sendall(greeting)
                accepted.append(conn)

        threading.Thread(target=serve, daemon=True).start()
        port: int = server.getsockname()[1]
        return port

    yield start
    for sock in servers + accepted:
        sock.close()


def _connect_error(port: int, *, connect_timeout: float, timeout: float) -> str:
    endpoint = Endpoint("node1", "127.0.0.1", port, "ops", (), True, KnownHosts(()),
                        connect_timeout=connect_timeout)
    transport = SshTransport({"node1": endpoint})
    try:
        result = transport.run("node1", ["true"], timeout=timeout)
    finally:
        transport.close()
    assert result.exit_status is None and result.error is not None
    return result.error


def test_a_peer_that_never_speaks_is_reported_as_a_missing_banner(
        peer: Callable[[bytes | None], int]) -> None:
    port = peer(b"")
    error = _connect_error(port, connect_timeout=1.0, timeout=30.0)
    assert error.startswith(f"unreachable: no SSH banner from 127.0.0.1:{port} within 1.0 s"), error
    assert "No existing session" not in error


def test_a_silent_peer_cut_short_by_the_command_timeout_is_a_missing_banner_too(
        peer: Callable[[bytes | None], int]) -> None:
    # Here the command's deadline (not ConnectTimeout) bounds the wait: paramiko's banner timeout fires.
    port = peer(b"")
    error = _connect_error(port, connect_timeout=30.0, timeout=1.0)
    assert re.match(rf"unreachable: no SSH banner from 127\.0\.0\.1:{port} within \d+\.\d s", error), error


def test_a_peer_that_hangs_up_at_once_is_named(peer: Callable[[bytes | None], int]) -> None:
    port = peer(None)
    error = _connect_error(port, connect_timeout=5.0, timeout=30.0)
    assert error == f"unreachable: 127.0.0.1:{port} closed the connection without an SSH banner"


def test_a_peer_that_speaks_another_protocol_is_quoted_escaped(peer: Callable[[bytes | None], int]) -> None:
    port = peer(b"HTTP/1.1 400 Bad\x1b[2J\x00Request\r\n" * 120)
    error = _connect_error(port, connect_timeout=5.0, timeout=30.0)
    assert error.startswith(f"unreachable: 127.0.0.1:{port} does not speak SSH"), error
    assert "\\x1b[2J\\x00" in error and not has_control(error)


def test_a_peer_that_stalls_after_its_banner_is_a_stalled_key_exchange(
        peer: Callable[[bytes | None], int]) -> None:
    port = peer(b"SSH-2.0-Fake\x1b[2J_1.0\r\n")
    error = _connect_error(port, connect_timeout=1.0, timeout=30.0)
    assert error.startswith(f"unreachable: SSH key exchange with ops@127.0.0.1:{port} did not finish "
                            "within 1.0 s"), error
    assert "No existing session" not in error and not has_control(error)
