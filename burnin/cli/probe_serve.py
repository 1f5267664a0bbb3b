"""``burnin probe --serve``: the probe resident on its node, answering a small client (docs/probe.md).

A one-shot ``burnin probe`` pays a Python start and its imports (about 80 % of its CPU)
for every health check. The resident probe pays them once: every request still runs
the whole probe (every source gathered afresh, every check judged, the drain acted on),
only the interpreter is already up. The client (``burnin probe --client``, a bash script)
costs a bash start.

Protocol, one request per connection on 127.0.0.1 (a port the kernel picks):

- the server writes ``PORT TOKEN`` to its address file (mode 0600, so only who may read
  it may ask: root, by default) once it listens;
- the client sends ``burnin-probe/1 TOKEN [drain] [undrain]`` and one newline;
- the server answers ``EXIT LINE``: the probe's exit code (0, 1, 2) and its one line;
  anything else (``stale``, ``refused``, ``error ...``, nothing, a closed connection, a
  timeout) makes the client run the one-shot probe instead, which judges the node itself.

``burnin probe`` itself asks in ``burnin-probe/2`` (burnin.cli.probe_ask): the request is
signed with the token instead of carrying it, names the options it would probe with (the
server refuses other ones: ``refused other options``), and the answer ``EXIT MAC LINE`` is
signed over the request's nonce, so that only this server can answer it.

Fail closed: a request is served only by code that is still the code on disk (an upgraded
burnin answers ``stale`` and the server exits, for systemd to start the new one); a probe
in which a source timed out is answered, then the server exits, so no abandoned thread
(a hung NVML call) outlives it; the topology file is read again when it changed.
"""

from __future__ import annotations

import argparse
import hmac
import os
import secrets
import signal
import socket
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from burnin.cli.probe_ask import ADDRESS_ENV, DEFAULT_ADDRESS_FILE, FLAGS, options_key, reply_line, sign

if TYPE_CHECKING:
    from burnin.probe import ProbeResult
    from burnin.topology.model import Topology


class Act(Protocol):
    """What a judged probe does next (``burnin.cli.probe_cmd.act``): drain or resume, the textfile, the history."""

    def __call__(self, result: ProbeResult, *, drain: bool, undrain: bool, gate: str,
                 metrics: Path | None, record: bool = False) -> None: ...

PROTOCOL = "burnin-probe/1"
PROTOCOL_SIGNED = "burnin-probe/2"
REQUEST_TIMEOUT_S = 2.0
"""How long a connected client may take to send its request line (the server serves one at a time)."""
MAX_REQUEST = 512


class _Stop(Exception):
    """SIGTERM, SIGINT or SIGHUP: stop serving."""


def _on_signal(signum: int, frame: FrameType | None) -> NoReturn:
    raise _Stop(signal.Signals(signum).name)


def address_file(value: Path | None) -> Path:
    """--address-file, or ``$BURNIN_PROBE_ADDRESS``, or /run/burnin/probe.addr."""
    return value or Path(os.environ.get(ADDRESS_ENV) or DEFAULT_ADDRESS_FILE)


def _words(line: bytes, protocol: str, at_least: int) -> list[str] | str:
    """The words of a request line in ``protocol`` (at least ``at_least``), else why it is refused."""
    try:
        words = line.decode("ascii").split()
    except UnicodeDecodeError:
        return "not ASCII"
    if len(words) < at_least or words[0] != protocol:
        return f"not a {protocol} request"
    return words


def _unknown_flag(flags: tuple[str, ...]) -> str | None:
    unknown = [flag for flag in flags if flag not in FLAGS]
    return f"unknown flag {unknown[0][:20]!r}" if unknown else None


def parse_request(line: bytes, token: str) -> tuple[str, ...] | str:
    """The flags of a well-formed request with the right token, else why it is refused."""
    words = _words(line, PROTOCOL, 2)
    if isinstance(words, str):
        return words
    if not hmac.compare_digest(words[1].encode(), token.encode()):
        return "wrong token"
    flags = tuple(words[2:])
    return _unknown_flag(flags) or flags


def parse_signed_request(line: bytes, token: str, options: str) -> tuple[str, tuple[str, ...]] | str:
    """The nonce and flags of a ``burnin-probe/2`` request signed with the token for these options, else why it
    is refused."""
    words = _words(line, PROTOCOL_SIGNED, 4)
    if isinstance(words, str):
        return words
    mac, nonce, asked, flags = words[1], words[2], words[3], tuple(words[4:])
    if not hmac.compare_digest(mac.encode(), sign(token, " ".join(words[2:])).encode()):
        return "wrong signature"
    unknown = _unknown_flag(flags)
    if unknown is not None:
        return unknown
    if asked != options:
        return "other options"  # the one-shot probe would judge, or act, otherwise: it runs instead
    return nonce, flags


class CodeStamp:
    """Size and modification time of every loaded burnin module: changed means upgraded under us."""

    def __init__(self) -> None:
        files = (getattr(module, "__file__", None) for name, module in list(sys.modules.items())
                 if name == "burnin" or name.startswith("burnin."))
        self.files: list[str] = sorted({file for file in files if isinstance(file, str)})
        self.stamp = self._read()

    def _read(self) -> list[tuple[int, int] | None]:
        stamps: list[tuple[int, int] | None] = []
        for path in self.files:
            try:
                status = os.stat(path)
            except OSError:
                stamps.append(None)
            else:
                stamps.append((status.st_mtime_ns, status.st_size))
        return stamps

    def changed(self) -> bool:
        return self._read() != self.stamp


class TopologyFile:
    """The node type, read again (through the validated cache) whenever its file changed."""

    def __init__(self, name: str) -> None:
        from burnin.topology.catalog import resolve

        self.path = resolve(name)
        self.stamp: tuple[int, int, int] | None = None
        self.topology: Topology | None = None

    def current(self) -> Topology:
        from burnin.topology.fast import load_cached

        status = os.stat(self.path)
        stamp = (status.st_ino, status.st_mtime_ns, status.st_size)
        if self.topology is None or stamp != self.stamp:
            self.topology = load_cached(self.path)
            self.stamp = stamp
        return self.topology


class Server:
    def __init__(self, args: argparse.Namespace, listener: socket.socket, token: str, act: Act) -> None:
        self.args = args
        self.act = act
        self.listener = listener
        self.token = token
        self.options = options_key(topology=args.topology, timeout=args.timeout, gate=args.gate,
                                   metrics=str(args.metrics) if args.metrics is not None else None,
                                   record=bool(getattr(args, "record", False)), environ=os.environ)
        """What ``burnin probe`` must ask with to be answered here (burnin.cli.probe_ask.options_key)."""
        self.topology = TopologyFile(args.topology)
        self.code: CodeStamp | None = None
        self.served = 0

    def warm_up(self) -> None:
        """One probe nobody asked for, acted on by nobody: every module the probe needs is imported."""
        from burnin.probe import run_probe

        run_probe(self.topology.current(), timeout=self.args.timeout)
        self.code = CodeStamp()

    def serve_one(self) -> bool:
        """Answer one connection; False once the server must stop (stale code, a source that hung)."""
        connection, _ = self.listener.accept()
        with connection:
            connection.settimeout(REQUEST_TIMEOUT_S)
            try:
                line = _read_line(connection)
            except OSError:
                return True
            nonce: str | None = None
            if line.startswith(PROTOCOL_SIGNED.encode()):
                signed = parse_signed_request(line, self.token, self.options)
                if isinstance(signed, str):
                    _refuse(connection, signed)
                    return True
                nonce, request = signed
            else:
                plain = parse_request(line, self.token)
                if isinstance(plain, str):
                    _refuse(connection, plain)
                    return True
                request = plain
            if self.code is not None and self.code.changed():
                _send(connection, "stale burnin changed on disk: restart the server")
                return False
            try:
                code, text, keep = self._probe(request)
                reply = f"{code} {text}" if nonce is None else reply_line(self.token, nonce, code, text)
            except Exception as exc:  # noqa: BLE001 - the client falls back to the one-shot probe, which reports it
                reply, keep = f"error {type(exc).__name__}", True
            _send(connection, reply)
            self.served += 1
            return keep

    def _probe(self, flags: tuple[str, ...]) -> tuple[int, str, bool]:
        from burnin.probe import run_probe
        from burnin.text import printable

        result = run_probe(self.topology.current(), timeout=self.args.timeout)
        self.act(result, drain="drain" in flags, undrain="undrain" in flags, gate=self.args.gate,
                 metrics=self.args.metrics, record=bool(getattr(self.args, "record", False)))
        line = printable(result.line()).replace("\n", " ")
        # A source that outlived its timeout was abandoned in its thread, or a tool it ran was killed at its
        # timeout (whose thread may or may not be back yet): the server goes with it either way.
        return result.exit_code, line, not timed_out(result.facts) and threading.active_count() == 1


def timed_out(facts: Mapping[str, Any]) -> bool:
    """Whether a source, or a command a source ran, was stopped at its timeout in this gathering."""
    for section in ("sources", "commands"):
        records = facts.get(section)
        if not isinstance(records, Mapping):
            continue
        for record in records.values():
            if isinstance(record, Mapping) and "timed out" in str(record.get("error") or ""):
                return True
    return False


def _read_line(connection: socket.socket) -> bytes:
    data = b""
    while b"\n" not in data and len(data) < MAX_REQUEST:
        chunk = connection.recv(MAX_REQUEST)
        if not chunk:
            break
        data += chunk
    return data.partition(b"\n")[0]


def _refuse(connection: socket.socket, why: str) -> None:
    """Say no, to the client (which runs the one-shot probe) and in the service's log: a ``burnin probe`` that is
    never served (its options are not the service's) costs a one-shot probe each time, and this says why."""
    _send(connection, f"refused {why}")
    print(f"burnin probe: refused a request: {why}", flush=True)


def _send(connection: socket.socket, text: str) -> None:
    try:
        connection.sendall(text.encode("utf-8", "replace") + b"\n")
    except OSError:
        pass  # the client left: it runs the one-shot probe if it still wants an answer


def _publish(path: Path, port: int, token: str) -> None:
    """``PORT TOKEN`` in ``path``, readable by this user alone, written whole or not at all."""
    from burnin.atomic import write_text_atomic
    from burnin.errors import UsageError

    try:
        write_text_atomic(path, f"{port} {token}\n", mode=0o600)
    except OSError as exc:
        raise UsageError(f"--address-file {path}: cannot write it ({exc.strerror or exc})") from None


def serve(args: argparse.Namespace, act: Act) -> int:
    """Listen, publish the address, answer until a signal, stale code or a hung source; exit 0."""
    from burnin.errors import UsageError

    if args.json or args.baseline or args.drain or args.undrain:
        raise UsageError("--serve takes no --json, --baseline, --drain or --undrain: each request says "
                         "drain/undrain (burnin probe --client --drain); run the one-shot probe for the others")
    path = address_file(args.address_file)
    token = secrets.token_hex(16)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    server = Server(args, listener, token, act)
    server.warm_up()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    _publish(path, listener.getsockname()[1], token)
    print(f"burnin probe: serving on 127.0.0.1:{listener.getsockname()[1]} (address in {path})", flush=True)
    try:
        while server.serve_one():
            pass
    except _Stop:
        pass
    finally:
        listener.close()
        try:
            if path.read_text(encoding="utf-8").split()[1:] == [token]:
                path.unlink()  # ours still: a newer server's file stays
        except (OSError, IndexError):
            pass
    sys.stdout.flush()
    if threading.active_count() > 1:
        os._exit(0)  # a thread a hung source left behind must not hold the exit
    return 0
