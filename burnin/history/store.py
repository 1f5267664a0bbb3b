"""The fleet's memory: one SQLite file under the state directory (``history.sqlite``).

Every run records its verdicts (with the measured value where the check measured a number), its gate
decisions and the gate actions, so that ``burnin history NODE``, ``burnin diff`` and ``burnin reliability``
can answer from it. WAL mode and a busy timeout let several writers (two runs, an import, the watch) share
the file without losing a row; each writer's transactions are short (one node's verdicts at a time).

The schema is versioned (``PRAGMA user_version``) and migrated forward by :data:`MIGRATIONS`, one
transaction each, under a write lock (two processes opening a new file migrate it once). A file this burnin
cannot read (not SQLite, unreadable, no permission) or written by a newer burnin (a schema version above
:data:`SCHEMA_VERSION`) is a :class:`HistoryError` naming the file and the cause; it is never migrated
backwards.

Names (nodes, checks, units) are stored once each and referred to by number; a name that is no valid
Unicode text or is absurdly long is stored as its printable form (:func:`safe_text`), so a hostile record
can never stop a write.
"""

from __future__ import annotations

import math
import os
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path

from burnin.errors import UsageError
from burnin.text import printable

HISTORY_FILE = "history.sqlite"
HISTORY_ENV = "BURNIN_HISTORY"
"""A history file to use instead of the state directory's, or ``off`` (runs record nothing)."""
OFF = "off"
BUSY_TIMEOUT_MS = 30_000
NAME_LIMIT = 255
TEXT_LIMIT = 2000

STATUS_CODES = {"pass": 0, "fail": 1, "incomplete": 2, "not-applicable": 3}
STATUS_NAMES = {code: name for name, code in STATUS_CODES.items()}
PASS, FAIL, INCOMPLETE, NOT_APPLICABLE = 0, 1, 2, 3

MIGRATIONS: tuple[str, ...] = (
    # 1: runs, their verdicts (value where measured, text only where it did not pass), decisions, gate actions
    """
    CREATE TABLE runs (
        id INTEGER PRIMARY KEY,
        kind TEXT NOT NULL,
        started REAL NOT NULL,
        finished REAL,
        out_dir TEXT NOT NULL DEFAULT '',
        topology TEXT NOT NULL DEFAULT '',
        host TEXT NOT NULL DEFAULT '',
        pid INTEGER,
        nodes INTEGER NOT NULL DEFAULT 0,
        partial INTEGER NOT NULL DEFAULT 0,
        interrupted INTEGER NOT NULL DEFAULT 0,
        dry_run INTEGER NOT NULL DEFAULT 0,
        origin TEXT UNIQUE
    );
    CREATE INDEX runs_by_time ON runs (started);
    CREATE TABLE node_names (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
    CREATE TABLE check_names (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
    CREATE TABLE unit_names (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
    CREATE TABLE details (id INTEGER PRIMARY KEY, measured TEXT NOT NULL, expected TEXT NOT NULL,
                          reason TEXT NOT NULL);
    CREATE TABLE verdicts (
        run INTEGER NOT NULL,
        node INTEGER NOT NULL,
        check_id INTEGER NOT NULL,
        status INTEGER NOT NULL,
        value REAL,
        unit INTEGER,
        detail INTEGER,
        PRIMARY KEY (run, node, check_id)
    ) WITHOUT ROWID;
    CREATE INDEX verdict_problems ON verdicts (check_id, run) WHERE status IN (1, 2);
    CREATE TABLE decisions (
        run INTEGER NOT NULL,
        node INTEGER NOT NULL,
        admitted INTEGER NOT NULL,
        failed TEXT NOT NULL DEFAULT '',
        incomplete TEXT NOT NULL DEFAULT '',
        reason TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (run, node)
    ) WITHOUT ROWID;
    CREATE INDEX decisions_by_node ON decisions (node, run);
    CREATE TABLE actions (
        id INTEGER PRIMARY KEY,
        at REAL NOT NULL,
        node INTEGER NOT NULL,
        action TEXT NOT NULL,
        check_ids TEXT NOT NULL DEFAULT '',
        reason TEXT NOT NULL DEFAULT '',
        source TEXT NOT NULL DEFAULT '',
        run INTEGER,
        origin TEXT UNIQUE
    );
    CREATE INDEX actions_by_node ON actions (node, at);
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)


class HistoryError(UsageError):
    """The history file cannot be used (unreadable, not SQLite, newer schema): one line, exit 2."""


def default_path() -> Path | None:
    """``$BURNIN_HISTORY``, else ``history.sqlite`` in burnin's state directory; None when set to ``off``."""
    configured = os.environ.get(HISTORY_ENV, "").strip()
    if configured.lower() == OFF:
        return None
    if configured:
        return Path(configured)
    from burnin.counters import state_dir

    return state_dir() / HISTORY_FILE


def safe_text(value: object, limit: int = TEXT_LIMIT) -> str:
    """Text SQLite can store and a terminal can show: control characters escaped, lone surrogates (a name
    that was no UTF-8) as ``\\udcff``, at most ``limit`` characters."""
    text = value if isinstance(value, str) else str(value)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return printable(text, limit=limit)


def finite(value: object) -> float | None:
    """A number SQLite keeps as it is (finite, not a boolean); None for NaN, infinities and anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _shown(path: Path) -> str:
    return printable(str(path), limit=200)


class Store:
    """An open history file (schema at :data:`SCHEMA_VERSION`)."""

    def __init__(self, path: Path, *, create: bool = True) -> None:
        """Open (``create``: and make, with its folder) the history; HistoryError when it cannot be used."""
        self.path = path
        if not create and not path.exists():
            raise HistoryError(f"history {_shown(path)}: no such file (no run recorded yet?)")
        try:
            if create:
                path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                                      check_same_thread=False)
        except (OSError, sqlite3.Error) as exc:
            raise HistoryError(f"history {_shown(path)}: cannot open ({_cause(exc)})") from None
        try:
            self.db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            self._migrate()
            self.db.execute("PRAGMA journal_mode = WAL")
            self.db.execute("PRAGMA synchronous = NORMAL")
            self.db.execute("PRAGMA foreign_keys = OFF")
        except sqlite3.Error as exc:
            self.db.close()
            raise HistoryError(f"history {_shown(path)}: cannot be used ({_cause(exc)})") from None
        except HistoryError:
            self.db.close()
            raise
        self._names: dict[tuple[str, str], int] = {}

    def _version(self) -> int:
        row = self.db.execute("PRAGMA user_version").fetchone()
        return int(row[0])

    def _migrate(self) -> None:
        version = self._version()  # reads the header: a file that is not SQLite fails here
        if version > SCHEMA_VERSION:
            raise HistoryError(f"history {_shown(self.path)}: written by a newer burnin (schema {version}; "
                               f"this burnin reads up to {SCHEMA_VERSION}); not touched")
        if version == SCHEMA_VERSION:
            return
        self.db.execute("BEGIN IMMEDIATE")  # one migrating writer at a time; the others wait, then see it done
        try:
            version = self._version()
            if version > SCHEMA_VERSION:
                raise HistoryError(f"history {_shown(self.path)}: written by a newer burnin (schema {version})")
            for number in range(version, SCHEMA_VERSION):
                for statement in MIGRATIONS[number].split(";"):
                    if statement.strip():
                        self.db.execute(statement)
            self.db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- names ---------------------------------------------------------------------------------

    def name_id(self, table: str, name: str) -> int:
        """The number of ``name`` in ``node_names``, ``check_names`` or ``unit_names`` (added if new)."""
        key = (table, name)
        found = self._names.get(key)
        if found is not None:
            return found
        text = safe_text(name, NAME_LIMIT)
        row = self.db.execute(f"SELECT id FROM {table} WHERE name = ?", (text,)).fetchone()  # noqa: S608
        if row is None:
            self.db.execute(f"INSERT OR IGNORE INTO {table} (name) VALUES (?)", (text,))  # noqa: S608
            row = self.db.execute(f"SELECT id FROM {table} WHERE name = ?", (text,)).fetchone()  # noqa: S608
        self._names[key] = int(row[0])
        return self._names[key]

    def find_name(self, table: str, name: str) -> int | None:
        """The number of an existing name (None: never recorded)."""
        row = self.db.execute(f"SELECT id FROM {table} WHERE name = ?",  # noqa: S608
                              (safe_text(name, NAME_LIMIT),)).fetchone()
        return None if row is None else int(row[0])

    def names(self, table: str) -> dict[int, str]:
        return {int(i): str(n) for i, n in self.db.execute(f"SELECT id, name FROM {table}")}  # noqa: S608

    # -- writing ---------------------------------------------------------------------------------

    def add_run(self, *, kind: str, started: float, out_dir: str = "", topology: str = "", host: str = "",
                pid: int | None = None, nodes: int = 0, origin: str | None = None) -> int:
        cursor = self.db.execute(
            "INSERT INTO runs (kind, started, out_dir, topology, host, pid, nodes, origin) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (kind, started, safe_text(out_dir), safe_text(topology, NAME_LIMIT), safe_text(host, NAME_LIMIT),
             pid, nodes, None if origin is None else safe_text(origin)))
        assert cursor.lastrowid is not None
        return int(cursor.lastrowid)

    def add_verdicts(self, run: int, rows: Iterable[tuple[str, str, str, float | None, str | None,
                                                          str, str, str]]) -> int:
        """Verdicts of ``run`` as ``(node, check, status, value, unit, measured, expected, reason)``, in one
        transaction; a verdict already recorded for the node and check is kept. Returns how many were new."""
        node_ids: dict[str, int] = {}
        check_ids: dict[str, int] = {}
        unit_ids: dict[str, int] = {}
        self.db.execute("BEGIN IMMEDIATE")
        try:
            prepared = []
            for node, check, status, value, unit, measured, expected, reason in rows:
                code = STATUS_CODES.get(status, INCOMPLETE)
                detail = None
                if code != PASS:
                    detail = self.db.execute(
                        "INSERT INTO details (measured, expected, reason) VALUES (?, ?, ?)",
                        (safe_text(measured), safe_text(expected), safe_text(reason))).lastrowid
                number = finite(value) if code in (PASS, FAIL) else None
                node_id = node_ids.get(node)
                if node_id is None:
                    node_id = node_ids[node] = self.name_id("node_names", node)
                check_id = check_ids.get(check)
                if check_id is None:
                    check_id = check_ids[check] = self.name_id("check_names", check)
                unit_id = None
                if number is not None and unit:
                    unit_id = unit_ids.get(unit)
                    if unit_id is None:
                        unit_id = unit_ids[unit] = self.name_id("unit_names", unit)
                prepared.append((run, node_id, check_id, code, number, unit_id, detail))
            cursor = self.db.executemany(
                "INSERT OR IGNORE INTO verdicts (run, node, check_id, status, value, unit, detail) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)", prepared)
            added = max(0, cursor.rowcount)
            self.db.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise
        return added

    def finish_run(self, run: int, *, finished: float,
                   decisions: Sequence[tuple[str, bool, Sequence[str], Sequence[str], str]],
                   partial: bool = False, interrupted: bool = False, dry_run: bool = False) -> None:
        """The run's gate decisions ``(node, admitted, failed, incomplete, reason)`` and its end, at once."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self.db.executemany(
                "INSERT OR REPLACE INTO decisions (run, node, admitted, failed, incomplete, reason) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(run, self.name_id("node_names", node), int(admitted),
                  ",".join(safe_text(c, NAME_LIMIT) for c in failed),
                  ",".join(safe_text(c, NAME_LIMIT) for c in incomplete), safe_text(reason))
                 for node, admitted, failed, incomplete, reason in decisions])
            self.db.execute("UPDATE runs SET finished = ?, partial = ?, interrupted = ?, dry_run = ?, "
                            "nodes = max(nodes, ?) WHERE id = ?",
                            (finished, int(partial), int(interrupted), int(dry_run), len(decisions), run))
            self.db.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise

    def add_action(self, *, at: float, node: str, action: str, check_ids: Sequence[str] = (), reason: str = "",
                   source: str = "", run: int | None = None, origin: str | None = None) -> bool:
        """A gate action (drain, resume, evict, taint) on a node; False when ``origin`` was recorded before."""
        cursor = self.db.execute(
            "INSERT OR IGNORE INTO actions (at, node, action, check_ids, reason, source, run, origin) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (at, self.name_id("node_names", node), safe_text(action, NAME_LIMIT),
             ",".join(safe_text(c, NAME_LIMIT) for c in check_ids), safe_text(reason), safe_text(source),
             run, None if origin is None else safe_text(origin)))
        return cursor.rowcount > 0

    def run_with_origin(self, origin: str) -> int | None:
        row = self.db.execute("SELECT id FROM runs WHERE origin = ?", (safe_text(origin),)).fetchone()
        return None if row is None else int(row[0])

    def _rollback(self) -> None:
        try:
            self.db.execute("ROLLBACK")
        except sqlite3.Error:
            pass


def _cause(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def open_history(path: Path | None = None, *, create: bool = False) -> Store:
    """The history to read (``path``, else :func:`default_path`); HistoryError when there is none to use."""
    target = path if path is not None else default_path()
    if target is None:
        raise HistoryError(f"no history: {HISTORY_ENV}=off (name one with --history FILE)")
    return Store(target, create=create)
