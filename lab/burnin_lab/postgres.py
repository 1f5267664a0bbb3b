"""A real PostgreSQL server on loopback for the history's PostgreSQL tier (Debian's ``postgresql``).

``up(DIR)`` makes a cluster under DIR with ``initdb`` (as the ``postgres`` user when run as root: the server
refuses to run as root), starts it on 127.0.0.1 at a free port with its socket in DIR, and creates:

- ``burnin`` (password ``PASSWORD``), owner of the ``burnin`` database: what a fleet's controllers use;
- ``stranger`` (password ``PASSWORD``), who may log in but holds no right on ``burnin``'s database.

Clients must give a password over TCP (scram-sha-256); only the admin connects through the socket.
``down(server)`` stops it (``pg_ctl stop -m fast``). Nothing outside DIR is read or written.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

PASSWORD = "not-a-secret-9f3"  # noqa: S105 - a throw-away cluster on loopback, for tests
ADMIN = "postgres"
START_TIMEOUT_S = 120
"""pg_ctl's wait for the server to accept connections (a failure limit: a loaded machine is slow)."""


class PostgresLabError(RuntimeError):
    """The PostgreSQL lab could not be started."""


@dataclass(frozen=True)
class Server:
    folder: Path
    port: int
    bin_dir: Path
    run_as: str | None

    def url(self, user: str = "burnin", database: str = "burnin", password: str = PASSWORD) -> str:
        return f"postgresql://{user}:{password}@127.0.0.1:{self.port}/{database}"

    @property
    def socket_dir(self) -> Path:
        return self.folder / "socket"


def find_bin_dir() -> Path | None:
    """Debian's versioned folder (/usr/lib/postgresql/N/bin, the newest), else the folder of ``initdb`` on PATH."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4])
                   if p.split("/")[4].isdigit() else 0)
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).resolve().parent if initdb else None


def missing() -> str | None:
    """Why the lab cannot start here (None: it can)."""
    bin_dir = find_bin_dir()
    if bin_dir is None or not (bin_dir / "pg_ctl").exists():
        return "PostgreSQL's initdb and pg_ctl are not installed (apt-get install postgresql)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(ADMIN)
        except KeyError:
            return "running as root needs the postgres user (Debian's postgresql package creates it)"
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run(argv: list[str], run_as: str | None, *, timeout: float = 300) -> str:
    if run_as is not None:
        argv = ["runuser", "-u", run_as, "--", *argv]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise PostgresLabError(f"{' '.join(argv)} exited {proc.returncode}: {(proc.stderr or proc.stdout)[-800:]}")
    return proc.stdout


def up(folder: Path) -> Server:
    """Make and start a cluster in ``folder`` (see the module's docstring); as root, the postgres user must be
    able to reach ``folder`` (a fresh folder in /tmp is: ``tempfile.mkdtemp()``)."""
    why = missing()
    if why is not None:
        raise PostgresLabError(why)
    bin_dir = find_bin_dir()
    assert bin_dir is not None
    run_as = ADMIN if os.geteuid() == 0 else None
    folder.mkdir(parents=True, exist_ok=True)
    data, sockets = folder / "data", folder / "socket"
    sockets.mkdir(exist_ok=True)
    password_file = folder / "admin-password"
    password_file.write_text(PASSWORD + "\n", encoding="utf-8")
    if run_as is not None:
        entry = pwd.getpwnam(run_as)
        for path in (folder, sockets, password_file):
            os.chown(path, entry.pw_uid, entry.pw_gid)
    _run([str(bin_dir / "initdb"), "-D", str(data), "-U", ADMIN, f"--pwfile={password_file}",
          "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8"], run_as)
    port = _free_port()
    options = f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={sockets} -c fsync=off"
    _run([str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(folder / "server.log"), "-o", options,
          "-w", "-t", str(START_TIMEOUT_S), "start"], run_as, timeout=START_TIMEOUT_S + 30)
    server = Server(folder, port, bin_dir, run_as)
    admin(server, f"CREATE ROLE burnin LOGIN PASSWORD '{PASSWORD}'",
          f"CREATE ROLE stranger LOGIN PASSWORD '{PASSWORD}'",
          "CREATE DATABASE burnin OWNER burnin",
          "REVOKE ALL ON DATABASE burnin FROM PUBLIC")
    return server


def admin(server: Server, *statements: str, database: str = "postgres") -> str:
    """Run SQL as the cluster's admin through its socket (psql)."""
    argv = [str(server.bin_dir / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", str(server.socket_dir),
            "-p", str(server.port), "-U", ADMIN, "-d", database, "-At"]
    for statement in statements:
        argv += ["-c", statement]
    return _run(argv, server.run_as)


def create_database(server: Server, name: str, owner: str = "burnin") -> str:
    """A fresh database owned by ``owner``; its URL as ``owner``."""
    admin(server, f'CREATE DATABASE "{name}" OWNER {owner}', f'REVOKE ALL ON DATABASE "{name}" FROM PUBLIC')
    return server.url(owner, name)


def down(server: Server) -> None:
    subprocess.run(([] if server.run_as is None else ["runuser", "-u", server.run_as, "--"])
                   + [str(server.bin_dir / "pg_ctl"), "-D", str(server.folder / "data"), "-m", "fast", "-w",
                      "stop"], capture_output=True, timeout=120, check=False)
