"""The tables of the SQL store (SQLAlchemy Core), as the newest migration leaves them.

The migrations in :mod:`msh.store.migrations` create and change the tables; this module describes the
result for the queries, and a test checks that the two agree (``alembic`` compare on a migrated database).

Tables
    ``blobs``, ``blob_chunks``
        Message bodies as numbered chunks of at most 1 MiB (:mod:`msh.store.blobs`), or, over 1 MiB on
        SQLite, as files beside the database that the row names (:mod:`msh.store.blob_files`).
    ``outbound_messages``
        One row per sent message: routing, the body to re-send, reliability parameters, engine state, and
        its kind: the application's own message, one this MSH forwards as an intermediary, or a signal of
        this MSH sent hop by hop (``own``, ``forward``, ``signal``).
    ``inbound_messages``
        One row per received message: the body, the Acknowledgment sent, the content digest; for a
        message received under
        DuplicateElimination it is the duplicate-elimination record (unique per MessageId through a
        partial unique index); copies received without DuplicateElimination each get a row.
    ``inbox``
        The receiving application's view of the received messages, one entry per stored copy.
    ``sequence_counters``, ``order_positions``
        MessageOrder (ebMS2 §9, revision 0008): the next SequenceNumber of each conversation we send in, and
        where each sequence we receive stands (:mod:`msh.engine.ordering`).
    ``timers``
        Work due at ``due_at`` for a message, with a lease while a process executes it.
    ``events``
        The append-only journal: each event's time, kind, message and detail, and in typed columns the
        facts the delivery reports group by (:mod:`msh.store.journal`, revision 0005).
    ``app_requests``, ``inbox_claims``, ``inbox_batches``, ``app_cursors``
        The application interfaces' records (revision 0006, :mod:`msh.store.app_records`): exactly-once
        requests with their responses, leases and rejections of inbox entries, fetched batches, and how
        far each reader of the journal (a webhook) has got.
    ``schema_version``
        Alembic's record of the applied revision (not described here).

Portability
    Timestamps are :class:`UtcDateTime`: ``timestamp with time zone`` on PostgreSQL, UTC text on SQLite
    (fixed width, so text order is time order). Durations are :class:`XsDurationText`: the canonical
    xs:duration text (``P1M``, ``PT30S``) on both, so months survive (neither database has a type for a
    duration that counts months and seconds as XML Schema does; PostgreSQL's ``interval`` counts a month
    as 30 days when comparing). Surrogate keys are ``bigint`` identities on PostgreSQL
    and ``INTEGER PRIMARY KEY`` (the rowid) on SQLite. Event details are ``jsonb`` / JSON text.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    Table,
    Text,
    false,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine

from cpa.duration import XsDuration

__all__ = [
    "DE_INDEX",
    "DE_WHERE",
    "ID_TYPE",
    "JSON_TYPE",
    "OUTBOUND_FINAL",
    "OUTBOUND_KINDS",
    "OUTBOUND_STATUSES",
    "RELIABLE_MESSAGING_METHODS",
    "UtcDateTime",
    "XsDurationText",
    "app_cursors",
    "app_requests",
    "blob_chunks",
    "blobs",
    "events",
    "inbound_messages",
    "inbox",
    "inbox_batches",
    "inbox_claims",
    "metadata",
    "order_positions",
    "outbound_messages",
    "sequence_counters",
    "timers",
]

# A naming convention so that constraint names are the same on every database (and in migrations).
metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

ID_TYPE: TypeEngine[int] = BigInteger().with_variant(Integer(), "sqlite")
"""Surrogate keys: bigint on PostgreSQL, INTEGER (the rowid, so it autoincrements) on SQLite."""

JSON_TYPE: TypeEngine[Any] = JSON().with_variant(JSONB(), "postgresql")


class UtcDateTime(TypeDecorator[datetime]):
    """An aware UTC datetime: refuses naive values, stores UTC, reads back aware UTC datetimes."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"naive datetime {value.isoformat()} given where an aware UTC time is stored")
        value = value.astimezone(UTC)
        # SQLite has no time zones: store the UTC wall time.
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)

    def bind_processor(self, dialect: Dialect) -> Any:
        """On SQLite, the UTC wall time as the text SQLAlchemy's DATETIME writes, in one step (this check,
        then that format: every message step binds several times)."""
        impl = self.impl_instance.dialect_impl(dialect)
        if dialect.name != "sqlite" or getattr(impl, "_storage_format", None) != _SQLITE_FORMAT:
            return super().bind_processor(dialect)

        def process(value: datetime | None) -> str | None:
            if value is None:
                return None
            if not isinstance(value, datetime):
                raise TypeError("SQLite DateTime type only accepts Python datetime and date objects as input.")
            if value.tzinfo is None or value.utcoffset() is None:
                raise ValueError(f"naive datetime {value.isoformat()} given where an aware UTC time is stored")
            v = value.astimezone(UTC)
            return "%04d-%02d-%02d %02d:%02d:%02d.%06d" % (  # noqa: UP031 (the format SQLAlchemy's is)
                v.year,
                v.month,
                v.day,
                v.hour,
                v.minute,
                v.second,
                v.microsecond,
            )

        return process


_SQLITE_FORMAT = "%(year)04d-%(month)02d-%(day)02d %(hour)02d:%(minute)02d:%(second)02d.%(microsecond)06d"
"""SQLAlchemy's storage format of a SQLite DATETIME (the fused binding above writes the same text)."""


@lru_cache(maxsize=1024)
def _duration_text(value: XsDuration) -> str:
    return str(value)


@lru_cache(maxsize=1024)
def _duration_value(text: str) -> XsDuration:
    return XsDuration.parse(text)


class XsDurationText(TypeDecorator[XsDuration]):
    """An :class:`~cpa.duration.XsDuration` kept as its canonical xs:duration text; read back exactly.

    Both conversions are cached (an MSH sees few distinct durations, and every message step reads them)."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: XsDuration | None, dialect: Dialect) -> str | None:
        if value is None:
            return None
        if not isinstance(value, XsDuration):
            raise TypeError(f"{value!r} given where an XsDuration is stored")
        return _duration_text(value)

    def process_result_value(self, value: str | None, dialect: Dialect) -> XsDuration | None:
        return None if value is None else _duration_value(value)


def _states(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


OUTBOUND_STATUSES = ("pending", "awaiting-ack", "forwarded", "delivered", "sent", "failed")
OUTBOUND_FINAL = ("delivered", "sent", "failed")
OUTBOUND_KINDS = ("own", "forward", "signal")
RELIABLE_MESSAGING_METHODS = ("ebXML", "Transport")
INBOX_STATES = ("new", "delivered-to-app", "acknowledged-by-app", "held", "abandoned")
SEVERITIES = ("Error", "Warning")
DIRECTIONS = ("outbound", "inbound")
ROLES = ("sender", "receiver", "intermediary")
DE_INDEX = "uq_inbound_messages_message_id_de"
DE_WHERE = "duplicate_elimination"
ORDERED_WHERE = "sequence_number IS NOT NULL"

blobs = Table(
    "blobs",
    metadata,
    Column("id", ID_TYPE, primary_key=True, autoincrement=True),
    Column("size", BigInteger, nullable=False),
    Column("chunk_count", Integer, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    # A body stored as a file beside an SQLite store (msh.store.blob_files, revision 0010): its name in
    # the folder and its SHA-256 (hex); NULL for a body stored as chunk rows.
    Column("file", Text, nullable=True),
    Column("sha256", Text, nullable=True),
)

blob_chunks = Table(
    "blob_chunks",
    metadata,
    Column("blob_id", ID_TYPE, ForeignKey("blobs.id", ondelete="CASCADE"), primary_key=True),
    Column("seq", Integer, primary_key=True, autoincrement=False),
    Column("data", LargeBinary, nullable=False),
)

outbound_messages = Table(
    "outbound_messages",
    metadata,
    Column("message_id", Text, primary_key=True),
    Column("cpaid", Text, nullable=False),
    Column("conversation_id", Text, nullable=False),
    Column("service", Text, nullable=False),
    Column("action", Text, nullable=False),
    Column("from_party", Text, nullable=True),
    Column("to_party", Text, nullable=False),
    Column("endpoint_url", Text, nullable=False),
    Column("content_type", Text, nullable=False),
    Column("body_blob_id", ID_TYPE, ForeignKey("blobs.id"), nullable=False),
    # reliability parameters
    Column("retries", Integer, nullable=False),
    Column("retry_interval", XsDurationText, nullable=False),
    Column("first_resend_timeout", XsDurationText, nullable=False),
    Column("persist_duration", XsDurationText, nullable=True),
    Column("time_to_live", UtcDateTime, nullable=True),
    Column("ack_requested", Boolean, nullable=False),
    Column("ack_actor", Text, nullable=True),
    # ebMS2 §10.1.3: the message also asks the next MSH for an acknowledgment (revision 0004).
    Column("hop_ack", Boolean, nullable=False, server_default=false()),
    # Who makes it reliable: the ebXML protocol or a queuing transport (the Reliable Messaging draft's
    # ReliableMessagingMethod, revision 0012).
    Column("reliable_messaging_method", Text, nullable=False, server_default="ebXML"),
    # engine state
    Column("status", Text, nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("first_sent_at", UtcDateTime, nullable=True),
    # ebMS2 §6.5.7: the attempts known never to have left; any other may have arrived (revision 0007).
    Column("refused_attempts", Integer, nullable=False, server_default="0"),
    Column("next_due_at", UtcDateTime, nullable=True),
    Column("failure_code", Text, nullable=True),
    Column("failure_severity", Text, nullable=True),
    Column("failure_description", Text, nullable=True),
    # What the status rests on, why a signed receipt proves nothing, since when the next MSH is unreachable
    # (revision 0007, msh.engine.outcomes).
    Column("evidence", Text, nullable=True),
    Column("receipt_problem", Text, nullable=True),
    Column("unreachable_since", UtcDateTime, nullable=True),
    Column("created_at", UtcDateTime, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
    # ebMS2 §10: whose message it is: the application's own, one forwarded as an intermediary, or a signal
    # of ours sent hop by hop (revision 0004).
    Column("kind", Text, nullable=False, server_default="own"),
    # ebMS2 §9.1.1: its SequenceNumber, for a message sent with MessageOrder (revision 0008).
    Column("sequence_number", Integer, nullable=True),
    CheckConstraint(_states("status", OUTBOUND_STATUSES), name="status"),
    CheckConstraint(_states("failure_severity", SEVERITIES), name="failure_severity"),
    CheckConstraint(_states("kind", OUTBOUND_KINDS), name="kind"),
    CheckConstraint(_states("reliable_messaging_method", RELIABLE_MESSAGING_METHODS), name="reliable_messaging_method"),
    Index(None, "status"),
    Index(None, "conversation_id"),
    Index(None, "kind", "status"),
    Index(None, "created_at"),  # the operator's listing, newest first (revision 0009)
    # A replaced body is deleted once no message names it (revision 0004): found by index, not by a scan.
    Index(None, "body_blob_id"),
)

inbound_messages = Table(
    "inbound_messages",
    metadata,
    Column("id", ID_TYPE, primary_key=True, autoincrement=True),
    Column("message_id", Text, nullable=False),
    Column("duplicate_elimination", Boolean, nullable=False),
    Column("from_party", Text, nullable=False),
    Column("to_party", Text, nullable=True),
    Column("cpaid", Text, nullable=False),
    Column("conversation_id", Text, nullable=False),
    Column("service", Text, nullable=False),
    Column("action", Text, nullable=False),
    Column("received_at", UtcDateTime, nullable=False),
    Column("content_type", Text, nullable=False),
    Column("body_blob_id", ID_TYPE, ForeignKey("blobs.id"), nullable=False),
    Column("ack_envelope", LargeBinary, nullable=True),
    Column("duplicate_count", Integer, nullable=False),
    Column("last_duplicate_at", UtcDateTime, nullable=True),
    # ebMS2 §6.5.6: the content digest that tells an identical copy from other content (revision 0003).
    Column("content_digest", Text, nullable=True),
    # ebMS2 §9.1.1: its SequenceNumber, for a message received with MessageOrder (revision 0008).
    Column("sequence_number", Integer, nullable=True),
    # The first stored copy of a MessageId (FIRST_COPY) by an index-only scan (revision 0011).
    Index(None, "message_id", "id"),
    # The held messages of a sequence received with MessageOrder; only those rows (partial, revision 0011).
    Index(
        "ix_inbound_messages_sequence",
        "cpaid",
        "from_party",
        "conversation_id",
        "sequence_number",
        sqlite_where=text(ORDERED_WHERE),
        postgresql_where=text(ORDERED_WHERE),
    ),
    Index(None, "received_at"),
    Index(None, "body_blob_id"),  # see outbound_messages (revision 0004)
    # The duplicate-elimination record: one per MessageId among the messages received under
    # DuplicateElimination (ebMS2 §6.4.1); copies received without it are stored as often as they come.
    Index(
        DE_INDEX,
        "message_id",
        unique=True,
        sqlite_where=text(DE_WHERE),
        postgresql_where=text(DE_WHERE),
    ),
)

inbox = Table(
    "inbox",
    metadata,
    Column("inbound_id", ID_TYPE, ForeignKey("inbound_messages.id", ondelete="CASCADE"), primary_key=True),
    Column("message_id", Text, nullable=False),
    Column("state", Text, nullable=False),
    Column("received_at", UtcDateTime, nullable=False),
    Column("delivered_at", UtcDateTime, nullable=True),
    Column("acknowledged_at", UtcDateTime, nullable=True),
    CheckConstraint(_states("state", INBOX_STATES), name="state"),
    Index(None, "state", "received_at"),
    Index(None, "message_id"),
)

# MessageOrder (ebMS2 §9, revision 0008): the next SequenceNumber of each conversation we send in ...
sequence_counters = Table(
    "sequence_counters",
    metadata,
    Column("cpaid", Text, primary_key=True),
    Column("conversation_id", Text, primary_key=True),
    Column("next_number", Integer, nullable=False),
    Column("broken", Boolean, nullable=False),
    Column("restarted", Boolean, nullable=False),
)

# ... and where each sequence we receive stands (msh.engine.ordering.OrderPosition).
order_positions = Table(
    "order_positions",
    metadata,
    Column("cpaid", Text, primary_key=True),
    Column("from_party", Text, primary_key=True),
    Column("conversation_id", Text, primary_key=True),
    Column("next_number", Integer, nullable=True),
    Column("held", Integer, nullable=False),
    Column("gap_since", UtcDateTime, nullable=True),
    Column("broken", Boolean, nullable=False),
    Column("offered_at", UtcDateTime, nullable=True),
)

timers = Table(
    "timers",
    metadata,
    Column("id", ID_TYPE, primary_key=True, autoincrement=True),
    Column("message_id", Text, nullable=False),
    Column("kind", Text, nullable=False),
    Column("due_at", UtcDateTime, nullable=False),
    Column("lease_owner", Text, nullable=True),
    Column("lease_until", UtcDateTime, nullable=True),
    Column("created_at", UtcDateTime, nullable=False),
    Index(None, "due_at"),
    Index(None, "message_id"),
)

events = Table(
    "events",
    metadata,
    Column("id", ID_TYPE, primary_key=True, autoincrement=True),
    Column("at", UtcDateTime, nullable=False),
    Column("message_id", Text, nullable=True),
    Column("direction", Text, nullable=True),
    Column("kind", Text, nullable=False),
    Column("detail", JSON_TYPE, nullable=False),
    # The typed columns of the journal (revision 0005, msh.store.journal): what the reports group by.
    Column("role", Text, nullable=True),
    Column("cpa_id", Text, nullable=True),
    Column("from_party", Text, nullable=True),
    Column("to_party", Text, nullable=True),
    Column("service", Text, nullable=True),
    Column("action", Text, nullable=True),
    Column("conversation_id", Text, nullable=True),
    Column("size", BigInteger, nullable=True),
    Column("attempt", Integer, nullable=True),
    Column("severity", Text, nullable=True),
    Column("cause", Text, nullable=True),
    Column("deadline", UtcDateTime, nullable=True),
    CheckConstraint(_states("direction", DIRECTIONS), name="direction"),
    CheckConstraint(_states("role", ROLES), name="role"),
    Index(None, "at"),
    Index(None, "message_id"),
    Index(None, "kind", "at"),
)

# The application interfaces (revision 0006, msh.store.app_records).
app_requests = Table(
    "app_requests",
    metadata,
    Column("message_id", Text, primary_key=True),
    Column("application", Text, nullable=False),
    Column("msg_create", UtcDateTime, nullable=False),
    Column("fingerprint", Text, nullable=False),
    Column("status", Integer, nullable=False),
    Column("response", LargeBinary, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Index(None, "created_at"),
)

inbox_claims = Table(
    "inbox_claims",
    metadata,
    Column("inbound_id", ID_TYPE, ForeignKey("inbox.inbound_id", ondelete="CASCADE"), primary_key=True),
    Column("application", Text, nullable=True),
    Column("lease_until", UtcDateTime, nullable=True),
    Column("batch_id", Text, nullable=True),
    Column("rejected_at", UtcDateTime, nullable=True),
    Column("reason", Text, nullable=True),
    Column("takes", Integer, nullable=False),
)

inbox_batches = Table(
    "inbox_batches",
    metadata,
    Column("batch_id", Text, primary_key=True),
    Column("application", Text, nullable=False),
    Column("entry_ids", JSON_TYPE, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("lease_until", UtcDateTime, nullable=False),
    Column("confirmed_at", UtcDateTime, nullable=True),
)

app_cursors = Table(
    "app_cursors",
    metadata,
    Column("name", Text, primary_key=True),
    Column("position", BigInteger, nullable=False),
)
