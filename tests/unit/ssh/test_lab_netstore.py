"""The kernel-network lab's storage target and client (burnin_lab.netstore): real TCP on loopback."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from burnin_lab import netstore


def test_dd_and_fio_command_lines_become_requests() -> None:
    assert netstore.request(["dd", "if=/dev/zero", "of=/mnt/home/f", "bs=1M", "count=3", "oflag=direct"]) == \
        ("PUT", "/mnt/home/f", 3 << 20)
    assert netstore.request(["dd", "if=/mnt/pfs/f", "of=/dev/null", "bs=4k", "count=2"]) == ("GET", "/mnt/pfs/f", 8192)
    assert netstore.request(["fio", "--name=x", "--filename=/mnt/home/f", "--rw=write", "--size=2G"]) == \
        ("PUT", "/mnt/home/f", 2 << 30)
    assert netstore.request(["fio", "--filename=/mnt/home/f", "--rw=read", "--size=512"]) == ("GET", "/mnt/home/f", 512)
    # nothing to move: no count, a bad size, a version query, a random-I/O job
    assert netstore.request(["dd", "if=/dev/zero", "of=/x"]) is None
    assert netstore.request(["dd", "of=/x", "bs=1Q", "count=1"]) is None
    assert netstore.request(["fio", "--version"]) is None
    assert netstore.request(["fio", "--filename=/x", "--rw=randrw", "--size=1M"]) is None


def test_a_path_goes_to_the_target_of_its_longest_mount() -> None:
    mounts = {"/mnt": "10.0.0.1", "/mnt/pfs": "10.20.8.11"}
    assert netstore.target_for("/mnt/pfs/a/b", mounts) == "10.20.8.11"
    assert netstore.target_for("/mnt/home/f", mounts) == "10.0.0.1"
    assert netstore.target_for("/mntx/f", mounts) is None
    assert netstore.target_for("/mnt", mounts) is None  # the mount point itself is no file on it


@pytest.fixture
def target() -> Iterator[int]:
    server = netstore._Server(("127.0.0.1", 0), netstore._Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def test_put_and_get_move_exactly_the_bytes(target: int) -> None:
    netstore.transfer("127.0.0.1", "PUT", 3 * netstore.CHUNK + 17, port=target)
    netstore.transfer("127.0.0.1", "GET", netstore.CHUNK + 5, port=target)


def test_a_short_answer_is_an_error(target: int) -> None:
    with socket.create_connection(("127.0.0.1", target)) as sock:
        sock.sendall(b"NOPE 1\n")
        assert sock.makefile("rb").readline() == b"ERR bad request\n"


def test_the_client_moves_nothing_off_the_storage_mounts_and_reports_an_unreachable_target(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], target: int) -> None:
    mounts = tmp_path / "mounts.json"
    mounts.write_text('{"/mnt/home": "127.0.0.1"}')
    assert netstore.client(str(mounts), ["dd", "if=/dev/zero", "of=/tmp/f", "bs=1M", "count=1"], port=1) == 0
    assert netstore.client(str(mounts), ["dd", "if=/dev/zero", "of=/mnt/home/f", "bs=1M", "count=1"],
                           port=target) == 0
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    code = netstore.client(str(mounts), ["dd", "if=/dev/zero", "of=/mnt/home/f", "bs=1M", "count=1"], port=free)
    assert code == 1 and "storage target 127.0.0.1" in capsys.readouterr().err
