"""The lab's storage target and its client: STO-03's writes as real TCP traffic through a node's kernel routes.

In a kernel-network lab rack (burnin_lab.netns) the storage target lives in a
network namespace of its own and serves this tiny protocol on every storage
target address (one listening socket on the wildcard address):

- ``PUT <n>\\n`` then ``n`` bytes: the target reads and discards them, answers ``OK <n>\\n``;
- ``GET <n>\\n``: the target sends ``n`` zero bytes.

Each lab node runs the client in front of its simulated ``dd`` and ``fio``
(which still print the real tools' formats): a write to a file on a storage
mount sends as many bytes to that mount's target, a read fetches them, from
inside the node's namespace, so the kernel picks the route (a BlueField veth,
or an IPoIB one when a fault put the route there) and counts the bytes on that
interface. Files not on a storage mount move nothing.

Standard library only, runnable as a script by the node's own ``python3``::

    python3 netstore.py serve --port 2049
    python3 netstore.py client MOUNTS_JSON dd|fio ARG...
"""

from __future__ import annotations

import json
import os
import socket
import socketserver
import sys

PORT = 2049
CHUNK = 1 << 20
TIMEOUT_S = 60.0
_UNITS = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


# ------------------------------------------------------------------ server


class _Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        self.connection.settimeout(TIMEOUT_S)
        line = self.rfile.readline(64).decode("ascii", "replace").split()
        if len(line) != 2 or line[0] not in ("PUT", "GET") or not line[1].isdigit():
            self.wfile.write(b"ERR bad request\n")
            return
        size = int(line[1])
        if line[0] == "PUT":
            left = size
            while left:
                data = self.rfile.read(min(CHUNK, left))
                if not data:
                    return
                left -= len(data)
            self.wfile.write(f"OK {size}\n".encode())
            return
        zeros = bytes(CHUNK)
        left = size
        while left:
            step = min(CHUNK, left)
            self.wfile.write(zeros[:step])
            left -= step


class _Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


def serve(port: int) -> None:
    # Inside the lab's fabric namespace, whose only addresses are the storage targets and bridges.
    with _Server(("0.0.0.0", port), _Handler) as server:  # noqa: S104
        server.serve_forever()


# ------------------------------------------------------------------ client


def _size(text: str) -> int | None:
    text = text.strip().lower()
    if text[-1:] in _UNITS and text[:-1].isdigit():
        return int(text[:-1]) * _UNITS[text[-1]]
    return int(text) if text.isdigit() else None


def request(argv: list[str]) -> tuple[str, str, int] | None:
    """(``PUT``|``GET``, file path, bytes) for a dd or fio command line; None when it moves no file data."""
    tool, args = argv[0], argv[1:]
    if tool == "dd":
        opts = dict(a.split("=", 1) for a in args if "=" in a)
        block, count = _size(opts.get("bs", "512")), opts.get("count", "")
        if block is None or not count.isdigit():
            return None
        size = block * int(count)
        if opts.get("of") not in (None, "/dev/null"):
            return "PUT", opts["of"], size
        return ("GET", opts["if"], size) if "if" in opts else None
    if tool == "fio":
        opts = dict(a[2:].split("=", 1) for a in args if a.startswith("--") and "=" in a)
        total = _size(opts.get("size", ""))
        if total is None or "filename" not in opts or opts.get("rw") not in ("read", "write"):
            return None
        return ("PUT" if opts["rw"] == "write" else "GET"), opts["filename"], total
    return None


def target_for(path: str, mounts: dict[str, str]) -> str | None:
    """The storage target address of the mount holding ``path`` (the longest mount prefix)."""
    best: tuple[str, str] | None = None
    for mount, address in mounts.items():
        prefix = mount.rstrip("/") + "/"
        if path.startswith(prefix) and (best is None or len(mount) > len(best[0])):
            best = (mount, address)
    return best[1] if best else None


def transfer(address: str, verb: str, size: int, port: int = PORT) -> None:
    with socket.create_connection((address, port), timeout=TIMEOUT_S) as sock:
        sock.sendall(f"{verb} {size}\n".encode())
        if verb == "PUT":
            zeros = bytes(CHUNK)
            left = size
            while left:
                step = min(CHUNK, left)
                sock.sendall(zeros[:step])
                left -= step
            answer = sock.makefile("rb").readline(64)
            if answer.strip() != f"OK {size}".encode():
                raise OSError(f"storage target {address} answered {answer[:40]!r}")
            return
        left = size
        while left:
            data = sock.recv(min(CHUNK, left))
            if not data:
                raise OSError(f"storage target {address} closed after {size - left} of {size} bytes")
            left -= len(data)


def client(mounts_file: str, argv: list[str], port: int = PORT) -> int:
    wanted = request(argv)
    if wanted is None:
        return 0
    verb, path, size = wanted
    with open(mounts_file, encoding="utf-8") as fh:
        mounts = json.load(fh)
    address = target_for(path, mounts)
    if address is None:
        return 0
    try:
        transfer(address, verb, size, port)
    except OSError as exc:
        sys.stderr.write(f"{argv[0]}: {path}: storage target {address}: {exc}\n")
        return 1
    return 0


def main(argv: list[str]) -> int:
    if len(argv) >= 1 and argv[0] == "serve":
        port = int(argv[2]) if len(argv) >= 3 and argv[1] == "--port" else PORT
        serve(port)
        return 0
    if len(argv) >= 3 and argv[0] == "client":
        return client(argv[1], argv[2:])
    sys.stderr.write(f"usage: {os.path.basename(__file__)} serve [--port N] | client MOUNTS_JSON dd|fio ARG...\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
