"""Reaching the database: store URLs, the SQLAlchemy engine with each dialect's set-up, and the schema check.

URLs
    A plain path (``/var/lib/msh/store.db``, ``store.db``) or ``sqlite:///path`` is an SQLite file (created
    if absent; its folder must exist). ``postgresql+psycopg://user:pass@host:5432/db`` is PostgreSQL with
    psycopg 3 (``postgresql://`` and ``postgres://`` mean the same; install the ``postgres`` extra); add
    ``?options=-csearch_path%3Dmyschema`` to keep the tables in a schema of their own. Anything else (an
    unknown database or driver, an in-memory SQLite database, a folder that does not exist, a server that
    does not answer) is a :class:`~msh.errors.ConfigurationError` naming the store URL.

SQLite
    Every connection is set up by a connect listener: ``journal_mode=WAL`` (readers never wait for the
    writer), ``synchronous=FULL`` (a commit is on disk when it returns: a crash, even of the machine, loses
    no committed transaction), ``foreign_keys=ON`` and ``busy_timeout`` (30 s: a writer waits for another
    rather than failing). The driver's own transaction handling is turned off and each transaction starts
    with ``BEGIN IMMEDIATE`` (plain ``BEGIN`` when read-only, marked with the :data:`READONLY` execution
    option), so writers queue up at the start instead of failing when a read turns into a write.

PostgreSQL
    A connect timeout (10 s unless the URL sets one) and pre-ping of pooled connections. Concurrent
    upgrades of the schema are serialised by an advisory lock (:mod:`msh.store.migrations`).
"""

from __future__ import annotations

import importlib.util
import sqlite3
import time
from pathlib import Path
from typing import Any, Final

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError

from msh.errors import ConfigurationError
from msh.store import migrations

__all__ = ["PG_CONNECT_TIMEOUT_S", "READONLY", "SQLITE_BUSY_TIMEOUT_MS", "connect", "reason", "resolve_url"]

SQLITE_BUSY_TIMEOUT_MS: Final = 30_000
PG_CONNECT_TIMEOUT_S: Final = 10
READONLY: Final = "msh_readonly"
"""The execution option of a connection whose transactions only read (SQLite: plain ``BEGIN``)."""

_URL_HELP: Final = (
    "give a file path for an SQLite store (e.g. /var/lib/msh/store.db), sqlite:///path, "
    "or postgresql+psycopg://user@host:5432/database"
)


# ------------------------------------------------------------------------------------------------- URLs


def resolve_url(url: str) -> URL:
    """The SQLAlchemy URL for a store URL or path; :class:`ConfigurationError` says what is wrong."""
    text = url.strip() if isinstance(url, str) else ""
    if not text:
        raise ConfigurationError(f"store URL is empty: {_URL_HELP}")
    if "://" not in text and not text.lower().startswith("sqlite:"):
        return _sqlite_file(Path(text).expanduser(), text)
    try:
        parsed = make_url(text)
    except (ArgumentError, ValueError) as exc:
        raise ConfigurationError(f"store URL {text!r} cannot be read ({exc}): {_URL_HELP}") from None
    backend, _, driver = parsed.drivername.partition("+")  # (get_driver_name() would load the dialect)
    shown = parsed.render_as_string(hide_password=True)
    if backend == "sqlite":
        if parsed.drivername not in ("sqlite", "sqlite+pysqlite"):
            raise ConfigurationError(f"store URL {shown!r}: the SQLite driver must be pysqlite (sqlite:///path)")
        if not parsed.database or parsed.database == ":memory:" or parsed.database.startswith("file:"):
            raise ConfigurationError(
                f"store URL {shown!r} names no database file: an SQLite store is a file (sqlite:///path/store.db); "
                "use 'memory:' for a store that lives in memory"
            )
        return _sqlite_file(Path(parsed.database).expanduser(), shown)
    if backend in ("postgresql", "postgres"):
        if parsed.drivername not in ("postgresql", "postgres", "postgresql+psycopg"):
            raise ConfigurationError(
                f"store URL {shown!r}: driver {driver!r} is not supported; use postgresql+psycopg:// (psycopg 3)"
            )
        if importlib.util.find_spec("psycopg") is None:
            raise ConfigurationError(
                f"store URL {shown!r} needs psycopg 3, which is not installed: pip install 'pymsh[postgres]'"
            )
        return parsed.set(drivername="postgresql+psycopg")
    raise ConfigurationError(f"store URL {shown!r}: database {backend!r} is not supported; {_URL_HELP}")


def _sqlite_file(path: Path, shown: str) -> URL:
    path = path.resolve()
    if path.is_dir():
        raise ConfigurationError(f"store URL {shown!r} is a folder; give the path of the database file in it")
    if not path.parent.is_dir():
        raise ConfigurationError(
            f"store URL {shown!r}: the folder {str(path.parent)!r} does not exist; create it or choose another path"
        )
    return URL.create("sqlite+pysqlite", database=str(path))


# ----------------------------------------------------------------------------------------------- engine


def _sqlite_engine(url: URL) -> Engine:
    engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take transactions out of the driver's hands: BEGIN is emitted in _on_begin.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
            _enable_wal(cursor)
            cursor.execute("PRAGMA synchronous=FULL")
            cursor.execute("PRAGMA foreign_keys=ON")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        readonly = connection.get_execution_options().get(READONLY, False)
        # On the driver's connection: SQLAlchemy's execution machinery would cost more than the BEGIN itself,
        # once per transaction (a driver error here is the store's to report: msh.store.sql.store).
        connection.connection.driver_connection.execute("BEGIN" if readonly else "BEGIN IMMEDIATE")  # type: ignore[union-attr]

    return engine


def _enable_wal(cursor: Any) -> None:
    """Switch the database file to WAL (once: the mode is stored in the file).

    Connections that open a new file at the same moment race for the switch, and SQLite answers the
    losers "database is locked" at once, without waiting for the busy timeout: they try again, for at
    most the busy timeout.
    """
    if str(cursor.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal":
        return
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            if str(cursor.execute("PRAGMA journal_mode=WAL").fetchone()[0]).lower() == "wal":
                return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc):
                raise
        if time.monotonic() > deadline:
            return  # _check_connection reports a database that is not in WAL mode
        time.sleep(0.01)


def _postgres_engine(url: URL) -> Engine:
    connect_args: dict[str, Any] = {}
    if "connect_timeout" not in url.query:
        connect_args["connect_timeout"] = PG_CONNECT_TIMEOUT_S
    return create_engine(url, pool_pre_ping=True, connect_args=connect_args)


# ----------------------------------------------------------------------------------------------- connect


def connect(url: str, *, migrate: bool) -> Engine:
    """The engine of the database at ``url``, connected once and its schema brought up to date (without
    ``migrate``, a schema that is not at the newest revision is a :class:`ConfigurationError`)."""
    resolved = resolve_url(url)
    shown = resolved.render_as_string(hide_password=True)
    try:
        engine = _sqlite_engine(resolved) if resolved.get_backend_name() == "sqlite" else _postgres_engine(resolved)
    except (ArgumentError, NoSuchModuleError, ImportError) as exc:
        raise ConfigurationError(f"store URL {shown!r} cannot be used: {exc}") from None
    try:
        current = _check_connection(engine, shown)
        if migrate:
            try:
                migrations.upgrade(engine)
            except DBAPIError as exc:
                raise ConfigurationError(
                    f"upgrading the store at {shown!r} to schema revision {migrations.head_revision()!r} "
                    f"failed: {reason(exc)}; nothing was changed (the upgrade is one transaction). Give the "
                    "store a database (or PostgreSQL schema) of its own that holds only the MSH's tables"
                ) from None
        elif current != migrations.head_revision():
            raise ConfigurationError(
                f"the store at {shown!r} is at schema revision {current!r}, not {migrations.head_revision()!r}: "
                "open it with migrate=True (the default) to upgrade it"
            )
    except BaseException:
        engine.dispose()
        raise
    return engine


def _check_connection(engine: Engine, shown: str) -> str | None:
    """Connect once (a clear error if that fails); the schema revision found."""
    try:
        with engine.connect() as connection:
            connection.exec_driver_sql("SELECT 1")
            if engine.dialect.name == "sqlite":
                mode = connection.exec_driver_sql("PRAGMA journal_mode").scalar()
                if str(mode).lower() != "wal":
                    raise ConfigurationError(
                        f"store URL {shown!r}: SQLite refused WAL mode (journal_mode is {mode}); "
                        "put the database file on a local file system"
                    )
            current = migrations.current_revision(connection)
            connection.rollback()
            return current
    except DBAPIError as exc:
        raise ConfigurationError(
            f"cannot use the store at {shown!r}: {reason(exc)}; check that the database server runs and "
            "that the URL's host, port, user, password and database are right"
        ) from None


def reason(exc: DBAPIError) -> str:
    """The driver's message on one line."""
    return " ".join(str(exc.orig).split()) or " ".join(str(exc).split())
