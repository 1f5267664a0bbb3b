"""The two databases the fleet's memory can live in: one SQLite file (the default, no server) or PostgreSQL
(``postgresql://...``, for fleets with several controllers writing one history).

:class:`Connection` is what :class:`burnin.history.store.Store` and the readers talk to: ``execute`` and
``executemany`` with SQLite's ``?`` placeholders, explicit transactions (``begin``/``commit``/``rollback``),
the schema version and a lock for migrating it. The SQL the store writes is the portable subset of both
(``INSERT ... ON CONFLICT``, ``RETURNING``); what differs is kept here: the placeholders, the column types of
the migrations (:func:`postgres_ddl`), SQLite's ``INDEXED BY`` hint, the schema version (``PRAGMA
user_version`` against a one-row table) and the migration lock (``BEGIN IMMEDIATE`` against an advisory
lock). Every database error leaves here as a :class:`HistoryError` naming the database and the cause, so a
history that breaks mid-way is one line, never a traceback.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from burnin.errors import UsageError
from burnin.text import printable

BUSY_TIMEOUT_MS = 30_000
URL_SCHEMES = ("postgresql://", "postgres://")
CONNECT_TIMEOUT_S = 10
"""How long a PostgreSQL server may take to answer before the history is refused (a failure limit)."""
MIGRATION_LOCK = 0x6275726E  # "burn": the advisory lock key the migrating writer holds in PostgreSQL


class HistoryError(UsageError):
    """The history cannot be used (unreadable, not SQLite, newer schema, no server): one line, exit 2."""


class DatabaseError(HistoryError):
    """What the database's driver said went wrong (``why``: its first line)."""

    def __init__(self, label: str, why: str) -> None:
        super().__init__(f"history {label}: {why}")
        self.why = why


Target = Path | str
"""A history: a SQLite file's path, or a PostgreSQL URL (:func:`is_url`)."""


def is_url(target: Target) -> bool:
    return isinstance(target, str) and target.lower().startswith(URL_SCHEMES)


def shown(target: Target) -> str:
    """How a history is named in messages: a path as it is, a URL without its password."""
    if not is_url(target):
        return printable(str(target), limit=200)
    parts = urlsplit(str(target))
    netloc = parts.netloc
    if "@" in netloc:
        credentials, _, host = netloc.rpartition("@")
        user = credentials.partition(":")[0]
        netloc = f"{user}@{host}" if user else host
    return printable(urlunsplit((parts.scheme, netloc, parts.path, "", "")), limit=200)


def cause(exc: BaseException) -> str:
    """The first line of what went wrong (psycopg's messages run to several lines)."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    text = str(exc).strip() or type(exc).__name__
    return printable(text.splitlines()[0] if text else text, limit=300)


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    """One open history database (see the module's docstring)."""

    label: str

    def execute(self, sql: str, params: Sequence[object] = ()) -> Cursor: ...

    def executemany(self, sql: str, rows: Iterable[Sequence[object]]) -> Cursor: ...

    def begin(self) -> None: ...

    def begin_migration(self) -> None: ...

    def commit(self) -> None: ...

    def rollback(self) -> None: ...

    def schema_version(self) -> int: ...

    def set_schema_version(self, version: int) -> None: ...

    def run_migration(self, text: str) -> None: ...

    def close(self) -> None: ...


class _Errors:
    """A context that turns the driver's errors into HistoryError naming the database."""

    def __init__(self, label: str, kinds: tuple[type[BaseException], ...]) -> None:
        self.label, self.kinds = label, kinds

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc is not None and isinstance(exc, self.kinds):
            raise DatabaseError(self.label, cause(exc)) from None


class SqliteConnection:
    """A history file, in WAL mode with a busy timeout, so several writers share it without losing a row."""

    def __init__(self, path: Path, *, create: bool) -> None:
        self.label = shown(path)
        if not create and not path.exists():
            raise HistoryError(f"history {self.label}: no such file (no run recorded yet?)")
        try:
            if create:
                path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                                      check_same_thread=False)
        except (OSError, sqlite3.Error) as exc:
            raise HistoryError(f"history {self.label}: cannot open ({cause(exc)})") from None
        self._errors = _Errors(self.label, (sqlite3.Error,))
        try:
            self.db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        except sqlite3.Error as exc:
            self.db.close()
            raise HistoryError(f"history {self.label}: cannot be used ({cause(exc)})") from None

    def tune(self) -> None:
        """After the migration (which reads the header first: a file that is no SQLite fails there)."""
        with self._errors:
            self.db.execute("PRAGMA journal_mode = WAL")
            self.db.execute("PRAGMA synchronous = NORMAL")
            self.db.execute("PRAGMA foreign_keys = OFF")

    def execute(self, sql: str, params: Sequence[object] = ()) -> Cursor:
        with self._errors:
            return self.db.execute(sql, tuple(params))

    def executemany(self, sql: str, rows: Iterable[Sequence[object]]) -> Cursor:
        with self._errors:
            return self.db.executemany(sql, rows)

    def begin(self) -> None:
        with self._errors:
            self.db.execute("BEGIN IMMEDIATE")  # the write lock now, not at the first write: no upgrade deadlock

    def begin_migration(self) -> None:
        self.begin()  # one migrating writer at a time; the others wait, then see it done

    def commit(self) -> None:
        with self._errors:
            self.db.execute("COMMIT")

    def rollback(self) -> None:
        try:
            self.db.execute("ROLLBACK")
        except sqlite3.Error:
            pass

    def schema_version(self) -> int:
        with self._errors:
            return int(self.db.execute("PRAGMA user_version").fetchone()[0])

    def set_schema_version(self, version: int) -> None:
        with self._errors:
            self.db.execute(f"PRAGMA user_version = {int(version)}")

    def run_migration(self, text: str) -> None:
        for statement in text.split(";"):
            if statement.strip():
                self.execute(statement)

    def close(self) -> None:
        self.db.close()


_PLACEHOLDER = re.compile(r"\?")
_INDEX_HINT = re.compile(r"\s+INDEXED BY\s+\w+", re.IGNORECASE)
_DDL_TYPES = (
    (re.compile(r"\bINTEGER PRIMARY KEY\b"), "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"),
    (re.compile(r"\bINTEGER\b"), "BIGINT"),
    (re.compile(r"\bREAL\b"), "DOUBLE PRECISION"),
    (re.compile(r"\)\s*WITHOUT ROWID"), ")"),
)


def postgres_sql(sql: str) -> str:
    """A statement of the store's SQL for PostgreSQL: ``%s`` placeholders, no SQLite index hint."""
    return _PLACEHOLDER.sub("%s", _INDEX_HINT.sub("", sql.replace("%", "%%")))


def postgres_ddl(migration: str) -> str:
    """A migration's DDL for PostgreSQL: 64-bit integers, identity keys, double precision, no ``WITHOUT ROWID``."""
    for pattern, replacement in _DDL_TYPES:
        migration = pattern.sub(replacement, migration)
    return migration


class PostgresConnection:
    """A PostgreSQL database (psycopg 3, autocommit with explicit transactions, like the SQLite one)."""

    def __init__(self, url: str) -> None:
        self.label = shown(url)
        try:
            import psycopg
        except ImportError:
            raise HistoryError(f"history {self.label}: PostgreSQL needs psycopg "
                               "(pip install 'burnin[postgresql]')") from None
        self._psycopg = psycopg
        self._errors = _Errors(self.label, (psycopg.Error,))
        where = urlsplit(url)
        try:
            self.db = psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S,
                                      application_name="burnin")
        except psycopg.Error as exc:
            host = f"{where.hostname or 'localhost'}:{where.port or 5432}"
            raise HistoryError(f"history {self.label}: cannot connect to {host} ({cause(exc)})") from None
        except (ValueError, OSError) as exc:
            raise HistoryError(f"history {self.label}: not a usable URL ({cause(exc)})") from None

    def execute(self, sql: str, params: Sequence[object] = ()) -> Cursor:
        with self._errors:
            return self.db.execute(postgres_sql(sql), tuple(params))

    def executemany(self, sql: str, rows: Iterable[Sequence[object]]) -> Cursor:
        with self._errors:
            cursor = self.db.cursor()
            cursor.executemany(postgres_sql(sql), list(rows))
            return cursor

    def begin(self) -> None:
        with self._errors:
            self.db.execute("BEGIN")

    def begin_migration(self) -> None:
        self.begin()
        with self._errors:
            self.db.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))

    def commit(self) -> None:
        with self._errors:
            self.db.execute("COMMIT")

    def rollback(self) -> None:
        try:
            self.db.execute("ROLLBACK")
        except self._psycopg.Error:
            pass

    def schema_version(self) -> int:
        with self._errors:
            # a scan of the catalog with this statement's snapshot, not to_regclass: that one answers from the
            # session's cache, which keeps "no such table" from before another writer's migration committed
            row = self.db.execute("SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname = "
                                  "current_schema() AND tablename = 'burnin_schema')").fetchone()
            if row is None or not row[0]:
                return 0
            found = self.db.execute("SELECT max(version) FROM burnin_schema").fetchone()
            return int(found[0]) if found is not None and found[0] is not None else 0

    def set_schema_version(self, version: int) -> None:
        with self._errors:
            self.db.execute("CREATE TABLE IF NOT EXISTS burnin_schema (version BIGINT NOT NULL)")
            self.db.execute("DELETE FROM burnin_schema")
            self.db.execute("INSERT INTO burnin_schema (version) VALUES (%s)", (int(version),))

    def run_migration(self, text: str) -> None:
        for statement in postgres_ddl(text).split(";"):
            if statement.strip():
                with self._errors:
                    self.db.execute(statement)

    def close(self) -> None:
        self.db.close()


def connect(target: Target, *, create: bool) -> SqliteConnection | PostgresConnection:
    """Open the history at ``target`` (a path, or a ``postgresql://`` URL: ``create`` is moot there)."""
    if is_url(target):
        return PostgresConnection(str(target))
    return SqliteConnection(Path(target), create=create)
