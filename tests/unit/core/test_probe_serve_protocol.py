"""The resident probe's pieces: its request line, its stale-code and topology checks."""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from burnin.cli.probe_serve import CodeStamp, Server, TopologyFile, address_file, parse_request
from burnin.probe import ProbeResult
from burnin.resources import topologies_dir
from burnin.sim import build_rack
from burnin.topology.model import Topology

pytestmark = pytest.mark.rack

TOKEN = "0123456789abcdef0123456789abcdef"


@pytest.mark.parametrize(("line", "expected"), [
    (f"burnin-probe/1 {TOKEN}".encode(), ()),
    (f"burnin-probe/1 {TOKEN} drain".encode(), ("drain",)),
    (f"burnin-probe/1 {TOKEN} drain undrain".encode(), ("drain", "undrain")),
    (f"burnin-probe/1 {TOKEN[:-1]}x drain".encode(), "wrong token"),
    (b"burnin-probe/1", "not a burnin-probe/1 request"),
    (f"burnin-probe/2 {TOKEN}".encode(), "not a burnin-probe/1 request"),
    (f"burnin-probe/1 {TOKEN} json".encode(), "unknown flag 'json'"),
    (b"burnin-probe/1 \xff\xfe", "not ASCII"),
    (b"", "not a burnin-probe/1 request"),
])
def test_a_request_is_served_only_whole_and_with_the_token(line: bytes, expected: tuple[str, ...] | str) -> None:
    assert parse_request(line, TOKEN) == expected


def test_the_code_stamp_sees_a_module_changed_on_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "upgraded.py"
    source.write_text("X = 1\n", encoding="utf-8")
    module = types.ModuleType("burnin._stamp_probe")
    module.__file__ = str(source)
    monkeypatch.setitem(sys.modules, "burnin._stamp_probe", module)
    stamp = CodeStamp()
    assert str(source) in stamp.files and not stamp.changed()
    source.write_text("X = 22\n", encoding="utf-8")  # a new size (and time): what an upgrade writes
    assert stamp.changed()
    os.unlink(source)
    assert stamp.changed()


def test_the_topology_is_read_again_when_its_file_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = tmp_path / "node.yaml"
    shutil.copy(topologies_dir() / "hgx-h100-8gpu.yaml", path)
    served = TopologyFile(str(path))
    first = served.current()
    assert served.current() is first  # unchanged file: the same object, not read again
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("name: hgx-h100-8gpu", "name: hgx-h100-8gpu-site", 1), encoding="utf-8")
    assert served.current().name == "hgx-h100-8gpu-site"


def test_the_address_file_is_the_flag_then_the_environment_then_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BURNIN_PROBE_ADDRESS", raising=False)
    assert address_file(None) == Path("/run/burnin/probe.addr")
    monkeypatch.setenv("BURNIN_PROBE_ADDRESS", "/srv/probe.addr")
    assert address_file(None) == Path("/srv/probe.addr")
    assert address_file(Path("/etc/p.addr")) == Path("/etc/p.addr")


def test_the_code_stamp_holds_burnin_and_nothing_else() -> None:
    import burnin

    files = CodeStamp().files
    package = os.path.dirname(burnin.__file__)
    assert burnin.__file__ in files
    assert all(path.startswith(package + os.sep) for path in files)


class Recorder:
    """The act a server is handed: what it was asked to do, or an error to raise."""

    def __init__(self, error: Exception | None = None) -> None:
        self.calls: list[dict[str, object]] = []
        self.error = error

    def __call__(self, result: ProbeResult, *, drain: bool, undrain: bool, gate: str, metrics: Path | None,
                 record: bool = False) -> None:
        self.calls.append({"exit": result.exit_code, "drain": drain, "undrain": undrain, "gate": gate,
                           "metrics": metrics})
        self.recorded = record
        if self.error is not None:
            raise self.error


@pytest.fixture
def server(tmp_path: Path, h100_topology: Topology, monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    """A server over a simulated node, in this process, with its first probe done; requests are queued on its
    listener before serve_one answers them (no thread, no clock)."""
    node = build_rack(tmp_path / "rack", h100_topology, ["sim01"], {})[0]
    for name, value in node.environment().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    args = argparse.Namespace(topology="hgx-h100-8gpu", timeout=60.0, gate="slurm", metrics=tmp_path / "b.prom")
    the_server = Server(args, listener, TOKEN, Recorder())
    the_server.warm_up()
    yield the_server
    listener.close()


def _ask(server: Server, request: bytes) -> tuple[bool, str]:
    with socket.create_connection(server.listener.getsockname()) as client:
        client.sendall(request)
        keep = server.serve_one()
        return keep, client.makefile("rb").read().decode()


def test_a_request_is_probed_and_acted_on_with_its_flags(server: Server) -> None:
    keep, reply = _ask(server, f"burnin-probe/1 {TOKEN} drain\n".encode())
    # In this process NVML is not the simulated node's (the loader read LD_LIBRARY_PATH at start): the node is
    # incomplete, and the reply carries that verdict, as the one-shot probe would print it.
    code, _, line = reply.partition(" ")
    assert keep and code in ("0", "1", "2") and line.startswith("burnin: ") and line.count("\n") == 1
    assert isinstance(server.act, Recorder)
    assert server.act.calls == [{"exit": int(code), "drain": True, "undrain": False, "gate": "slurm",
                                 "metrics": server.args.metrics}]
    keep, reply = _ask(server, f"burnin-probe/1 {TOKEN} undrain\n".encode())
    assert keep and server.act.calls[-1]["drain"] is False and server.act.calls[-1]["undrain"] is True


def test_a_refused_request_is_neither_probed_nor_acted_on(server: Server) -> None:
    keep, reply = _ask(server, b"burnin-probe/1 not-the-token drain\n")
    assert keep and reply == "refused wrong token\n"
    assert isinstance(server.act, Recorder) and server.act.calls == []


def test_a_client_that_says_nothing_gets_nothing(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("burnin.cli.probe_serve.REQUEST_TIMEOUT_S", 0.01)
    keep, reply = _ask(server, b"")
    assert keep and reply == ""
    assert isinstance(server.act, Recorder) and server.act.calls == []


def test_stale_code_is_answered_stale_and_stops_the_server(server: Server, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "module.py"
    source.write_text("X = 1\n", encoding="utf-8")
    module = types.ModuleType("burnin._served")
    module.__file__ = str(source)
    monkeypatch.setitem(sys.modules, "burnin._served", module)
    server.code = CodeStamp()
    assert _ask(server, f"burnin-probe/1 {TOKEN}\n".encode())[0]  # unchanged: served
    source.write_text("X = 22\n", encoding="utf-8")
    keep, reply = _ask(server, f"burnin-probe/1 {TOKEN} drain\n".encode())
    assert not keep and reply.startswith("stale ")
    assert isinstance(server.act, Recorder) and len(server.act.calls) == 1  # the stale request drained nothing


def test_an_error_acting_is_reported_for_the_client_to_fall_back(server: Server) -> None:
    server.act = Recorder(error=RuntimeError("scontrol vanished"))
    keep, reply = _ask(server, f"burnin-probe/1 {TOKEN} drain\n".encode())
    assert keep and reply == "error RuntimeError\n"


def test_a_gathering_with_a_timed_out_source_or_tool_ends_the_server() -> None:
    """Whether the hung tool's thread is back yet or not, a timeout ends the server after its answer."""
    from burnin.cli.probe_serve import timed_out

    assert timed_out({"sources": {"dmesg": {"ok": False, "error": "timed out after 3 s"}}})
    assert timed_out({"sources": {}, "commands": {"dmesg": {"argv": ["dmesg"], "error": "dmesg timed out after 3 s"}}})
    assert not timed_out({"sources": {"nvml": {"ok": True}}, "commands": {"dmesg": {"error": None}}})
    assert not timed_out({"sources": "garbage", "commands": {"x": "not a record"}})
