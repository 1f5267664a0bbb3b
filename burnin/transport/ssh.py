"""Run commands on nodes over SSH (paramiko), one connection per node, strictly checked.

- One connection per node, opened on its first command and reused for every
  later one until :meth:`SshTransport.release` or :meth:`SshTransport.close`.
- Every step is bounded: TCP connect, handshake and authentication by the
  endpoint's connect timeout, the whole command by the caller's timeout; a
  watchdog closes a connection stuck past its deadline. Keepalives detect dead
  peers. Nothing ever prompts: keys only (files or ssh-agent), no password, no
  passphrase, no agent forwarding.
- Host keys are checked against known_hosts (see :class:`KnownHosts`).
- ProxyJump: the target's TCP stream is a ``direct-tcpip`` channel through the
  bastion's connection, which is shared by every node behind it.
- The remote command line is built with ``shlex`` from an argv: no node name or
  value is ever pasted into a shell string unquoted. When ``timeout(1)`` exists
  on the node the command runs under it, so a hung command is killed there too,
  and a command killed by a signal says which on stderr.
- An interrupted run (:func:`stop_commands`, called by the CLI's SIGINT/SIGTERM/SIGHUP
  handler) and :meth:`SshTransport.close` stop the commands still running: each is sent
  SSH's ``signal`` request (TERM, then KILL after :data:`STOP_GRACE_S`), which sshd
  delivers to the command's process group, and its channel is closed. No new command
  starts once the run is interrupted.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence

from burnin.errors import TransportError
from burnin.text import printable
from burnin.transport.base import CommandResult
from burnin.transport.ssh_config import Endpoint
from burnin.transport.sshlib import paramiko

# paramiko logs every failed handshake with a traceback; the node's reason says it once.
logging.getLogger("paramiko").addHandler(logging.NullHandler())

EndpointFor = Callable[[str], Endpoint]
MAX_OUTPUT = 64 * 1024 * 1024
_CHUNK = 32768
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
KILL_GRACE_S = 5
# Seconds a stopped command gets between SIGTERM and SIGKILL, then to report its exit. The TERM reaches the
# command through the login shell's trap (remote_command: the command runs under timeout(1), in a process group of
# its own); a KILL reaches the shell alone, and a command whose shell was killed before its trap ran is left
# running until its own timeout. On a loaded node (a CI machine at three workers on two cores: seen once, in a
# full run, at 2 s) the trap may need more than 2 s, so the shell gets 5, well inside close()'s CLOSE_WAIT_S.
STOP_GRACE_S = 5.0
_POLL_S = 0.25  # how often a waiting command looks whether it must stop
# Longest close() waits for running commands to stop before it closes their connections.
CLOSE_WAIT_S = 10.0
INTERRUPTED_ERROR = "not started: the run was interrupted"
STOPPED_ERROR = "stopped: the run was interrupted"
CLOSED_ERROR = "stopped: burnin closed its connections while the command ran"


class _Stop:
    """Whether the run was interrupted: a plain attribute, so a signal handler may set it."""

    requested = False


_STOP = _Stop()


def stop_commands() -> None:
    """Called from the interrupt handler: every running command stops (its own thread sends the
    signal within :data:`_POLL_S`) and no new one starts."""
    _STOP.requested = True


def allow_commands() -> None:
    """Let commands start again (a process that runs more than one CLI command, e.g. tests)."""
    _STOP.requested = False


class SshError(TransportError):
    """Connecting to a node failed; the message is the node's incomplete reason."""


class SshTransport:
    """The SSH transport: ``run(node, argv)`` on a cached per-node connection."""

    name = "ssh"

    def __init__(self, endpoint_for: EndpointFor | Mapping[str, Endpoint], *,
                 remote_timeout: bool = True) -> None:
        self._endpoint_for: EndpointFor = (
            endpoint_for.__getitem__ if isinstance(endpoint_for, Mapping) else endpoint_for)
        self._remote_timeout = remote_timeout
        self._lock = threading.Lock()
        self._node_locks: dict[str, threading.Lock] = {}
        self._conns: dict[str, paramiko.Transport] = {}
        self._jumps: dict[tuple[str, ...], paramiko.Transport] = {}
        self._jump_locks: dict[tuple[str, ...], threading.Lock] = {}
        self._keys: dict[str, paramiko.PKey | str] = {}
        self._running = 0  # commands between exec and their result
        self._quiet = threading.Condition(self._lock)  # notified whenever one of them ends
        self._closing = False
        self.connects = 0  # connections opened (targets and bastions), for tests and benchmarks

    # ------------------------------------------------------------------ public

    def run(self, node: str, argv: Sequence[str], *, timeout: float, stdin: bytes | None = None,
            env: Mapping[str, str] | None = None) -> CommandResult:
        started = time.monotonic()
        deadline = started + timeout
        argv_t = tuple(argv)
        if self._must_stop():
            return CommandResult(node, argv_t, None, "", "", 0.0, error=self._stop_reason(started=False))
        try:
            command = remote_command(argv_t, env, timeout if self._remote_timeout else None)
            with self._node_lock(node):
                conn = self._connection(node, deadline)
                return self._exec(node, argv_t, conn, command, stdin, started, deadline)
        except SshError as exc:
            return CommandResult(node, argv_t, None, "", "", time.monotonic() - started, error=str(exc))

    def release(self, node: str) -> None:
        """Close ``node``'s connection (its commands are done for this run)."""
        with self._lock:
            conn = self._conns.pop(node, None)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        """Stop the commands still running (at most :data:`CLOSE_WAIT_S`), then close every
        connection, targets first, then bastions."""
        with self._quiet:
            self._closing = True
            self._quiet.wait_for(lambda: self._running == 0, timeout=CLOSE_WAIT_S)
            self._closing = False
            conns = list(self._conns.values()) + list(self._jumps.values())
            self._conns.clear()
            self._jumps.clear()
        for conn in conns:
            conn.close()

    def running(self) -> int:
        """Commands running right now (tests and diagnostics)."""
        with self._lock:
            return self._running

    def _must_stop(self) -> bool:
        return _STOP.requested or self._closing

    def _stop_reason(self, *, started: bool) -> str:
        if _STOP.requested:
            return STOPPED_ERROR if started else INTERRUPTED_ERROR
        return CLOSED_ERROR if started else "not started: burnin was closing its connections"

    def open_connections(self) -> int:
        with self._lock:
            return sum(1 for c in (*self._conns.values(), *self._jumps.values()) if c.is_active())

    # -------------------------------------------------------------- connecting

    def _node_lock(self, node: str) -> threading.Lock:
        with self._lock:
            return self._node_locks.setdefault(node, threading.Lock())

    def _connection(self, node: str, deadline: float) -> paramiko.Transport:
        with self._lock:
            conn = self._conns.get(node)
        if conn is not None and conn.is_active():
            return conn
        try:
            endpoint = self._endpoint_for(node)
        except (KeyError, TransportError) as exc:
            raise SshError(f"no SSH settings for {node}: {exc}") from None
        sock = self._open_socket(endpoint, deadline)
        conn = self._handshake(endpoint, sock, deadline)
        with self._lock:
            self._conns[node] = conn
        return conn

    def _open_socket(self, endpoint: Endpoint, deadline: float) -> socket.socket | paramiko.Channel:
        limit = _remaining(deadline, endpoint.connect_timeout)
        if endpoint.jumps:
            bastion = self._jump(endpoint.jumps, deadline)
            hop = endpoint.jumps[-1]
            try:
                return bastion.open_channel("direct-tcpip", (endpoint.hostname, endpoint.port),
                                            ("127.0.0.1", 0), timeout=limit)
            except paramiko.ChannelException as exc:
                raise SshError(f"unreachable via ProxyJump {hop.alias}: {hop.alias} cannot connect "
                               f"to {endpoint.hostname}:{endpoint.port} ({exc.text})") from None
            except (paramiko.SSHException, OSError, EOFError) as exc:
                raise SshError(f"unreachable via ProxyJump {hop.alias}: {_text(exc)}") from None
        try:
            sock = socket.create_connection((endpoint.hostname, endpoint.port), timeout=limit)
        except ConnectionRefusedError:
            raise SshError(f"unreachable: connection refused by {endpoint.hostname}:{endpoint.port} "
                           "(no sshd listening)") from None
        except socket.gaierror as exc:
            raise SshError(f"unreachable: cannot resolve {endpoint.hostname}: {exc.strerror}") from None
        except TimeoutError:
            raise SshError(f"unreachable: no answer from {endpoint.hostname}:{endpoint.port} "
                           f"within {limit:.1f} s (connect timeout)") from None
        except OSError as exc:
            raise SshError(f"unreachable: {endpoint.hostname}:{endpoint.port}: "
                           f"{exc.strerror or exc}") from None
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        return sock

    def _jump(self, hops: tuple[Endpoint, ...], deadline: float) -> paramiko.Transport:
        """The (shared) connection to the last bastion of ``hops``, opened hop by hop."""
        key = tuple(h.label for h in hops)
        with self._lock:
            lock = self._jump_locks.setdefault(key, threading.Lock())
        with lock:
            with self._lock:
                conn = self._jumps.get(key)
            if conn is not None and conn.is_active():
                return conn
            hop = hops[-1]
            try:
                sock = self._open_socket(
                    _with_jumps(hop, hops[:-1]), deadline)
                conn = self._handshake(hop, sock, deadline)
            except SshError as exc:
                raise SshError(f"bastion {hop.alias}: {exc}") from None
            with self._lock:
                self._jumps[key] = conn
            return conn

    def _handshake(self, endpoint: Endpoint, sock: socket.socket | paramiko.Channel,
                   deadline: float) -> paramiko.Transport:
        conn = paramiko.Transport(sock)
        limit = _remaining(deadline, endpoint.connect_timeout)
        conn.banner_timeout = conn.handshake_timeout = conn.auth_timeout = limit
        name = endpoint.host_key_name
        try:
            known = endpoint.known_hosts.known_types(name)
            if known:
                options = conn.get_security_options()
                preferred = [t for t in options.key_types if _base_type(t) in known]
                options.key_types = preferred + [t for t in options.key_types if t not in preferred]
            started = time.monotonic()
            try:
                conn.start_client(timeout=limit)
            except (paramiko.SSHException, EOFError, OSError) as exc:
                if conn.remote_version and time.monotonic() - started >= 0.95 * limit:
                    # paramiko's own handshake timer closed the socket: a stalled key exchange,
                    # whatever it then read from the closed socket (EOFError under load)
                    raise _handshake_error(conn, endpoint, limit, None) from None
                if isinstance(exc, paramiko.SSHException):
                    raise _handshake_error(conn, endpoint, limit, exc) from None
                raise
            if conn.host_key is None:  # start_client gave up at its timeout without raising
                raise _handshake_error(conn, endpoint, limit, None)
            endpoint.known_hosts.check(name, conn.get_remote_server_key())
            self._authenticate(conn, endpoint, deadline)
            conn.set_keepalive(max(1, int(endpoint.keepalive_s)))
        except SshError:
            _close(conn, sock)
            raise
        except TransportError as exc:  # host key unknown or changed, known_hosts unreadable
            _close(conn, sock)
            raise SshError(str(exc)) from None
        except (paramiko.SSHException, OSError, EOFError) as exc:
            _close(conn, sock)
            raise SshError(f"unreachable: SSH handshake with {endpoint.label} failed: "
                           f"{_text(exc)}") from None
        except BaseException:
            _close(conn, sock)
            raise
        with self._lock:
            self.connects += 1
        return conn

    def _authenticate(self, conn: paramiko.Transport, endpoint: Endpoint, deadline: float) -> None:
        tried: list[str] = []
        notes: list[str] = []
        agent: paramiko.Agent | None = None
        candidates: list[tuple[str, paramiko.PKey]] = []
        for path in endpoint.identity_files:
            loaded = self._load_key(str(path))
            if isinstance(loaded, str):
                notes.append(loaded)
            else:
                candidates.append((path.name, loaded))
        try:
            if not endpoint.identities_only and os.environ.get("SSH_AUTH_SOCK"):
                agent = paramiko.Agent()
                candidates += [(f"agent key {k.get_name()}", k) for k in agent.get_keys()]
            for label, key in candidates:
                conn.auth_timeout = _remaining(deadline, endpoint.connect_timeout)
                tried.append(label)
                try:
                    conn.auth_publickey(endpoint.user, key)
                except paramiko.BadAuthenticationType as exc:
                    raise SshError(f"authentication failed for {endpoint.label}: the server allows "
                                   f"only {', '.join(exc.allowed_types)} (burnin uses keys only)") from None
                except paramiko.AuthenticationException:
                    continue
                if conn.is_authenticated():
                    return
        finally:
            if agent is not None:
                agent.close()
        detail = f"key(s) refused: {', '.join(tried)}" if tried else "no usable key"
        if notes:
            detail += f"; {'; '.join(notes)}"
        raise SshError(f"authentication failed for {endpoint.label}: {detail}")

    def _load_key(self, path: str) -> paramiko.PKey | str:
        with self._lock:
            cached = self._keys.get(path)
        if cached is not None:
            return cached
        loaded: paramiko.PKey | str
        try:
            loaded = paramiko.PKey.from_path(path)
        except paramiko.PasswordRequiredException:
            loaded = f"{path} is passphrase-protected (load it into ssh-agent; burnin never prompts)"
        except FileNotFoundError:
            loaded = f"{path} not found"
        except (OSError, paramiko.SSHException, ValueError) as exc:
            loaded = f"{path} unreadable: {_text(exc)}"
        with self._lock:
            self._keys[path] = loaded
        return loaded

    # ---------------------------------------------------------------- commands

    def _exec(self, node: str, argv: tuple[str, ...], conn: paramiko.Transport, command: str,
              stdin: bytes | None, started: float, deadline: float) -> CommandResult:
        with self._lock:
            self._running += 1
        try:
            return self._exec_counted(node, argv, conn, command, stdin, started, deadline)
        finally:
            with self._quiet:
                self._running -= 1
                self._quiet.notify_all()

    def _exec_counted(self, node: str, argv: tuple[str, ...], conn: paramiko.Transport, command: str,
                      stdin: bytes | None, started: float, deadline: float) -> CommandResult:
        aborted = threading.Event()

        def abort() -> None:
            aborted.set()
            self._drop(node, conn)

        watchdog = threading.Timer(max(0.0, deadline - time.monotonic()) + 1.0, abort)
        watchdog.daemon = True
        watchdog.start()
        out = bytearray()
        err = bytearray()
        chan: paramiko.Channel | None = None
        try:
            if self._must_stop():
                return self._result(node, argv, started, out, err, error=self._stop_reason(started=False))
            chan = conn.open_session(timeout=_remaining(deadline))
            chan.exec_command(command)
            if stdin is not None:
                _send_all(chan, stdin, deadline, self._must_stop)
            chan.shutdown_write()
            timed_out = not _read_all(chan, out, err, deadline, self._must_stop)
            if not timed_out and not _wait_exit(chan, deadline, self._must_stop):
                timed_out = True
        except _Stopped:
            assert chan is not None
            stop_remote(chan)
            return self._result(node, argv, started, out, err, error=self._stop_reason(started=True))
        except SshError:  # no time left for a step of the command
            self._drop(node, conn)
            return self._result(node, argv, started, out, err, timed_out=True)
        except _Overflow:
            return self._result(node, argv, started, out, err, error=f"output exceeded {MAX_OUTPUT} bytes")
        except (paramiko.SSHException, OSError, EOFError) as exc:
            self._drop(node, conn)
            if aborted.is_set() or time.monotonic() >= deadline:
                return self._result(node, argv, started, out, err, timed_out=True)
            return self._result(node, argv, started, out, err,
                                error=f"connection lost during the command: {_text(exc)}")
        except BaseException:  # interrupted in this (the main) thread: the command goes with us
            if chan is not None:
                stop_remote(chan)
            raise
        finally:
            watchdog.cancel()
            if chan is not None:
                chan.close()
        if timed_out or aborted.is_set():
            return self._result(node, argv, started, out, err, timed_out=True)
        status = chan.recv_exit_status()
        if status < 0:
            return self._result(node, argv, started, out, err,
                                error="the command ended without an exit status (killed by a signal?)")
        return self._result(node, argv, started, out, err, status=status)

    def _drop(self, node: str, conn: paramiko.Transport) -> None:
        with self._lock:
            if self._conns.get(node) is conn:
                del self._conns[node]
        conn.close()

    @staticmethod
    def _result(node: str, argv: tuple[str, ...], started: float, out: bytearray, err: bytearray, *,
                status: int | None = None, timed_out: bool = False, error: str | None = None
                ) -> CommandResult:
        return CommandResult(node, argv, status, out.decode("utf-8", "replace"),
                             err.decode("utf-8", "replace"), time.monotonic() - started,
                             timed_out=timed_out, error=error)


class _Overflow(Exception):
    pass


class _Stopped(Exception):
    """The run was interrupted, or the transport is closing, while the command ran."""


def stop_remote(chan: paramiko.Channel) -> None:
    """Stop the command on ``chan``: SIGTERM its process group, SIGKILL after :data:`STOP_GRACE_S`.

    sshd delivers a ``signal`` request to the session's process group (the login shell's);
    :func:`remote_command`'s shell passes it on to a command that ``timeout(1)`` runs in a group
    of its own. Errors are ignored: the channel is closed next whatever happens.
    """
    for name, wait_s in (("TERM", STOP_GRACE_S), ("KILL", _POLL_S)):
        if chan.closed or chan.status_event.is_set():
            return
        try:
            send_signal(chan, name)
        except (paramiko.SSHException, OSError, EOFError, AttributeError):
            return
        if chan.status_event.wait(wait_s):
            return


def send_signal(chan: paramiko.Channel, name: str) -> None:
    """RFC 4254 6.9 ``signal`` channel request (``TERM``, ``KILL``...), which paramiko has no method for."""
    message = paramiko.Message()
    message.add_byte(paramiko.common.cMSG_CHANNEL_REQUEST)
    message.add_int(chan.remote_chanid)
    message.add_string("signal")
    message.add_boolean(False)
    message.add_string(name)
    chan.get_transport()._send_user_message(message)  # type: ignore[attr-defined]  # as paramiko's own requests


def remote_command(argv: Sequence[str], env: Mapping[str, str] | None = None,
                   timeout: float | None = None) -> str:
    """The shell command line for ``argv`` (every word quoted), under ``timeout(1)`` if present.

    With a ``timeout`` the command runs in the background of the login shell, which waits
    for it and passes on SIGTERM, SIGHUP and SIGINT: sshd delivers a ``signal`` request to
    the login shell's process group, and ``timeout(1)`` puts the command in a group of its
    own, which the shell's trap reaches (``timeout`` then signals its whole group, and
    SIGKILLs it after :data:`KILL_GRACE_S`). Its input is the session's (file descriptor 3).
    """
    if not argv:
        raise SshError("empty command")
    words = list(argv)
    if env:
        bad = [k for k in env if not _ENV_NAME.match(k)]
        if bad:
            raise SshError(f"invalid environment variable name(s): {', '.join(bad)}")
        words = ["env", *(f"{k}={v}" for k, v in env.items()), *words]
    line = shlex.join(words)
    if timeout is None:
        return line
    secs = max(1, int(timeout + 0.999))
    # The trap is set before the command starts: a signal that lands before ``p`` is known marks ``stop``
    # and the command is stopped as soon as it is (set after it, a signal in between killed the shell alone
    # and left the command running until its timeout).
    return ("exec 3<&0; p=; stop=; trap 'stop=1; [ -z \"$p\" ] || kill -TERM $p 2>/dev/null' HUP INT TERM; "
            "if command -v timeout >/dev/null 2>&1; "
            f"then timeout -k {KILL_GRACE_S} {secs} {line} <&3 3<&- & else {line} <&3 3<&- & fi; "
            "p=$!; exec 3<&-; [ -z \"$stop\" ] || kill -TERM $p 2>/dev/null; wait $p; s=$?; "
            "while kill -0 $p 2>/dev/null; do wait $p; s=$?; done; "
            "if [ $s -gt 128 ] && [ $s -lt 160 ]; then "
            "echo \"burnin: the command was killed by signal $((s-128)) (SIG$(kill -l $((s-128))))\" >&2; "
            "fi; exit $s")


def _send_all(chan: paramiko.Channel, data: bytes, deadline: float, stop: Callable[[], bool]) -> None:
    """Send ``data`` as the command's input; stops early when the command has ended without reading it all.

    A command that exits at once (``python3`` not found: exit 127) closes the channel while its
    input is still being sent; its output and exit status say what happened, so they are read
    as usual. A channel closed without an exit status is a lost connection.
    """
    view = memoryview(data)
    while view:
        if stop():
            raise _Stopped
        chan.settimeout(min(_remaining(deadline), _POLL_S))
        try:
            sent = chan.send(bytes(view[:_CHUNK]))
        except TimeoutError:  # the node reads slowly: look again whether to stop, then go on
            continue
        except OSError:
            if chan.exit_status_ready():
                return
            raise
        if sent <= 0:
            if chan.exit_status_ready():
                return
            raise EOFError("the remote side closed its input")
        view = view[sent:]


def _read_all(chan: paramiko.Channel, out: bytearray, err: bytearray, deadline: float,
              stop: Callable[[], bool]) -> bool:
    """Read stdout and stderr until EOF; False when the deadline passed first, _Stopped when ``stop()``."""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        if stop():
            raise _Stopped
        chan.settimeout(min(left, _POLL_S))
        try:
            data = chan.recv(_CHUNK)
        except TimeoutError:
            data = None
        while chan.recv_stderr_ready():
            err += chan.recv_stderr(_CHUNK)
        if data == b"":
            while chan.recv_stderr_ready():
                err += chan.recv_stderr(_CHUNK)
            return True
        if data:
            out += data
        if len(out) + len(err) > MAX_OUTPUT:
            raise _Overflow


def _wait_exit(chan: paramiko.Channel, deadline: float, stop: Callable[[], bool]) -> bool:
    """Wait for the exit status; False when the deadline passed first, _Stopped when ``stop()``."""
    while not chan.status_event.wait(min(_POLL_S, max(0.0, deadline - time.monotonic()))):
        if time.monotonic() >= deadline:
            return False
        if stop():
            raise _Stopped
    return True


def _remaining(deadline: float, cap: float | None = None) -> float:
    """Seconds left before ``deadline`` (at most ``cap``); SshError when none are left."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise SshError("timed out before the command could start")
    return left if cap is None else min(left, cap)


def _close(conn: paramiko.Transport, sock: socket.socket | paramiko.Channel) -> None:
    conn.close()
    sock.close()


def _base_type(key_type: str) -> str:
    return "ssh-rsa" if key_type.startswith("rsa-sha2-") else key_type.replace("-cert-v01@openssh.com", "")


def _with_jumps(endpoint: Endpoint, jumps: tuple[Endpoint, ...]) -> Endpoint:
    from dataclasses import replace

    return replace(endpoint, jumps=jumps)


def _handshake_error(conn: paramiko.Transport, endpoint: Endpoint, limit: float,
                     exc: paramiko.SSHException | None) -> SshError:
    """Why the SSH handshake did not finish, in words: no banner, not SSH, or a stalled key exchange.

    paramiko reports a peer that accepts TCP and never speaks either as
    "Error reading SSH protocol banner" (its banner timeout fired first) or not
    at all (``start_client`` returns at its own timeout and the next call says
    "No existing session"); both mean the banner never came.
    """
    where = f"{endpoint.hostname}:{endpoint.port}"
    if not conn.remote_version:
        cause = exc.__context__ if exc is not None else None
        if exc is None or isinstance(cause, TimeoutError):
            return SshError(f"unreachable: no SSH banner from {where} within {limit:.1f} s "
                            "(the port accepts connections but nothing answers in SSH)")
        if isinstance(cause, EOFError | OSError):
            return SshError(f"unreachable: {where} closed the connection without an SSH banner")
        return SshError(f"unreachable: {where} does not speak SSH: {_text(exc)}")
    if exc is None:
        return SshError(f"unreachable: SSH key exchange with {endpoint.label} did not finish within "
                        f"{limit:.1f} s (server {printable(conn.remote_version, limit=80)})")
    return SshError(f"unreachable: SSH handshake with {endpoint.label} failed: {_text(exc)}")


def _text(exc: BaseException) -> str:
    """The exception's message, control characters escaped (a peer's words may be in it)."""
    text = printable(str(exc).strip(), limit=300)
    if isinstance(exc, EOFError) or not text:
        return text or f"{type(exc).__name__} (connection closed by the remote side)"
    return text
