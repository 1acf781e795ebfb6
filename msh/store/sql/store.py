"""The SQL store itself: its engine, its transactions and the statements compiled for its database.

SQLite transactions start with ``BEGIN IMMEDIATE`` (``BEGIN`` when read-only, :mod:`msh.store.sql.connect`);
on PostgreSQL a read-only transaction is ``SET TRANSACTION READ ONLY``. A failure of the database inside a
transaction surfaces as :class:`~msh.store.api.StoreError` naming the store (password hidden).

Connections
    On SQLite, write transactions run on one connection kept out of the engine's pool for the store's life
    (SQLite runs one write transaction at a time anyway): no checkout, reset and checkin per transaction
    (docs/design.md §8). A write transaction that finds it taken (by another thread's), and every read-only
    one, takes a connection of the pool, as every transaction does on PostgreSQL. After a transaction that
    did not end cleanly the held connection goes back to the pool (which rolls it back) and the next write
    transaction takes a fresh one; :meth:`SqlStore.close` returns it, or the transaction still running on
    it does when it ends.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from sqlalchemy import and_, select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError

from msh.store import rules
from msh.store.api import Store
from msh.store.blob_files import BlobFiles, folder_for
from msh.store.errors import StoreError, UnknownBlob
from msh.store.prepared import Prepared
from msh.store.records import Clock
from msh.store.schema import blob_chunks, blobs
from msh.store.sql import rows
from msh.store.sql.connect import READONLY, connect, reason
from msh.store.sql.statements import STATEMENTS
from msh.store.sql.transaction import SqlTransaction, body_file_reader
from msh.store.transaction import BlobInfo, Transaction

__all__ = ["SqlStore"]

log = logging.getLogger("msh.store")


class SqlStore(Store):
    """The store on SQLite or PostgreSQL; build it with :meth:`open` (or :func:`msh.store.open_store`)."""

    def __init__(self, engine: Engine, *, clock: Clock | None = None, blob_chunk_size: int | None = None) -> None:
        super().__init__(clock=clock, blob_chunk_size=blob_chunk_size)
        self._engine = engine
        self._prepared: dict[tuple[str, tuple[str, ...] | None], Prepared] = {}
        self.driver_error: type[Exception] = engine.dialect.loaded_dbapi.Error
        # SQLite: the connection write transactions run on (see the module docs).
        self._held: Connection | None = None
        self._held_lock = threading.Lock()
        self._holds = engine.dialect.name == "sqlite"
        self.files: BlobFiles | None = _files_of(engine)
        """Where bodies over 1 MiB go on an SQLite file (:mod:`msh.store.blob_files`); None on PostgreSQL,
        whose nodes may share no file system, and on an in-memory SQLite database: bodies stay chunk rows."""
        if self.files is not None:
            removed = self.files.sweep(self._named_files)
            if removed:
                log.info("removed %d body file(s) no stored message names (left by a crash)", len(removed))

    @classmethod
    def open(
        cls,
        url: str,
        *,
        clock: Clock | None = None,
        migrate: bool = True,
        blob_chunk_size: int | None = None,
    ) -> SqlStore:
        """Connect to the database at ``url`` (:mod:`msh.store.sql.connect`) and bring its schema up to date.

        Without ``migrate`` a schema that is not at the newest revision is a
        :class:`~msh.errors.ConfigurationError`. ``blob_chunk_size`` (bytes, at most 1 MiB, the default) is
        the size of the chunks payloads are stored in.
        """
        chunk_size = rules.chunk_size(blob_chunk_size)  # refused before anything is opened
        return cls(connect(url, migrate=migrate), clock=clock, blob_chunk_size=chunk_size)

    def prepared(self, name: str, keys: tuple[str, ...] | None = None) -> Prepared:
        """The statement ``name`` of the hot path, compiled for this store's database once."""
        found = self._prepared.get((name, keys))
        if found is None:
            found = Prepared(STATEMENTS[name](self._engine.dialect), self._engine.dialect, keys=keys)
            self._prepared[(name, keys)] = found
        return found

    def failure(self, exc: Exception) -> StoreError:
        """The :class:`StoreError` for an error of the database driver."""
        text = " ".join(str(exc).split()) or type(exc).__name__
        return StoreError(f"the store at {self.url} failed: {text}")

    @property
    def url(self) -> str:
        return self._engine.url.render_as_string(hide_password=True)

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (for migrations and maintenance tools)."""
        return self._engine

    def _failed(self, exc: DBAPIError) -> StoreError:
        return StoreError(f"the store at {self.url} failed: {reason(exc)}")

    @contextmanager
    def _begin(self, readonly: bool) -> Iterator[Transaction]:
        held = None if readonly else self._take_held()
        if held is None:
            with self._connect() as connection, self._transaction(connection, readonly) as tx:
                yield tx
            return
        ended = False
        try:
            with self._transaction(held, readonly) as tx:
                yield tx
            ended = True
        finally:
            self._give_back(held, kept=ended)

    def _connect(self) -> Connection:
        """A connection of the engine's pool (a failure to open one is the store's :class:`StoreError`)."""
        try:
            return self._engine.connect()
        except DBAPIError as exc:
            raise self._failed(exc) from exc

    def _take_held(self) -> Connection | None:
        """The connection held for write transactions on SQLite, if no other transaction has it (then None:
        the transaction takes one from the pool, as on PostgreSQL)."""
        if not self._holds or not self._held_lock.acquire(blocking=False):
            return None
        try:
            if self._held is None:
                self._held = self._connect()
        except BaseException:
            self._held_lock.release()
            raise
        return self._held

    def _give_back(self, held: Connection, *, kept: bool) -> None:
        """End the use of the held connection; after a transaction that did not end cleanly it goes back to
        the pool (which resets it) and the next write transaction takes a fresh one."""
        try:
            if not kept or self._closed or held.invalidated or held.closed:
                self._held = None
                with contextlib.suppress(Exception):
                    held.close()
        finally:
            self._held_lock.release()

    @contextmanager
    def _transaction(self, connection: Connection, readonly: bool) -> Iterator[Transaction]:
        """One transaction on ``connection`` (the caller's: not closed here)."""
        tx: SqlTransaction | None = None
        committed = False
        try:
            if readonly:
                connection.execution_options(**{READONLY: True})
            with connection.begin():
                if readonly and connection.dialect.name == "postgresql":
                    connection.exec_driver_sql("SET TRANSACTION READ ONLY")
                tx = SqlTransaction(self, connection, readonly)
                yield tx
                tx.write_events()  # the journal of the whole transaction, one statement (see SqlTransaction)
            committed = True
        except DBAPIError as exc:
            raise self._failed(exc) from exc
        except self.driver_error as exc:  # from the BEGIN, run on the driver's connection (msh.store.sql.connect)
            raise self.failure(exc) from exc
        finally:
            if tx is not None:
                tx.close()
                if tx.written_files or tx.dropped_files:
                    self._settle_files(tx, committed)

    def _settle_files(self, tx: SqlTransaction, committed: bool) -> None:
        """After a transaction: remove the body files it wrote that no committed row names (all of them
        when it rolled back; those of a rolled-back savepoint), and the files of rows it deleted if it
        committed; then let its files' locks go (msh.store.blob_files, step 4)."""
        files = self.files
        if files is None:
            return
        written = [w.name for w in tx.written_files]
        try:
            kept = self._named_files(written) if committed and written else set()
        except StoreError:
            kept = set(written)  # cannot tell: leave them to the next sweep, which checks again
        for name in written:
            if name not in kept:
                files.remove(name)
        if committed:
            for name in tx.dropped_files:
                files.remove(name)
        for w in tx.written_files:
            files.release(w)

    def _named_files(self, names: Iterable[str]) -> set[str]:
        """Those of ``names`` that a committed ``blobs`` row names."""
        wanted = list(names)
        if not wanted:
            return set()
        try:
            with self._engine.connect() as connection:
                found = connection.execute(select(blobs.c.file).where(blobs.c.file.in_(wanted))).scalars().all()
        except DBAPIError as exc:
            raise self._failed(exc) from exc
        return {str(name) for name in found}

    def open_blob(self, blob_id: int) -> BinaryIO:
        """A reader of a committed blob outside any transaction: its file (checked at its end), or its chunks
        fetched one short read at a time (see :meth:`msh.store.api.Store.open_blob`)."""
        if self.files is not None:
            self._check_open()
            row = self._read(select(blobs.c.file, blobs.c.size, blobs.c.sha256).where(blobs.c.id == blob_id))
            if row is None:
                raise UnknownBlob(blob_id)
            if row["file"] is not None:
                return body_file_reader(self.files, row, self.url)
        return super().open_blob(blob_id)

    def _read(self, statement: Any) -> Any:
        """Run a read on a connection of its own (outside any transaction); its result, all fetched."""
        try:
            with self._engine.connect() as connection:
                connection.execution_options(**{READONLY: True})
                return connection.execute(statement).mappings().first()
        except DBAPIError as exc:
            raise self._failed(exc) from exc

    def _committed_blob(self, blob_id: int) -> BlobInfo | None:
        row = self._read(select(blobs.c.chunk_count, blobs.c.size).where(blobs.c.id == blob_id))
        return None if row is None else (int(row["chunk_count"]), int(row["size"]))

    def _committed_chunk(self, blob_id: int, seq: int) -> bytes | None:
        where = and_(blob_chunks.c.blob_id == blob_id, blob_chunks.c.seq == seq)
        row = self._read(select(blob_chunks.c.data).where(where))
        return None if row is None else rows.blob_bytes(row["data"])

    def _release(self) -> None:
        # A write transaction still running on the held connection gives it back to the pool when it ends.
        if self._held_lock.acquire(blocking=False):
            try:
                if self._held is not None:
                    with contextlib.suppress(Exception):
                        self._held.close()
                    self._held = None
            finally:
                self._held_lock.release()
        self._engine.dispose()


def _files_of(engine: Engine) -> BlobFiles | None:
    """The folder of body files of an SQLite database in a file (None for any other database)."""
    if engine.dialect.name != "sqlite":
        return None
    database = engine.url.database
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return BlobFiles(folder_for(Path(database).resolve()))
