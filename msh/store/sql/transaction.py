"""The SQL store's transaction: the storage steps of :class:`~msh.store.transaction.Transaction` as statements.

The statements of every message step are prepared (:mod:`msh.store.sql.statements`) and run on the
driver's cursor of the transaction's connection; the rest is SQLAlchemy Core on the same connection.

PostgreSQL
    READ COMMITTED transactions; ``get_outbound(for_update=True)`` and the inbox moves are ``SELECT … FOR
    UPDATE``, and timer claims are ``SELECT … FOR UPDATE SKIP LOCKED`` followed by the lease update, so
    processes sharing the database never claim the same timer and never wait for each other's claims.

Duplicates
    Inserts of messages are ``INSERT … ON CONFLICT (message_id) DO NOTHING RETURNING …`` (for received
    messages against the partial unique index of the duplicate-elimination records): a duplicate MessageId
    writes nothing and raises :class:`~msh.store.api.DuplicateMessage` with the transaction intact, no
    savepoint needed. On PostgreSQL a concurrent insert of the same MessageId waits for the first
    transaction and then finds the duplicate. Counting a duplicate and keeping the first Acknowledgment
    are single UPDATE statements, so concurrent duplicates neither lose a count nor replace the answer.

Savepoints
    ``SAVEPOINT``/``RELEASE`` around each block, ``ROLLBACK TO`` when it raises. On SQLite a savepoint opened
    when no row has changed since the enclosing one began (the connection's ``total_changes`` is the same)
    runs no statement: rolling back to the enclosing one undoes the same changes. The runtime opens one so
    at the start of every received message's unit, inside the group commit's savepoint of that unit.

Journal
    A transaction's events are written together before it commits (:mod:`msh.store.sql.journal_writes`).

Payloads
    A blob is written chunk by chunk inside the transaction (``blob_chunks`` rows of at most 1 MiB) and
    read back by a reader that selects one chunk per read: memory use does not grow with a message's size.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import Any, BinaryIO, Protocol

from sqlalchemy import and_, case, func, or_, select, update
from sqlalchemy.engine import Connection

from msh.engine import OutboundState, OutboundStatus
from msh.store import journal, records, rules
from msh.store.blob_files import FILE_THRESHOLD, BlobFiles, WrittenFile
from msh.store.blobs import iter_chunks, open_chunks
from msh.store.errors import StoreError, TransactionLost, UnknownBlob
from msh.store.prepared import Prepared
from msh.store.schema import UtcDateTime, blob_chunks, inbound_messages, inbox, outbound_messages, timers
from msh.store.sql import rows
from msh.store.sql.app_steps import SqlAppSteps
from msh.store.sql.journal_writes import SqlJournalWrites
from msh.store.sql.listing_steps import SqlListingSteps
from msh.store.sql.order_steps import SqlOrderSteps
from msh.store.sql.retention_steps import SqlRetentionSteps
from msh.store.sql.statements import (
    BLOB_FILE_KEYS,
    BLOB_KEYS,
    BLOB_SIZE_KEYS,
    CHUNK_KEYS,
    FIRST_COPY,
    INBOX_UPDATE_KEYS,
    REPLACE_KEYS,
    STATE_UPDATE_KEYS,
    TIMER_KEYS,
)
from msh.store.transaction import BlobInfo, Transaction

__all__ = ["SqlOwner", "SqlTransaction"]

_CLAIMABLE_AT = case(
    (and_(timers.c.lease_until.is_not(None), timers.c.lease_until > timers.c.due_at), timers.c.lease_until),
    else_=timers.c.due_at,
)
""":func:`msh.store.rules.claimable_at` in SQL."""


class SqlOwner(Protocol):
    """What a transaction needs of its :class:`~msh.store.sql.SqlStore`."""

    blob_chunk_size: int
    driver_error: type[Exception]
    files: BlobFiles | None

    @property
    def url(self) -> str: ...

    def now(self) -> datetime: ...

    def prepared(self, name: str, keys: tuple[str, ...] | None = None) -> Prepared: ...

    def failure(self, exc: Exception) -> StoreError: ...


class SqlTransaction(SqlJournalWrites, SqlAppSteps, SqlOrderSteps, SqlListingSteps, SqlRetentionSteps, Transaction):
    """One transaction on one connection of a :class:`~msh.store.sql.SqlStore`."""

    def __init__(self, store: SqlOwner, connection: Connection, readonly: bool) -> None:
        super().__init__(store.now, readonly)
        self._store = store
        self._conn = connection
        self._postgres = connection.dialect.name == "postgresql"
        self._cursor: Any = None
        self._savepoints = 0
        # The savepoints open, innermost last: (name, SQLite's count of changed rows when it began).
        self._open: list[tuple[str, int | None]] = []
        self._written = 0
        self.written_files: list[WrittenFile] = []
        """Body files this transaction wrote (their locks held until it has ended: msh.store.blob_files)."""
        self.dropped_files: list[str] = []
        """Body files whose rows this transaction deleted: removed once it has committed."""
        # The blobs this transaction wrote or found, by id: (chunk count, size); no second read of what it
        # knows (forgotten when a savepoint is rolled back, as the rows may be gone).
        self._blob_infos: dict[int, BlobInfo] = {}

    def close(self) -> None:
        self.closed = True
        if self._cursor is not None:
            with contextlib.suppress(Exception):
                self._cursor.close()
            self._cursor = None

    # -- running statements

    def _driver_cursor(self) -> Any:
        """The DBAPI cursor of this transaction's connection (for the prepared statements)."""
        self._live()
        if self._cursor is None:
            self._cursor = self._conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        return self._cursor

    def _run(self, name: str, values: Mapping[str, object], *, keys: tuple[str, ...] | None = None) -> Any:
        """Run the prepared statement ``name`` on this transaction's driver cursor (``keys``: the columns
        an INSERT or UPDATE sets); the cursor."""
        prepared = self._store.prepared(name, keys)
        cursor = self._driver_cursor()
        try:
            return prepared.execute(cursor, values)
        except self._store.driver_error as exc:
            raise self._store.failure(exc) from exc

    def _one(self, name: str, values: Mapping[str, object], *, keys: tuple[str, ...] | None = None) -> Any:
        """Run the prepared statement ``name`` and return its first row (column key -> value), or None."""
        cursor = self._run(name, values, keys=keys)
        try:
            return self._store.prepared(name, keys).first(cursor)
        except self._store.driver_error as exc:
            raise self._store.failure(exc) from exc

    def _scalar(self, name: str, values: Mapping[str, object], *, keys: tuple[str, ...] | None = None) -> Any:
        row = self._one(name, values, keys=keys)
        return None if row is None else next(iter(row.values()))

    def _sql(self, statement: str) -> None:
        cursor = self._driver_cursor()
        try:
            cursor.execute(statement)
        except self._store.driver_error as exc:
            raise self._store.failure(exc) from exc

    def _changes(self) -> int | None:
        """SQLite's count of the rows this connection has inserted, updated or deleted so far (it only grows);
        None on PostgreSQL, which has no such count."""
        if self._postgres:
            return None
        return int(self._conn.connection.driver_connection.total_changes)  # type: ignore[union-attr]

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        self._writable()
        changes = self._changes()
        enclosing = self._open[-1] if self._open else None
        if enclosing is not None and changes is not None and enclosing[1] == changes:
            # SQLite: nothing has changed since the enclosing savepoint began, so rolling back to it undoes this
            # block's changes and only them: no statement of its own (what a unit that retries opens first).
            name, own = enclosing[0], False
        else:
            self._savepoints += 1
            name, own = f"msh_sp{self._savepoints}", True
            self._sql(f"SAVEPOINT {name}")
        self._open.append((name, changes))
        appended, written = len(self.appended), self._written
        try:
            yield
        except BaseException as exc:
            self._open.pop()
            self._blob_infos.clear()
            # Its events are dropped; those written inside it (before a read of the journal) are undone too.
            del self.appended[appended:]
            self._written = min(self._written, written)
            try:
                self._sql(f"ROLLBACK TO SAVEPOINT {name}")
                if own:
                    self._sql(f"RELEASE SAVEPOINT {name}")
            except StoreError as lost:
                raise TransactionLost(
                    f"the store at {self._store.url} ended the transaction ({lost}) after: {exc}"
                ) from exc
            raise
        self._open.pop()
        if not own:
            return
        try:
            self._sql(f"RELEASE SAVEPOINT {name}")
        except StoreError as lost:
            raise TransactionLost(f"the store at {self._store.url} ended the transaction: {lost}") from lost

    # -- blobs

    def _put_blob(self, source: BinaryIO | bytes) -> int:
        files = self._store.files
        if files is not None:
            # Over FILE_THRESHOLD, a file beside the database, out of SQLite's WAL (docs/design.md §8).
            if isinstance(source, (bytes, bytearray, memoryview)):
                if len(source) > FILE_THRESHOLD:
                    return self._put_file(files, bytes(source), None)
            else:
                head = next(iter_chunks(source, FILE_THRESHOLD + 1), b"")  # fewer bytes only at its end
                if len(head) > FILE_THRESHOLD:
                    return self._put_file(files, head, source)
                source = head
        chunk_size = self._store.blob_chunk_size
        known = isinstance(source, (bytes, bytearray, memoryview))
        # The size of bytes is known up front: the blob row is written once; a stream's when it has been read.
        size = len(source) if known else 0  # type: ignore[arg-type]
        count = -(-size // chunk_size) if known else 0
        blob_id = int(
            self._scalar("blob-insert", {"size": size, "chunk_count": count, "created_at": self._now()}, keys=BLOB_KEYS)
        )
        size = count = 0
        for chunk in iter_chunks(source, chunk_size):
            self._run("chunk-insert", {"blob_id": blob_id, "seq": count, "data": chunk}, keys=CHUNK_KEYS)
            size += len(chunk)
            count += 1
            del chunk
        if not known:
            self._run("blob-size", {"b_id": blob_id, "size": size, "chunk_count": count}, keys=BLOB_SIZE_KEYS)
        self._blob_infos[blob_id] = (count, size)
        return blob_id

    def _put_file(self, files: BlobFiles, head: bytes, rest: BinaryIO | None) -> int:
        """The body as a durable file first, then the row naming it (msh.store.blob_files, steps 1-3)."""
        written = files.write(head, rest)
        self.written_files.append(written)
        values = {
            "size": written.size,
            "chunk_count": 0,
            "created_at": self._now(),
            "file": written.name,
            "sha256": written.sha256,
        }
        blob_id = int(self._scalar("blob-insert", values, keys=BLOB_FILE_KEYS))
        self._blob_infos[blob_id] = (0, written.size)
        return blob_id

    def open_blob(self, blob_id: int) -> BinaryIO:
        """A reader of the blob: its file (checked against its size and SHA-256), or its chunks fetched one
        at a time; usable until the transaction ends."""
        self._live()
        row = self._one("blob-open", {"b_id": blob_id})
        if row is None:
            raise UnknownBlob(blob_id)
        if row["file"] is not None:
            return body_file_reader(self._store.files, row, self._store.url)

        def fetch(seq: int) -> bytes | None:
            self._live()
            return self._chunk(blob_id, seq)

        return open_chunks(fetch, int(row["chunk_count"]), int(row["size"]))

    def _blob_info(self, blob_id: int) -> BlobInfo | None:
        known = self._blob_infos.get(blob_id)
        if known is not None:
            return known
        row = self._one("blob-info", {"b_id": blob_id})
        if row is None:
            return None
        info = self._blob_infos[blob_id] = (int(row["chunk_count"]), int(row["size"]))
        return info

    def _chunk(self, blob_id: int, seq: int) -> bytes | None:
        where = and_(blob_chunks.c.blob_id == blob_id, blob_chunks.c.seq == seq)
        return rows.blob_bytes(self._conn.execute(select(blob_chunks.c.data).where(where)).scalar_one_or_none())

    # -- outbound

    def _insert_new(self, name: str, values: Mapping[str, object]) -> Any:
        """Run the insert-unless-duplicate statement ``name``; the row's primary key, or None if the row
        would have repeated a message_id and nothing was inserted."""
        return self._scalar(name, values, keys=tuple(values))

    def _add_outbound(self, record: records.OutboundMessage) -> bool:
        return self._insert_new("outbound-insert", rows.outbound_values(record)) is not None

    def _outbound(self, message_id: str, *, for_update: bool) -> records.OutboundMessage | None:
        row = self._one("outbound-for-update" if for_update else "outbound", {"b_message_id": message_id})
        if row is None:
            return None
        record = rows.outbound_from_row(row)
        # The row comes with its body's size: the journal's facts of the message need no read of their own.
        if row["blob_size"] is not None:
            info = (int(row["blob_chunk_count"]), int(row["blob_size"]))
            self._blob_infos[record.body_blob_id] = info
            self._facts.setdefault(
                (message_id, records.Direction.OUTBOUND), journal.facts_of_outbound(record, info[1], deadline=False)
            )
        return record

    def _set_outbound_state(self, state: OutboundState, at: datetime) -> bool:
        values = rows.state_values(state)
        values["b_message_id"] = values.pop("message_id")
        values["updated_at"] = at
        return bool(self._run("outbound-state", values, keys=STATE_UPDATE_KEYS).rowcount)

    def _outbound_state(self, message_id: str) -> OutboundState | None:
        row = self._one("outbound-status", {"b_message_id": message_id})
        return None if row is None else rows.state_from_row(row)

    def _replace_outbound(self, record: records.OutboundMessage) -> bool:
        values = rows.outbound_values(record)
        changed = {key: values[key] for key in REPLACE_KEYS}
        return bool(
            self._run("outbound-state", {"b_message_id": record.message_id, **changed}, keys=REPLACE_KEYS).rowcount
        )

    def _delete_unused_blob(self, blob_id: int) -> bool:
        self._blob_infos.pop(blob_id, None)
        name = self._scalar("blob-file", {"b_id": blob_id}) if self._store.files is not None else None
        deleted = bool(self._run("blob-delete-unused", {"b_id": blob_id}).rowcount)
        if deleted and name is not None:
            self.dropped_files.append(str(name))  # removed once the deletion has committed
        return deleted

    def _outbound_list(
        self,
        kind: records.OutboundKind | None,
        status: OutboundStatus | None,
        after: tuple[datetime, str] | None,
        limit: int,
    ) -> list[records.OutboundMessage]:
        created_at = outbound_messages.c.created_at
        # MessageIds in code point order, as the in-memory twin sorts them (PostgreSQL's "C" collation; a
        # database's default collation may order them otherwise, SQLite compares them as bytes anyway).
        message_id = outbound_messages.c.message_id
        ordered_id = message_id.collate("C") if self._postgres else message_id
        statement = select(outbound_messages).order_by(created_at, ordered_id).limit(limit)
        if kind is not None:
            statement = statement.where(outbound_messages.c.kind == kind.value)
        if status is not None:
            statement = statement.where(outbound_messages.c.status == status.value)
        if after is not None:
            at, last = after
            statement = statement.where(or_(created_at > at, and_(created_at == at, ordered_id > last)))
        return [rows.outbound_from_row(row) for row in self._conn.execute(statement).mappings()]

    # -- inbound

    def _first_inbound(self, message_id: str) -> records.InboundMessage | None:
        row = self._one("inbound-find", {"b_message_id": message_id})
        return None if row is None else rows.inbound_from_row(row)

    def _inbound(self, inbound_id: int) -> records.InboundMessage | None:
        row = self._one("inbound", {"b_id": inbound_id})
        return None if row is None else rows.inbound_from_row(row)

    def _add_inbound(self, record: records.InboundMessage) -> int | None:
        values = rows.inbound_values(record)
        if record.duplicate_elimination:
            # ebMS2 §6.4.1: one duplicate-elimination record per MessageId (the partial unique index).
            key = self._insert_new("inbound-insert-de", values)
        else:
            key = self._scalar("inbound-insert", values, keys=tuple(values))
        return None if key is None else int(key)

    def _add_inbox_entry(self, entry: records.InboxEntry) -> None:
        values = rows.inbox_values(entry)
        self._run("inbox-insert", values, keys=tuple(values))

    def _count_duplicate(self, message_id: str, at: datetime) -> int | None:
        count = self._conn.execute(
            update(inbound_messages)
            .where(inbound_messages.c.id == FIRST_COPY)
            .values(duplicate_count=inbound_messages.c.duplicate_count + 1, last_duplicate_at=at)
            .returning(inbound_messages.c.duplicate_count),
            {"b_message_id": message_id},
        ).scalar_one_or_none()
        return None if count is None else int(count)

    def _keep_first_ack(self, message_id: str, ack_envelope: bytes) -> bool | None:
        first = self._conn.execute(select(FIRST_COPY), {"b_message_id": message_id}).scalar_one_or_none()
        if first is None:
            return None
        result = self._conn.execute(
            update(inbound_messages)
            .where(inbound_messages.c.id == first, inbound_messages.c.ack_envelope.is_(None))
            .values(ack_envelope=ack_envelope)
        )
        return bool(result.rowcount)

    # -- inbox

    def _inbox_entries(self, state: records.InboxState | None, limit: int) -> list[records.InboxEntry]:
        statement = select(inbox).order_by(inbox.c.received_at, inbox.c.inbound_id).limit(limit)
        if state is not None:
            statement = statement.where(inbox.c.state == state.value)
        return [rows.inbox_from_row(row) for row in self._conn.execute(statement).mappings()]

    def _inbox_entry(self, entry_id: int, *, for_update: bool) -> records.InboxEntry | None:
        row = self._one("inbox-entry-for-update" if for_update else "inbox-entry", {"b_id": entry_id})
        return None if row is None else rows.inbox_from_row(row)

    def _set_inbox_entry(self, entry: records.InboxEntry) -> None:
        values = rows.inbox_values(entry)
        changed = {key: values[key] for key in INBOX_UPDATE_KEYS}
        self._run("inbox-update", {"b_id": entry.id, **changed}, keys=INBOX_UPDATE_KEYS)

    # -- timers

    def _add_timer(self, message_id: str, kind: records.TimerKind, due_at: datetime) -> int:
        values = {"message_id": message_id, "kind": kind.value, "due_at": due_at, "created_at": self._now()}
        return int(self._scalar("timer-insert", values, keys=TIMER_KEYS))

    def _remove_timers(self, message_id: str, kind: records.TimerKind | None) -> int:
        if kind is None:
            return int(self._run("timer-cancel", {"b_message_id": message_id}).rowcount)
        return int(self._run("timer-cancel-kind", {"b_message_id": message_id, "b_kind": kind.value}).rowcount)

    def _claimable_timers(self, now: datetime, limit: int) -> list[records.Timer]:
        # The due_at index finds the candidates; see rules.claimable_at.
        claimable = and_(timers.c.due_at <= now, or_(timers.c.lease_until.is_(None), timers.c.lease_until <= now))
        statement = select(timers).where(claimable).order_by(timers.c.due_at, timers.c.id).limit(limit)
        if self._postgres:
            # docs/design.md §8: rows another process is claiming right now are skipped, not waited for.
            statement = statement.with_for_update(skip_locked=True)
        return [rows.timer_from_row(row) for row in self._conn.execute(statement).mappings()]

    def _lease_timers(self, claimed: list[records.Timer]) -> None:
        first = claimed[0]
        self._conn.execute(
            update(timers)
            .where(timers.c.id.in_([t.id for t in claimed]))
            .values(lease_owner=first.lease_owner, lease_until=first.lease_until)
        )

    def _renew_leases(self, timer_ids: list[int], owner: str, until: datetime) -> int:
        statement = (
            update(timers).where(timers.c.id.in_(timer_ids), timers.c.lease_owner == owner).values(lease_until=until)
        )
        return int(self._conn.execute(statement).rowcount)

    def _release_leases(self, owner: str) -> int:
        statement = update(timers).where(timers.c.lease_owner == owner).values(lease_owner=None, lease_until=None)
        return int(self._conn.execute(statement).rowcount)

    def _remove_leased_timer(self, timer_id: int, owner: str) -> bool:
        return bool(self._run("timer-complete", {"b_id": timer_id, "b_owner": owner}).rowcount)

    def _next_timer_due(self) -> datetime | None:
        value = self._conn.execute(select(func.min(_CLAIMABLE_AT, type_=UtcDateTime()))).scalar_one_or_none()
        return None if value is None else rules.required_aware("next_timer_due", value)

    def _timers_due(self, now: datetime) -> tuple[int, datetime | None]:
        claimable = and_(timers.c.due_at <= now, or_(timers.c.lease_until.is_(None), timers.c.lease_until <= now))
        statement = select(func.count(), func.min(timers.c.due_at, type_=UtcDateTime())).where(claimable)
        count, oldest = self._conn.execute(statement).one()
        return int(count), None if oldest is None else rules.required_aware("due_at", oldest)

    def _inbox_counts(self) -> tuple[dict[records.InboxState, int], datetime | None]:
        statement = select(inbox.c.state, func.count(), func.min(inbox.c.received_at, type_=UtcDateTime()))
        counts: dict[records.InboxState, int] = {}
        oldest: datetime | None = None
        waiting = (records.InboxState.NEW, records.InboxState.DELIVERED_TO_APP)
        for state, count, first in self._conn.execute(statement.group_by(inbox.c.state)):
            counts[records.InboxState(state)] = int(count)
            if records.InboxState(state) in waiting and first is not None:
                first = rules.required_aware("received_at", first)
                oldest = first if oldest is None else min(oldest, first)
        return counts, oldest


def body_file_reader(files: BlobFiles | None, row: Mapping[str, Any], url: str) -> BinaryIO:
    """The checked reader of a body stored as a file (``row``: the blob's ``file``, ``size``, ``sha256``)."""
    if files is None:
        raise StoreError(f"the store at {url} names a body file ({row['file']}) but has no folder for files")
    return files.open(str(row["file"]), int(row["size"]), str(row["sha256"]))
