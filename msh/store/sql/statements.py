"""The statements of every message step, by area, compiled once per store (:mod:`msh.store.prepared`).

Each entry of :data:`STATEMENTS` builds its statement for a dialect; the SQL store compiles it at its
first use and runs it on the driver's cursor. Bound parameters that select rows are named ``b_…``; the
columns an INSERT or UPDATE sets are given when it is compiled (their keys, :mod:`msh.store.sql.rows`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from sqlalchemy import bindparam, delete, exists, func, insert, literal_column, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.schema import Table

from msh.store.schema import DE_WHERE, blob_chunks, blobs, events, inbound_messages, inbox, outbound_messages, timers
from msh.store.sql.rows import OUTBOUND_STATE_COLUMNS

__all__ = [
    "BLOB_FILE_KEYS",
    "BLOB_KEYS",
    "BLOB_SIZE_KEYS",
    "CHUNK_KEYS",
    "EVENT_KEYS",
    "EVENT_WRITE_KEYS",
    "FIRST_COPY",
    "INBOX_UPDATE_KEYS",
    "REPLACE_KEYS",
    "STATEMENTS",
    "STATE_UPDATE_KEYS",
    "TIMER_KEYS",
]

Build = Callable[[Dialect], Any]


def _insert_new(table: Table, where: str | None) -> Build:
    """``INSERT … ON CONFLICT (message_id) DO NOTHING RETURNING <key>`` (for the partial unique index
    ``where`` when given): RETURNING tells whether a row went in."""

    def build(dialect: Dialect) -> Any:
        index_where = None if where is None else text(where)
        dialect_insert = pg_insert if dialect.name == "postgresql" else sqlite_insert
        statement = dialect_insert(table).on_conflict_do_nothing(index_elements=["message_id"], index_where=index_where)
        return statement.returning(next(iter(table.primary_key.columns)))

    return build


def _fixed(statement: Any) -> Build:
    return lambda _dialect: statement


FIRST_COPY: Final = (
    select(func.min(inbound_messages.c.id))
    .where(inbound_messages.c.message_id == bindparam("b_message_id"))
    .scalar_subquery()
)
"""The id of a MessageId's first stored copy (``b_message_id``)."""

_BODY = blobs.c.id == outbound_messages.c.body_blob_id
_OUTBOUND = select(
    outbound_messages,
    # The body's size and chunks, read with the row (the journal's facts of the message, docs/design.md §2).
    select(blobs.c.size).where(_BODY).scalar_subquery().label("blob_size"),
    select(blobs.c.chunk_count).where(_BODY).scalar_subquery().label("blob_chunk_count"),
).where(outbound_messages.c.message_id == bindparam("b_message_id"))
_INBOX_ENTRY = select(inbox).where(inbox.c.inbound_id == bindparam("b_id"))

BLOB_KEYS: Final = ("size", "chunk_count", "created_at")
BLOB_SIZE_KEYS: Final = ("size", "chunk_count")
BLOB_FILE_KEYS: Final = ("size", "chunk_count", "created_at", "file", "sha256")
CHUNK_KEYS: Final = ("blob_id", "seq", "data")
STATE_UPDATE_KEYS: Final = (*OUTBOUND_STATE_COLUMNS[1:], "updated_at")
REPLACE_KEYS: Final = (*STATE_UPDATE_KEYS, "body_blob_id", "content_type", "endpoint_url")
INBOX_UPDATE_KEYS: Final = ("state", "received_at", "delivered_at", "acknowledged_at")
TIMER_KEYS: Final = ("message_id", "kind", "due_at", "created_at")
EVENT_KEYS: Final = tuple(c.name for c in events.columns if c.name != "id")
"""The columns of a new journal entry, as the table declares them, but its ``id``."""
EVENT_WRITE_KEYS: Final = ("id", *EVENT_KEYS)
"""What a journal entry is written with: its id too (msh.store.sql.transaction, Journal)."""

STATEMENTS: Final[dict[str, Build]] = {
    # blobs
    "blob-info": _fixed(select(blobs.c.chunk_count, blobs.c.size).where(blobs.c.id == bindparam("b_id"))),
    "blob-open": _fixed(
        select(blobs.c.chunk_count, blobs.c.size, blobs.c.file, blobs.c.sha256).where(blobs.c.id == bindparam("b_id"))
    ),
    "blob-file": _fixed(select(blobs.c.file).where(blobs.c.id == bindparam("b_id"))),
    "blob-insert": _fixed(insert(blobs).returning(blobs.c.id)),
    "blob-size": _fixed(update(blobs).where(blobs.c.id == bindparam("b_id"))),
    "chunk-insert": _fixed(insert(blob_chunks)),
    # A blob no message names any more (its chunks go with it: ON DELETE CASCADE).
    "blob-delete-unused": _fixed(
        delete(blobs).where(
            blobs.c.id == bindparam("b_id"),
            ~exists().where(outbound_messages.c.body_blob_id == blobs.c.id),
            ~exists().where(inbound_messages.c.body_blob_id == blobs.c.id),
        )
    ),
    # outbound
    "outbound": _fixed(_OUTBOUND),
    "outbound-for-update": _fixed(_OUTBOUND.with_for_update()),
    "outbound-insert": _insert_new(outbound_messages, None),
    "outbound-state": _fixed(
        update(outbound_messages).where(outbound_messages.c.message_id == bindparam("b_message_id"))
    ),
    "outbound-status": _fixed(
        select(*(outbound_messages.c[name] for name in (*OUTBOUND_STATE_COLUMNS, "kind"))).where(
            outbound_messages.c.message_id == bindparam("b_message_id")
        )
    ),
    # inbound and inbox
    "inbound-find": _fixed(select(inbound_messages).where(inbound_messages.c.id == FIRST_COPY)),
    "inbound": _fixed(select(inbound_messages).where(inbound_messages.c.id == bindparam("b_id"))),
    "inbound-insert-de": _insert_new(inbound_messages, DE_WHERE),
    "inbound-insert": _fixed(insert(inbound_messages).returning(inbound_messages.c.id)),
    "inbox-insert": _fixed(insert(inbox)),
    "inbox-entry": _fixed(_INBOX_ENTRY),
    "inbox-entry-for-update": _fixed(_INBOX_ENTRY.with_for_update()),
    "inbox-update": _fixed(update(inbox).where(inbox.c.inbound_id == bindparam("b_id"))),
    # timers
    "timer-insert": _fixed(insert(timers).returning(timers.c.id)),
    "timer-cancel": _fixed(delete(timers).where(timers.c.message_id == bindparam("b_message_id"))),
    "timer-cancel-kind": _fixed(
        delete(timers).where(timers.c.message_id == bindparam("b_message_id"), timers.c.kind == bindparam("b_kind"))
    ),
    "timer-complete": _fixed(
        delete(timers).where(timers.c.id == bindparam("b_id"), timers.c.lease_owner == bindparam("b_owner"))
    ),
    # journal
    "event-insert": _fixed(insert(events)),
    # The next journal ids: SQLite's rowid rule (one writer: BEGIN IMMEDIATE), PostgreSQL's sequence.
    "event-next-id": lambda dialect: (
        select(
            func.nextval(func.pg_get_serial_sequence(literal_column("'events'"), literal_column("'id'")))
        ).select_from(func.generate_series(literal_column("1"), bindparam("b_count")))
        if dialect.name == "postgresql"
        else select(func.coalesce(func.max(events.c.id), literal_column("0")) + literal_column("1"))
    ),
}
