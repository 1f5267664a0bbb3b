"""Slurm accounting for the Slurm lab (``burnin_lab.slurm.up(accounting=True)``): a private MariaDB and a slurmdbd.

Debian's ``mariadb-server`` and ``slurmdbd`` (22.05, the release of slurm-wlm). Everything lives below the lab's
state folder (``DIR/slurmdbd``): MariaDB's data folder, made by ``mariadb-install-db`` at up-time; ``mariadbd``
as root (``--user=root``) on 127.0.0.1 at a free port, its socket in the folder; ``slurmdbd.conf`` next to
slurm.conf (where slurmdbd looks for it: the folder of ``SLURM_CONF``), mode 600, owned by the SlurmUser
(root), with ``StorageType=accounting_storage/mysql``; slurmctld's ``AccountingStorageType`` is then
``accounting_storage/slurmdbd``. The lab supervisor starts, in order: munged, mariadbd, a step that makes
slurmdbd's database user, slurmdbd, a step that registers the cluster (``sacctmgr -i add cluster``), slurmctld.

Off by default: the other Slurm labs run ``AccountingStorageType=accounting_storage/none`` and pay nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DAEMONS = ("mariadbd", "mariadb-install-db", "mariadb", "slurmdbd", "sacctmgr")
DATABASE = "slurm_acct_db"
DB_USER = "slurm"
DB_PASSWORD = "not-a-secret-4c1"  # noqa: S105 - a throw-away database on loopback, for tests
INSTALL_TIMEOUT = 180.0
"""mariadb-install-db within this (a failure limit: a loaded machine is slow)."""


class Accounting:
    """The paths and ports of the lab's accounting (below ``state/slurmdbd``)."""

    def __init__(self, state: Path, *, db_port: int, dbd_port: int) -> None:
        self.folder = state / "slurmdbd"
        self.data = self.folder / "mysql"
        self.socket = self.folder / "mysqld.sock"
        self.conf = state / "slurmdbd.conf"
        self.log = self.folder / "slurmdbd.log"
        self.db_port = db_port
        self.dbd_port = dbd_port


def missing_commands(search: str) -> list[str]:
    """MariaDB and slurmdbd programs the accounting lab needs that are not installed."""
    return [name for name in DAEMONS if shutil.which(name, path=search) is None]


def slurm_conf_lines(accounting: Accounting, munge_socket: Path) -> list[str]:
    """slurm.conf lines that send slurmctld's records (node events among them) to the lab's slurmdbd.

    ``AccountingStoragePass`` is the munge socket for connections to slurmdbd (``AuthInfo`` is not read for
    them: sacctmgr went to munge's default socket without it)."""
    return ["AccountingStorageType=accounting_storage/slurmdbd", "AccountingStorageHost=127.0.0.1",
            f"AccountingStoragePort={accounting.dbd_port}", f"AccountingStoragePass={munge_socket}"]


def slurmdbd_conf(accounting: Accounting, munge_socket: Path) -> str:
    """slurmdbd.conf text (pure). ``DbdHost=localhost``: slurmdbd accepts it on any host name."""
    return "\n".join([
        "# written by the burnin Slurm lab (accounting); every path is below the state folder",
        "AuthType=auth/munge",
        f"AuthInfo=socket={munge_socket}",
        "DbdHost=localhost",
        "DbdAddr=127.0.0.1",
        f"DbdPort={accounting.dbd_port}",
        "SlurmUser=root",
        "DebugLevel=info",
        f"LogFile={accounting.log}",
        f"PidFile={accounting.folder}/slurmdbd.pid",
        "StorageType=accounting_storage/mysql",
        "StorageHost=127.0.0.1",
        f"StoragePort={accounting.db_port}",
        f"StorageUser={DB_USER}",
        f"StoragePass={DB_PASSWORD}",
        f"StorageLoc={DATABASE}",
    ]) + "\n"


def prepare(accounting: Accounting, munge_socket: Path) -> None:
    """A fresh MariaDB data folder and slurmdbd.conf (mode 600, owned by root, the SlurmUser)."""
    shutil.rmtree(accounting.folder, ignore_errors=True)
    accounting.folder.mkdir(parents=True)
    result = subprocess.run(["mariadb-install-db", "--no-defaults", f"--datadir={accounting.data}", "--user=root",
                             "--auth-root-authentication-method=socket", "--skip-test-db"],
                            capture_output=True, text=True, timeout=INSTALL_TIMEOUT, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"mariadb-install-db exited {result.returncode}: {(result.stderr or result.stdout)[-800:]}")
    accounting.conf.write_text(slurmdbd_conf(accounting, munge_socket), encoding="utf-8")
    accounting.conf.chmod(0o600)
    os.chown(accounting.conf, 0, 0)


def _mariadbd_argv(accounting: Accounting) -> list[str]:
    # No durability needed (a test's database): no flush per commit, no doublewrite, a small pool.
    return ["mariadbd", "--no-defaults", "--user=root", f"--datadir={accounting.data}",
            f"--socket={accounting.socket}", f"--port={accounting.db_port}", "--bind-address=127.0.0.1",
            "--skip-name-resolve", f"--pid-file={accounting.folder}/mariadbd.pid",
            "--innodb-flush-log-at-trx-commit=0", "--innodb-doublewrite=0", "--innodb-buffer-pool-size=64M",
            "--skip-log-bin"]


def database_user_sql() -> str:
    return (f"CREATE USER '{DB_USER}'@'127.0.0.1' IDENTIFIED BY '{DB_PASSWORD}'; "
            f"GRANT ALL ON {DATABASE}.* TO '{DB_USER}'@'127.0.0.1';")


def daemon_plan(accounting: Accounting, log_dir: Path, cluster: str) -> list[dict[str, Any]]:
    """The supervisor's entries between munged and slurmctld (``once``: a step run to its end, exit 0)."""
    return [
        {"name": "mariadbd", "log": str(log_dir / "mariadbd.out"), "ready": {"port": accounting.db_port},
         "argv": _mariadbd_argv(accounting)},
        {"name": "db-user", "log": str(log_dir / "db-user.out"), "once": True,
         "argv": ["mariadb", "--no-defaults", f"--socket={accounting.socket}", "-u", "root",
                  "-e", database_user_sql()]},
        {"name": "slurmdbd", "log": str(log_dir / "slurmdbd.out"), "ready": {"port": accounting.dbd_port},
         "argv": ["slurmdbd", "-D"]},
        {"name": "add-cluster", "log": str(log_dir / "add-cluster.out"), "once": True,
         "argv": ["sacctmgr", "-i", "add", "cluster", cluster]},
    ]


def stop_order(names: Sequence[str]) -> list[list[str]]:
    """After slurmctld: slurmdbd (which still writes to the database), then mariadbd."""
    return [[name] for name in ("slurmdbd", "mariadbd") if name in names]
