"""The fleet's memory: one SQLite file under the state directory (``history.sqlite``), or a PostgreSQL
database (``--history postgresql://...`` or ``$BURNIN_HISTORY``) for fleets with several controllers.

Every run records its verdicts (with the measured value where the check measured a number), its gate
decisions and the gate actions, so that ``burnin history NODE``, ``burnin diff`` and ``burnin reliability``
can answer from it. WAL mode and a busy timeout let several writers (two runs, an import, the watch) share
the file without losing a row; each writer's transactions are short (one node's verdicts at a time).

The schema is versioned (SQLite's ``PRAGMA user_version``, PostgreSQL's ``burnin_schema`` table) and
migrated forward by :data:`MIGRATIONS`, one transaction each, under a write lock (two processes opening a new
database migrate it once; :mod:`burnin.history.backend` keeps what differs between the two databases). A
database this burnin cannot use (not SQLite, unreadable, no permission, no server) or written by a newer burnin
(a schema version above :data:`SCHEMA_VERSION`) is a :class:`HistoryError` naming it and the cause; it is
never migrated backwards.

Names (nodes, checks, units) are stored once each and referred to by number; a name that is no valid
Unicode text or is absurdly long is stored as its printable form (:func:`safe_text`), so a hostile record
can never stop a write.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from burnin.history.backend import DatabaseError, HistoryError, Target, connect, is_url
from burnin.text import printable

HISTORY_FILE = "history.sqlite"
HISTORY_ENV = "BURNIN_HISTORY"
"""A history file to use instead of the state directory's, or ``off`` (runs record nothing)."""
OFF = "off"
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
    # 2: the watch's incidents as they happen, whether or not they took an action
    """
    CREATE TABLE incidents (
        id INTEGER PRIMARY KEY,
        at REAL NOT NULL,
        node INTEGER NOT NULL,
        kind TEXT NOT NULL,
        check_id TEXT NOT NULL DEFAULT '',
        action TEXT NOT NULL DEFAULT '',
        detail TEXT NOT NULL DEFAULT '',
        source TEXT NOT NULL DEFAULT '',
        origin TEXT UNIQUE
    );
    CREATE INDEX incidents_by_node ON incidents (node, at);
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)


__all__ = ["HistoryError", "Store", "Target", "default_path", "open_history"]


def default_path() -> Target | None:
    """``$BURNIN_HISTORY`` (a file or a ``postgresql://`` URL), else ``history.sqlite`` in burnin's state
    directory; None when set to ``off``."""
    configured = os.environ.get(HISTORY_ENV, "").strip()
    if configured.lower() == OFF:
        return None
    if configured:
        return configured if is_url(configured) else Path(configured)
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


class Store:
    """An open history file (schema at :data:`SCHEMA_VERSION`)."""

    def __init__(self, target: Target, *, create: bool = True) -> None:
        """Open (``create``: and make a missing file, with its folder) the history; HistoryError when it cannot
        be used."""
        self.db = connect(target, create=create)
        self.path = self.db.label
        """How the history is named in messages (a URL without its password)."""
        try:
            self._migrate()
            tune = getattr(self.db, "tune", None)
            if tune is not None:
                tune()
        except DatabaseError as exc:
            self.db.close()
            raise HistoryError(f"history {self.path}: cannot be used ({exc.why})") from None
        except BaseException:
            self.db.close()
            raise
        self._names: dict[tuple[str, str], int] = {}

    def _migrate(self) -> None:
        version = self.db.schema_version()  # reads the header: a file that is not SQLite fails here
        if version > SCHEMA_VERSION:
            raise HistoryError(f"history {self.path}: written by a newer burnin (schema {version}; "
                               f"this burnin reads up to {SCHEMA_VERSION}); not touched")
        if version == SCHEMA_VERSION:
            return
        self.db.begin_migration()  # one migrating writer at a time; the others wait, then see it done
        try:
            version = self.db.schema_version()
            if version > SCHEMA_VERSION:
                raise HistoryError(f"history {self.path}: written by a newer burnin (schema {version})")
            for number in range(version, SCHEMA_VERSION):
                self.db.run_migration(MIGRATIONS[number])
            self.db.set_schema_version(SCHEMA_VERSION)
            self.db.commit()
        except BaseException:
            self.db.rollback()
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
        if row is None:  # new: added here, or by another writer since (then nothing returns: read it again)
            row = self.db.execute(f"INSERT INTO {table} (name) VALUES (?) ON CONFLICT DO NOTHING RETURNING id",  # noqa: S608
                                  (text,)).fetchone()
        if row is None:
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
        row = self.db.execute(
            "INSERT INTO runs (kind, started, out_dir, topology, host, pid, nodes, origin) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (kind, started, safe_text(out_dir), safe_text(topology, NAME_LIMIT), safe_text(host, NAME_LIMIT),
             pid, nodes, None if origin is None else safe_text(origin))).fetchone()
        return int(row[0])

    def add_verdicts(self, run: int, rows: Iterable[tuple[str, str, str, float | None, str | None,
                                                          str, str, str]]) -> int:
        """Verdicts of ``run`` as ``(node, check, status, value, unit, measured, expected, reason)``, in one
        transaction; a verdict already recorded for the node and check is kept. Returns how many were new."""
        node_ids: dict[str, int] = {}
        check_ids: dict[str, int] = {}
        unit_ids: dict[str, int] = {}
        self.db.begin()
        try:
            prepared = []
            for node, check, status, value, unit, measured, expected, reason in rows:
                code = STATUS_CODES.get(status, INCOMPLETE)
                detail = None
                if code != PASS:
                    detail = int(self.db.execute(
                        "INSERT INTO details (measured, expected, reason) VALUES (?, ?, ?) RETURNING id",
                        (safe_text(measured), safe_text(expected), safe_text(reason))).fetchone()[0])
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
                "INSERT INTO verdicts (run, node, check_id, status, value, unit, detail) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING", prepared)
            added = max(0, cursor.rowcount)
            self.db.commit()
        except BaseException:
            self.db.rollback()
            raise
        return added

    def finish_run(self, run: int, *, finished: float,
                   decisions: Sequence[tuple[str, bool, Sequence[str], Sequence[str], str]],
                   partial: bool = False, interrupted: bool = False, dry_run: bool = False) -> None:
        """The run's gate decisions ``(node, admitted, failed, incomplete, reason)`` and its end, at once."""
        self.db.begin()
        try:
            self.db.executemany(
                "INSERT INTO decisions (run, node, admitted, failed, incomplete, reason) VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (run, node) DO UPDATE SET admitted = excluded.admitted, failed = excluded.failed, "
                "incomplete = excluded.incomplete, reason = excluded.reason",
                [(run, self.name_id("node_names", node), int(admitted),
                  ",".join(safe_text(c, NAME_LIMIT) for c in failed),
                  ",".join(safe_text(c, NAME_LIMIT) for c in incomplete), safe_text(reason))
                 for node, admitted, failed, incomplete, reason in decisions])
            self.db.execute("UPDATE runs SET finished = ?, partial = ?, interrupted = ?, dry_run = ?, "
                            "nodes = CASE WHEN nodes > ? THEN nodes ELSE ? END WHERE id = ?",
                            (finished, int(partial), int(interrupted), int(dry_run), len(decisions),
                             len(decisions), run))
            self.db.commit()
        except BaseException:
            self.db.rollback()
            raise

    def add_action(self, *, at: float, node: str, action: str, check_ids: Sequence[str] = (), reason: str = "",
                   source: str = "", run: int | None = None, origin: str | None = None) -> bool:
        """A gate action (drain, resume, evict, taint) on a node; False when ``origin`` was recorded before."""
        cursor = self.db.execute(
            "INSERT INTO actions (at, node, action, check_ids, reason, source, run, origin) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (at, self.name_id("node_names", node), safe_text(action, NAME_LIMIT),
             ",".join(safe_text(c, NAME_LIMIT) for c in check_ids), safe_text(reason), safe_text(source),
             run, None if origin is None else safe_text(origin)))
        return cursor.rowcount > 0

    def add_incident(self, *, at: float, node: str, kind: str, check_id: str = "", action: str = "", detail: str = "",
                     source: str = "", origin: str | None = None) -> bool:
        """A watch incident (an Xid, a link down, a stall...) and what the watch did about it, taken or not;
        False when ``origin`` was recorded before."""
        cursor = self.db.execute(
            "INSERT INTO incidents (at, node, kind, check_id, action, detail, source, origin) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (at, self.name_id("node_names", node), safe_text(kind, NAME_LIMIT), safe_text(check_id, NAME_LIMIT),
             safe_text(action, NAME_LIMIT), safe_text(detail), safe_text(source),
             None if origin is None else safe_text(origin)))
        return cursor.rowcount > 0

    def run_with_origin(self, origin: str) -> int | None:
        row = self.db.execute("SELECT id FROM runs WHERE origin = ?", (safe_text(origin),)).fetchone()
        return None if row is None else int(row[0])



def open_history(path: Target | None = None, *, create: bool = False) -> Store:
    """The history to read (``path``, else :func:`default_path`); HistoryError when there is none to use."""
    target = path if path is not None else default_path()
    if target is None:
        raise HistoryError(f"no history: {HISTORY_ENV}=off (name one with --history FILE)")
    return Store(target, create=create)
