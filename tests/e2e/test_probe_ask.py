"""`burnin probe` answered by a resident probe on simulated nodes, and never by anything else.

The console script asks the resident probe (`burnin probe --serve`) first and prints its answer when it
serves this node with the same options; whatever else listens, or answers, or asks with other options, the
one-shot probe judges the node. Which of the two answered is read from the client's own imports
(`python -X importtime`): the one-shot probe imports `burnin.probe`, an answer from the resident probe does not.
The command is the console script as installed.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from probe_gate_support import DRIVER, write_gate

from burnin.cli.probe_ask import reply_line, sign
from burnin.sim import SimNode, apply_fault, build_rack, parse_fault_spec
from burnin.topology.model import Topology

SOURCE_TIMEOUT = "60"  # a failure limit on a loaded machine, not a measurement
WAIT_S = 300  # how long a server or a client may take (a failure limit on a loaded machine, not a measurement)
CONSOLE_SCRIPT = Path(sys.executable).with_name("burnin")  # as installed (pyproject's [project.scripts])


class Asked:
    """One `burnin probe` through the console script's code: its exit, its output, and who answered it."""

    def __init__(self, proc: subprocess.CompletedProcess[str]) -> None:
        self.code = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.modules = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
                        if line.startswith("import time:") and "cumulative" not in line}
        assert "burnin.cli.entry" in self.modules, proc.stderr[-2000:]

    @property
    def by_server(self) -> bool:
        return "burnin.probe" not in self.modules


class Rack:
    def __init__(self, tmp: Path, nodes: list[SimNode]) -> None:
        self.tmp = tmp
        self.nodes = {node.name: node for node in nodes}
        self.address = tmp / "run" / "probe.addr"
        self.gate_log = tmp / "drains.jsonl"
        write_gate(tmp / "gates")
        self.server: subprocess.Popen[str] | None = None

    def env(self, node: str = "sim01") -> dict[str, str]:
        return {**os.environ, **self.nodes[node].environment(), "PROBE_GATE_LOG": str(self.gate_log),
                "BURNIN_PROBE_ADDRESS": str(self.address), "XDG_CACHE_HOME": str(self.tmp / "cache")}

    def serve(self, *args: str) -> None:
        self.server = subprocess.Popen([sys.executable, "-c", DRIVER, str(self.tmp / "gates"), "probe", "--serve",
                                        "--address-file", str(self.address), *args],
                                       env=self.env(), cwd=self.tmp, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       text=True)
        assert self.server.stdout is not None
        first = self.server.stdout.readline()
        assert "serving on 127.0.0.1:" in first, first

    def probe(self, *args: str, node: str = "sim01") -> Asked:
        return Asked(subprocess.run([str(CONSOLE_SCRIPT), "probe", *args],
                                    env={**self.env(node), "PYTHONPROFILEIMPORTTIME": "1"}, cwd=self.tmp,
                                    capture_output=True, text=True, timeout=WAIT_S, check=False))

    def drains(self) -> list[dict[str, str]]:
        if not self.gate_log.exists():
            return []
        return [json.loads(line) for line in self.gate_log.read_text(encoding="utf-8").splitlines()]

    def stop(self) -> None:
        if self.server is not None and self.server.poll() is None:
            self.server.terminate()
            self.server.wait(timeout=WAIT_S)


@pytest.fixture
def rack(tmp_path: Path, h100_topology: Topology) -> Iterator[Rack]:
    nodes = build_rack(tmp_path / "rack", h100_topology, ["sim01", "sim02"], {"sim02": ["xid:79@gpu5"]})
    the_rack = Rack(tmp_path, nodes)
    yield the_rack
    the_rack.stop()


def test_burnin_probe_is_answered_by_the_resident_probe_which_judges_afresh_and_drains(rack: Rack) -> None:
    rack.serve("--timeout", SOURCE_TIMEOUT, "--gate", "recording")
    healthy = rack.probe("--timeout", SOURCE_TIMEOUT, "--gate", "recording", "--drain")
    assert healthy.code == 0 and healthy.stdout.startswith("burnin: OK (39 checks"), healthy.stdout + healthy.stderr
    assert healthy.by_server
    # The answer costs the interpreter and one small module: no argparse, typing or socket enums, no probe code.
    assert not healthy.modules & {"argparse", "typing", "socket", "burnin.cli.main", "pynvml", "burnin.collector"}
    apply_fault(rack.nodes["sim01"].dir, parse_fault_spec("xid:79@gpu2"))  # after the server's own first probe
    failed = rack.probe("--drain", "--gate=recording", "--timeout", SOURCE_TIMEOUT)
    assert failed.by_server
    assert failed.code == 1 and failed.stdout.startswith("burnin: FAIL GPU-04 ") and "gpu2" in failed.stdout
    assert len(failed.stdout.splitlines()) == 1
    (drain,) = rack.drains()  # drained by the server, through its gate
    assert drain["node"] == "sim01" and drain["reason"].startswith("burnin: GPU-04")


def test_a_probe_with_other_options_or_of_another_node_is_judged_by_the_one_shot_probe(rack: Rack) -> None:
    rack.serve("--timeout", SOURCE_TIMEOUT)
    other_timeout = rack.probe("--timeout", "30")
    assert not other_timeout.by_server and other_timeout.code == 0
    as_json = rack.probe("--timeout", SOURCE_TIMEOUT, "--json")  # a form the resident probe does not answer
    assert not as_json.by_server and json.loads(as_json.stdout)["exit"] == 0
    # sim02 (its GPU 5 threw Xid 79) asks sim01's server at the same address: refused, sim02 judged by itself
    other_node = rack.probe("--timeout", SOURCE_TIMEOUT, node="sim02")
    assert not other_node.by_server
    assert other_node.code == 1 and other_node.stdout.startswith("burnin: FAIL GPU-04 ") and "gpu5" in other_node.stdout
    same = rack.probe("--timeout", SOURCE_TIMEOUT)  # and the server still answers its own node
    assert same.by_server and same.code == 0
    rack.stop()
    assert rack.server is not None and rack.server.stdout is not None
    log = rack.server.stdout.read()
    assert log.count("burnin probe: refused a request: other options") == 2, log  # why they were not served


class Impostor:
    """A process that took the port: it reads the request and answers ``reply(request)``."""

    def __init__(self, reply: str | Callable[[str], str]) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.reply = reply
        self.requests: list[str] = []
        self.thread = threading.Thread(target=self._answer_one, daemon=True)
        self.thread.start()

    def _answer_one(self) -> None:
        connection, _ = self.listener.accept()
        with connection:
            request = connection.makefile("r", encoding="ascii").readline()
            self.requests.append(request)
            nonce = request.split()[2] if len(request.split()) > 2 else ""
            reply = self.reply(request) if callable(self.reply) else self.reply.replace("NONCE", nonce)
            connection.sendall(reply.encode() + b"\n")

    def close(self) -> None:
        self.thread.join(timeout=WAIT_S)
        self.listener.close()


@pytest.mark.parametrize("forged", ["0 burnin: OK (forged)",
                                    f"0 {'0' * 64} burnin: OK (forged)",
                                    "0 {mac} burnin: OK (forged)"])
def test_an_answer_not_signed_with_the_servers_token_is_not_believed(rack: Rack, forged: str) -> None:
    """A process that took the port of a server that died, answering 'healthy' for a broken node."""
    token = "0123456789abcdef0123456789abcdef"
    other_key = "fedcba9876543210fedcba9876543210"
    impostor = Impostor(forged.replace("{mac}", sign(other_key, "NONCE 0 burnin: OK (forged)")))
    rack.address.parent.mkdir(parents=True, exist_ok=True)
    rack.address.write_text(f"{impostor.port} {token}\n", encoding="utf-8")
    rack.address.chmod(0o600)
    asked = rack.probe(node="sim02")
    impostor.close()
    assert not asked.by_server
    assert asked.code == 1 and asked.stdout.startswith("burnin: FAIL GPU-04 ")  # sim02's Xid, judged one-shot
    (request,) = impostor.requests
    assert request.startswith("burnin-probe/2 ") and token not in request  # the token never leaves the client


@pytest.mark.parametrize("tamper", ["group-writable", "someone else's", "a symlink", "garbage", "nobody listens"])
def test_an_address_file_the_client_cannot_trust_is_not_used(rack: Rack, tamper: str) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    rack.address.parent.mkdir(parents=True, exist_ok=True)
    real = rack.tmp / "elsewhere.addr"
    real.write_text(f"{port} 0123456789abcdef\n", encoding="utf-8")
    real.chmod(0o600)
    if tamper == "a symlink":
        rack.address.symlink_to(real)
    else:
        real.rename(rack.address)
        if tamper == "group-writable":
            rack.address.chmod(0o620)
        elif tamper == "someone else's":
            os.chown(rack.address, 4242, -1)
        elif tamper == "garbage":
            rack.address.write_text("port token\n", encoding="utf-8")
        elif tamper == "nobody listens":
            listener.close()
    asked = rack.probe(node="sim02")
    assert not asked.by_server and asked.code == 1 and asked.stdout.startswith("burnin: FAIL GPU-04 ")
    if tamper != "nobody listens":
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):  # the client never connected: nothing waits to be accepted
            listener.accept()
        listener.close()


def test_an_answer_signed_for_the_request_is_printed_as_it_came_whatever_stdout_can_encode(rack: Rack) -> None:
    """Who holds the token answers: its line and exit code are the command's, a character stdout cannot encode
    written escaped (not a traceback)."""
    token = "0123456789abcdef0123456789abcdef"
    line = "burnin: FAIL GPU-04 gpu2: Xid 79 \u2014 fallen off the bus"
    server = Impostor(lambda request: reply_line(token, request.split()[2], 1, line))
    rack.address.parent.mkdir(parents=True, exist_ok=True)
    rack.address.write_text(f"{server.port} {token}\n", encoding="utf-8")
    rack.address.chmod(0o600)
    proc = subprocess.run([str(CONSOLE_SCRIPT), "probe"], env={**rack.env(), "PYTHONIOENCODING": "ascii"},
                          cwd=rack.tmp, capture_output=True, text=True, timeout=WAIT_S, check=False)
    server.close()
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == "burnin: FAIL GPU-04 gpu2: Xid 79 \\u2014 fallen off the bus\n" and proc.stderr == ""
