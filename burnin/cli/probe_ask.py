"""``burnin probe`` answered by the resident probe serving this node, when it serves with the same options.

The console script (burnin.cli.entry) asks here before it imports anything else. A one-shot probe pays a
Python start and ~100 ms of CPU in imports; asking the resident probe (``burnin probe --serve``,
docs/probe.md) pays the start and this module, as ``dcgmi`` asks a running ``nv-hostengine``. An answer counts
only when it is the resident probe's, for the probe this command line asks for; anything else is ``None``,
and the one-shot probe judges the node, as it always did.

Fail closed:

- the address file must be a regular file of this user's (or root's) that nobody else may write: a file
  someone else wrote could name their own server and token;
- the token never leaves this process: the request is signed with it (keyed BLAKE2b over a fresh nonce, the
  options and the flags), and the answer must be signed over that nonce, its exit code and its line: a
  process that took the port of a server that died cannot answer anything the client accepts;
- the options (this burnin install and interpreter, the node as this process sees it, the node type, the
  timeout, the gate, the textfile) must be the server's own: the server refuses a probe it would judge, or
  act on, differently from the one-shot probe this command line would run;
- only the options the resident probe serves are understood here (``--drain``, ``--undrain``, ``--topology``,
  ``--timeout``, ``--gate``, ``--metrics``, ``--address-file``); any other word goes to the one-shot probe,
  whose parser judges it;
- anything but a signed exit code 0, 1 or 2 (a refusal, stale code, an error, no answer within
  ``$BURNIN_PROBE_WAIT`` seconds, a closed connection) is no answer.

Standard library only, and nothing that costs a millisecond to import: not ``typing``, not ``socket`` (whose
enums cost ~20 ms: the C module ``_socket`` is what it wraps), not ``argparse``.
"""

from __future__ import annotations

import os
import sys
import time

try:  # hashlib's BLAKE2b is this C module's; hashlib also loads OpenSSL (~2.5 ms) for constructors unused here
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - an interpreter built without it
    from hashlib import blake2b

PROTOCOL = "burnin-probe/2"
DEFAULT_ADDRESS_FILE = "/run/burnin/probe.addr"
ADDRESS_ENV = "BURNIN_PROBE_ADDRESS"
WAIT_ENV = "BURNIN_PROBE_WAIT"
DEFAULT_WAIT_S = 60.0
TOPOLOGY_ENV = "BURNIN_TOPOLOGY"
DEFAULT_TOPOLOGY = "hgx-h100-8gpu"
DEFAULT_TIMEOUT_S = 5.0
DEFAULT_GATE = "slurm"
FLAGS = ("drain", "undrain")
MAX_ADDRESS_BYTES = 256
MAX_REPLY_BYTES = 8192

_VALUED = ("--topology", "--timeout", "--gate", "--metrics", "--address-file")
_FLAG_WORDS = {"--drain": "drain", "--undrain": "undrain"}
_NODE_VIEW_PREFIXES = ("BURNIN_", "NCCL_", "UCX_", "OMPI_MCA_")
"""Variables that change what a probe reads or judges (the simulator's node, site topology folders, the
counters' baseline folder, the NCCL-like variables STO-02 judges): the client's must be the server's. How the
gate reaches its scheduler (``SLURM_CONF``, ``KUBECONFIG``) is the service's configuration, as ``PATH`` is."""
_NODE_VIEW_NAMES = ("LD_LIBRARY_PATH",)  # which NVML library loads
_NOT_NODE_VIEW = (ADDRESS_ENV, WAIT_ENV, TOPOLOGY_ENV)
"""The client's own knobs (the node type is an option of its own)."""


def parse_command_line(argv: list[str]) -> tuple[dict[str, str], tuple[str, ...]] | None:
    """The options and flags of ``burnin probe ARGV``, or None where a word is not one the resident probe serves.

    The last value of an option given twice wins, as with argparse. A value this cannot judge (``--timeout
    5s``, a missing one) is kept as written: the server's options will not match it, and the one-shot probe's
    parser gives the usage error.
    """
    values: dict[str, str] = {}
    flags: list[str] = []
    words = iter(argv)
    for word in words:
        if word in _FLAG_WORDS:
            if _FLAG_WORDS[word] not in flags:
                flags.append(_FLAG_WORDS[word])
            continue
        name, equals, value = word.partition("=")
        if name not in _VALUED:
            return None
        if not equals:
            following = next(words, None)
            if following is None:
                return None
            value = following
        if not value:  # argparse takes an empty value as given; the one-shot probe judges what it means
            return None
        values[name] = value
    return values, tuple(flags)


def options_key(*, topology: str, timeout: float, gate: str, metrics: str | None, record: bool,
                environ: dict[str, str] | os._Environ[str]) -> str:
    """What makes two probes judge and act alike, as one digest: the client's must equal the server's."""
    fields = [
        os.path.dirname(os.path.abspath(sys.modules["burnin"].__file__ or "")), sys.executable,
        os.uname().nodename,
        _topology_key(topology), repr(float(timeout)), gate, os.path.abspath(metrics) if metrics else "",
        "record" if record else "",
        *sorted(f"{name}={value}" for name, value in environ.items()
                if name not in _NOT_NODE_VIEW and (name.startswith(_NODE_VIEW_PREFIXES) or name in _NODE_VIEW_NAMES)),
    ]
    return blake2b("\0".join(fields).encode("utf-8", "surrogateescape"), digest_size=32).hexdigest()


def _topology_key(name_or_file: str) -> str:
    """A node type's name as given; a file's path made absolute (as burnin.topology.catalog.resolve tells them)."""
    if name_or_file.endswith((".yaml", ".yml")) or os.sep in name_or_file:
        return "file:" + os.path.abspath(name_or_file)
    return "name:" + name_or_file


def client_options_key(values: dict[str, str]) -> str | None:
    """The options key of this command line, with the one-shot probe's defaults; None for a timeout that is
    not a plain number (the one-shot probe's parser judges it)."""
    try:
        timeout = float(values.get("--timeout", DEFAULT_TIMEOUT_S))
    except ValueError:
        return None
    return options_key(topology=values.get("--topology") or os.environ.get(TOPOLOGY_ENV) or DEFAULT_TOPOLOGY,
                       timeout=timeout, gate=values.get("--gate", DEFAULT_GATE),
                       metrics=values.get("--metrics"), record=False, environ=os.environ)


def sign(token: str, text: str) -> str:
    """Keyed BLAKE2b of ``text`` with the server's token: who does not hold the token cannot make one."""
    return blake2b(text.encode("utf-8", "surrogateescape"), key=token.encode("ascii")[:64],
                   digest_size=32).hexdigest()


def request_line(token: str, nonce: str, options: str, flags: tuple[str, ...]) -> str:
    """``burnin-probe/2 MAC NONCE OPTIONS [FLAG...]``, the MAC over everything after it."""
    signed = " ".join((nonce, options, *flags))
    return f"{PROTOCOL} {sign(token, signed)} {signed}"


def reply_line(token: str, nonce: str, code: int, line: str) -> str:
    """The server's answer: ``EXIT MAC LINE``, the MAC over the request's nonce, the exit code and the line."""
    return f"{code} {sign(token, f'{nonce} {code} {line}')} {line}"


def read_reply(reply: str, token: str, nonce: str) -> tuple[int, str] | None:
    """The exit code and line of a reply signed for this request, else None."""
    code, _, rest = reply.partition(" ")
    mac, _, line = rest.partition(" ")
    if code not in ("0", "1", "2") or mac != sign(token, f"{nonce} {code} {line}"):
        return None
    return int(code), line


def read_address(path: str) -> tuple[int, str] | None:
    """``PORT TOKEN`` from the server's address file, if it is one this user can trust."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        status = os.fstat(descriptor)
        if (status.st_mode & 0o170000) != 0o100000 or status.st_uid not in (os.geteuid(), 0) \
                or status.st_mode & 0o022:
            return None
        words = os.read(descriptor, MAX_ADDRESS_BYTES).decode("ascii", "replace").split()
    except OSError:
        return None
    finally:
        os.close(descriptor)
    if len(words) < 2 or not words[0].isdigit() or not 0 < int(words[0]) < 65536 or not words[1].isalnum():
        return None
    return int(words[0]), words[1]


def ask_resident(argv: list[str]) -> tuple[int, str] | None:
    """The resident probe's exit code and line for ``burnin probe ARGV``, or None: then the one-shot probe runs."""
    parsed = parse_command_line(argv)
    if parsed is None:
        return None
    values, flags = parsed
    address = read_address(values.get("--address-file") or os.environ.get(ADDRESS_ENV) or DEFAULT_ADDRESS_FILE)
    if address is None:
        return None
    options = client_options_key(values)
    if options is None:
        return None
    port, token = address
    nonce = os.urandom(16).hex()
    reply = _exchange(port, request_line(token, nonce, options, flags) + "\n", wait_seconds(os.environ.get(WAIT_ENV)))
    return None if reply is None else read_reply(reply, token, nonce)


def wait_seconds(text: str | None) -> float:
    """``$BURNIN_PROBE_WAIT``: how long to wait for the resident probe's answer; the default (60 s) for anything
    but a positive number of seconds under a week."""
    try:
        wait = float(text or DEFAULT_WAIT_S)
    except ValueError:
        return DEFAULT_WAIT_S
    return wait if 0 < wait < 7 * 24 * 3600 else DEFAULT_WAIT_S


def _exchange(port: int, request: str, wait: float) -> str | None:
    """Send the request to 127.0.0.1:PORT and read one line back within ``wait`` seconds; None on any failure."""
    import _socket

    deadline = time.monotonic() + wait
    connection = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    try:
        connection.settimeout(wait)
        connection.connect(("127.0.0.1", port))
        connection.sendall(request.encode("ascii"))
        data = b""
        while b"\n" not in data and len(data) < MAX_REPLY_BYTES:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            connection.settimeout(left)
            chunk = connection.recv(MAX_REPLY_BYTES)
            if not chunk:
                return None
            data += chunk
    except OSError:  # refused, reset, timed out (socket.timeout is an OSError)
        return None
    finally:
        connection.close()
    line, newline, _ = data.partition(b"\n")
    return line.decode("utf-8", "replace") if newline else None
