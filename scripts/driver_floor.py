"""The floor under a store writer's CPU: the same SQL statements, with the same parameters and in the same
transactions, run through the database driver alone (``scripts/bench_store_steps.py --driver-floor``).

:func:`recording` makes every SQLite connection opened in its block record what the threads it is told
of run on it: each statement and its parameters (``execute``, ``executemany``) and each ``commit`` and
``rollback``, in order, by thread (a store writer's thread writes to its store's file only).
:func:`replay` runs such a record on a fresh store of the same schema through a plain ``sqlite3``
connection with the store's own settings (WAL, ``synchronous=FULL``, foreign keys) and returns the CPU time
it took. What a writer spends beyond that is the Python around the statements: the store's transaction
port, row conversions, SQLAlchemy's per-transaction work, the group commit and the hand-back of results
(docs/benchmarks.md, seventh round).
"""

from __future__ import annotations

import resource
import sqlite3
import sqlite3.dbapi2
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Record", "Replayed", "plain_connection", "recording", "replay"]

Call = tuple[str, str, Any]
"""One recorded call: its kind (``execute``, ``executemany``, ``commit``, ``rollback``), SQL and parameters."""


@dataclass
class Record:
    """The calls recorded in a :func:`recording` block, by thread name, in the order they ran."""

    calls: dict[str, list[Call]] = field(default_factory=dict)

    def add(self, thread: str, kind: str, sql: str, params: Any) -> None:
        self.calls.setdefault(thread, []).append((kind, sql, params))


def _kept(params: Any) -> Any:
    """A copy of a call's parameters that outlives it (a memoryview is read into bytes)."""
    if isinstance(params, dict):
        return {k: bytes(v) if isinstance(v, memoryview) else v for k, v in params.items()}
    return tuple(bytes(v) if isinstance(v, memoryview) else v for v in params)


@contextmanager
def recording(threads: Callable[[str], bool]) -> Iterator[Record]:
    """Record, on the SQLite connections opened in the block, the calls made by the threads whose name
    ``threads`` accepts. The driver's ``connect`` is put back after the block."""
    record = Record()

    def keep(kind: str, sql: str, params: Any) -> None:
        thread = threading.current_thread().name
        if threads(thread):
            record.add(thread, kind, sql, params)

    class Cursor(sqlite3.Cursor):
        def execute(self, sql: str, params: Any = (), /) -> Any:
            keep("execute", sql, _kept(params))
            return super().execute(sql, params)

        def executemany(self, sql: str, rows: Any, /) -> Any:
            rows = [_kept(row) for row in rows]
            keep("executemany", sql, rows)
            return super().executemany(sql, rows)

    class Connection(sqlite3.Connection):
        def cursor(self, factory: Any = Cursor) -> Any:
            return super().cursor(factory)

        def execute(self, sql: str, params: Any = (), /) -> Any:
            keep("execute", sql, _kept(params))
            return super().execute(sql, params)

        def commit(self) -> None:
            keep("commit", "", ())
            super().commit()

        def rollback(self) -> None:
            keep("rollback", "", ())
            super().rollback()

    real = sqlite3.dbapi2.connect

    def connect(*args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("factory", Connection)
        return real(*args, **kwargs)

    sqlite3.dbapi2.connect = connect  # what SQLAlchemy's pysqlite dialect calls
    try:
        yield record
    finally:
        sqlite3.dbapi2.connect = real


@dataclass(frozen=True)
class Replayed:
    """What a :func:`replay` took: the thread's CPU seconds (and the kernel's part), calls and failures."""

    cpu_seconds: float
    kernel_seconds: float
    calls: int
    failed: int


def plain_connection(path: Path) -> sqlite3.Connection:
    """A plain ``sqlite3`` connection to ``path`` with the store's settings (WAL, ``synchronous=FULL``, foreign
    keys; transactions begun and ended by the statements themselves)."""
    connection = sqlite3.connect(path, isolation_level=None)
    for pragma in ("journal_mode=WAL", "synchronous=FULL", "foreign_keys=ON"):
        connection.execute(f"PRAGMA {pragma}")
    return connection


def replay(calls: list[Call], fresh_store: Callable[[Path], None]) -> Replayed:
    """Run ``calls`` on a new database file that ``fresh_store`` gives the store's schema, through a plain
    ``sqlite3`` connection with the store's settings; statements that fail are counted and passed over."""
    with tempfile.TemporaryDirectory(prefix="driver-floor-") as folder:
        path = Path(folder) / "store.db"
        fresh_store(path)
        connection = plain_connection(path)
        try:
            cursor = connection.cursor()
            failed = 0
            before = resource.getrusage(resource.RUSAGE_THREAD)
            started = time.thread_time()
            for kind, sql, params in calls:
                try:
                    if kind == "commit":
                        connection.commit()
                    elif kind == "rollback":
                        connection.rollback()
                    elif kind == "executemany":
                        cursor.executemany(sql, params)
                    else:
                        cursor.execute(sql, params)
                        cursor.fetchall()
                except sqlite3.Error:
                    failed += 1
            cpu = time.thread_time() - started
            after = resource.getrusage(resource.RUSAGE_THREAD)
        finally:
            connection.close()
    return Replayed(cpu, after.ru_stime - before.ru_stime, len(calls), failed)
