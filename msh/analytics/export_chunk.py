"""One chunk of ``msh export``: the events of an id range, read from the store as Arrow columns, kept or
left by the run's windows, and written as one Parquet file per day (:func:`msh.analytics.dataset.write_days`).

A chunk of an SQL store is read by :func:`export_sql_chunk` in a worker process through ADBC (Arrow Database
Connectivity), whose drivers hand over whole columns instead of one Python object per value. The worker is
a process of its own, not a thread, because the ADBC SQLite driver carries its own copy of the SQLite
library: two copies in one process do not see each other's file locks, and the copy that closes last
would take the write-ahead log away from the other (the SQLite documentation's "multiple copies of SQLite
in the same program"). Between processes, SQLite's locking works as for any two programs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc

from msh.analytics.columns import SCHEMA
from msh.analytics.dataset import write_days
from msh.store.sql.statements import EVENT_KEYS

__all__ = ["READ_COLUMNS", "Chunk", "Window", "export_sql_chunk", "keep", "libpq_url", "port_table", "write_chunk"]

READ_COLUMNS: Final = ("id", *(key for key in EVENT_KEYS if key != "detail"), "detail")
"""The journal's columns as the store writes them, in the order a chunk is read."""

_NUMBERS: Final = frozenset({"id", "size", "attempt"})
_TIMES: Final = frozenset({"at", "deadline"})
_UTC: Final = pa.timestamp("us", tz="UTC")


@dataclass(frozen=True, slots=True)
class Window:
    """What one run covered: the events with an id in (``lo``, ``hi``] and a time in [``since``, ``until``)
    (an open end where None)."""

    lo: int
    hi: int
    since: str | None = None
    until: str | None = None

    @property
    def unbounded(self) -> bool:
        """True when the run kept every event of its id range."""
        return self.since is None and self.until is None


@dataclass(frozen=True, slots=True)
class Chunk:
    """One unit of export work: the events with an id in (``lo``, ``hi``] of the database at ``url`` (an
    SQLAlchemy URL, password included: it travels to the worker process only), what to keep of them, and
    the file names (``PREFIX-FIRSTID-LASTID-TAG.parquet``)."""

    url: str
    lo: int
    hi: int
    source: str
    out: str
    prefix: str
    tag: str
    since: str | None
    until: str | None
    covered: tuple[Window, ...]


def _time_array(values: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """Times as read back (UTC wall-time text on SQLite, timestamps on PostgreSQL) as UTC timestamps."""
    if pa.types.is_timestamp(values.type):
        return values.cast(_UTC)
    if pa.types.is_null(values.type) or pa.types.is_integer(values.type):  # a chunk with no time in it
        return pa.nulls(len(values), _UTC)
    return values.cast(pa.string()).cast(pa.timestamp("us")).cast(_UTC)


def _table(source: str, read: pa.Table) -> pa.Table:
    """A chunk as read (:data:`READ_COLUMNS`) in the journal files' columns (:data:`SCHEMA`)."""
    arrays: dict[str, Any] = {"source": pa.array([source] * read.num_rows, pa.string()), "event_id": read["id"]}
    for name in READ_COLUMNS[1:]:
        kind = SCHEMA.field(name).type
        arrays[name] = _time_array(read[name]) if name in _TIMES else read[name].cast(kind)
    return pa.table([arrays[f.name] for f in SCHEMA], schema=SCHEMA)


def _moment(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


def keep(table: pa.Table, since: str | None, until: str | None, covered: Sequence[Window]) -> pa.Table:
    """The rows of ``table`` within [since, until) that no earlier window covered."""
    ids, at = table.column("event_id"), table.column("at")
    conditions: list[Any] = []
    if since is not None:
        conditions.append(pc.greater_equal(at, pa.scalar(_moment(since), _UTC)))
    if until is not None:
        conditions.append(pc.less(at, pa.scalar(_moment(until), _UTC)))
    for w in covered:
        inside = pc.and_(pc.greater(ids, w.lo), pc.less_equal(ids, w.hi))
        if w.since is not None:
            inside = pc.and_(inside, pc.greater_equal(at, pa.scalar(_moment(w.since), _UTC)))
        if w.until is not None:
            inside = pc.and_(inside, pc.less(at, pa.scalar(_moment(w.until), _UTC)))
        conditions.append(pc.invert(inside))
    if not conditions:
        return table
    mask = conditions[0]
    for condition in conditions[1:]:
        mask = pc.and_(mask, condition)
    return table.filter(mask)


def write_chunk(read: pa.Table, chunk: Chunk) -> tuple[int, int]:
    """Write what ``chunk`` keeps of the events ``read``, one file per day named after the chunk's first and
    last event ids (so writing the same chunk again replaces its files); (events written, files written)."""
    if read.num_rows == 0:
        return 0, 0
    table = keep(_table(chunk.source, read), chunk.since, chunk.until, chunk.covered)
    if table.num_rows == 0:
        return 0, 0
    ids = read["id"]
    name = f"{chunk.prefix}-{ids[0].as_py():012d}-{ids[-1].as_py():012d}-{chunk.tag}"
    return table.num_rows, write_days(table, Path(chunk.out), name)


def port_table(rows: Sequence[Any]) -> pa.Table:
    """Events of the store's port (:class:`msh.store.api.Event`) as a chunk read (:data:`READ_COLUMNS`)."""
    columns: dict[str, list[Any]] = {name: [] for name in READ_COLUMNS}
    for e in rows:
        for name in READ_COLUMNS:
            value = getattr(e, name)
            if name == "direction" and value is not None:
                value = value.value
            elif name == "detail" and value is not None and not isinstance(value, str):
                value = json.dumps(value)
            columns[name].append(value)
    return pa.table({name: pa.array(values, _UTC if name in _TIMES else None) for name, values in columns.items()})


def _column(name: str) -> str:
    # SQLite keeps a declared type only as an affinity: text columns are read as text whatever a row holds.
    return name if name in _NUMBERS or name in _TIMES else f"CAST({name} AS TEXT) AS {name}"


def libpq_url(url: str) -> str:
    """The SQLAlchemy PostgreSQL URL ``url`` (``postgresql+psycopg://…``) as libpq takes it (password kept)."""
    from sqlalchemy.engine import make_url

    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def export_sql_chunk(chunk: Chunk) -> tuple[int, int]:
    """Read the events of ``chunk`` from its database (ADBC, read-only statements) and write them
    (:func:`write_chunk`). Runs in a worker process (module docs)."""
    from sqlalchemy.engine import make_url

    url = make_url(chunk.url)
    columns = ", ".join(_column(name) for name in READ_COLUMNS)
    if url.get_backend_name() == "sqlite":
        import adbc_driver_sqlite.dbapi as sqlite_adbc

        connection = sqlite_adbc.connect(url.database)
        query = f"SELECT {columns} FROM events WHERE id > ? AND id <= ? ORDER BY id"
    else:
        import adbc_driver_postgresql.dbapi as postgres_adbc

        connection = postgres_adbc.connect(libpq_url(chunk.url))
        query = f"SELECT {columns} FROM events WHERE id > $1 AND id <= $2 ORDER BY id"
    with connection, connection.cursor() as cursor:
        if url.get_backend_name() == "sqlite":
            # The driver infers a column's type from its first batch: one batch for the chunk sees every row.
            cursor.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": str(max(chunk.hi - chunk.lo, 1))})
        cursor.execute(query, (chunk.lo, chunk.hi))
        read = cursor.fetch_arrow_table()
        connection.rollback()
    return write_chunk(read, chunk)
