"""The store port: the durable state of the MSH, read and written in transactions (DESIGN.md §2, §5, §8).

The store is the source of truth: every invariant of DESIGN.md §5 is a property of the rows committed
through this port. Two implementations behave identically (the shared test suite runs on each):
:class:`~msh.store.sql.SqlStore` (SQLite file or PostgreSQL, the production store) and
:class:`~msh.store.memory.MemoryStore` (the in-memory twin for engine and runtime unit tests).

Opening
    ``Store.open(url)`` takes a file path (an SQLite database file, created if absent), an SQLAlchemy
    URL (``sqlite:///path``, ``postgresql+psycopg://user@host/db``; ``postgresql://`` means psycopg 3) or
    ``memory:`` (the in-memory twin). A SQL store is migrated to the newest schema revision on opening.

Transactions
    ``with store.transaction() as tx:`` runs one unit of work: it commits when the block ends and rolls
    back when the block raises; nothing of a rolled-back transaction is ever visible. One transaction at
    a time per thread (opening a second one on the same thread raises :class:`StoreError`: it would wait
    for itself on SQLite). ``store.transaction(readonly=True)`` refuses every write (:class:`StoreError`)
    and on SQLite does not take the write lock. The records a transaction returns are frozen snapshots.

Received messages
    A message received under DuplicateElimination has one record per MessageId, its duplicate-elimination
    record; copies received without DuplicateElimination are each stored, with an inbox entry each
    (ebMS2 §6.6 rows 6 and 8: every copy is delivered). Inbox entries are therefore named by the stored
    copy's id (:attr:`InboundMessage.id`), not by MessageId.

Errors
    ``DuplicateMessage`` (an outbound or inbound MessageId already stored) leaves the transaction usable:
    the runtime then answers the duplicate from the stored record (ebMS2 §6.5.5). ``UnknownMessage`` /
    ``UnknownBlob`` report a reference to nothing. Any other failure of the database surfaces as
    :class:`StoreError`; after an exception other than ``DuplicateMessage`` the transaction must be left
    (the ``with`` block rolls it back). Bad arguments (a naive datetime, a negative limit) are
    ``ValueError`` naming the argument; a bad URL or an unreachable database is
    :class:`~msh.errors.ConfigurationError`.

Time
    Every timestamp is timezone-aware and stored as UTC; records carry aware UTC datetimes. Times that
    belong to the protocol (``received_at``, ``due_at``, the event time, the timer ``now``) are passed in
    by the caller, as the engine decides them; bookkeeping times (``created_at``, ``updated_at``) come from
    the store's ``clock`` (``datetime.now(UTC)`` unless one is given).

Timers
    A timer is a row (message id, kind, ``due_at``). ``claim_due_timers(now, owner, lease, limit)`` leases
    due timers to ``owner`` until ``now + lease``; a timer whose lease expired (its owner died) is due
    again and can be claimed by anyone. The owner executes the timer's work in a later transaction and
    removes the timer there with ``complete_timer(id, owner)``, which is refused (returns False) if the
    lease was lost meanwhile. On PostgreSQL the claim uses ``FOR UPDATE SKIP LOCKED``: several processes
    never claim the same timer. ``schedule_timer`` adds a row (replacing the message's timers
    of that kind with ``replace_existing``); ``cancel_timers`` removes a message's timers (all, or of one
    kind). Timer owners must be unique per process run (e.g. host, pid and a random part).

Payloads
    A message body (the SOAP part and the payloads with their MIME framing, exactly as sent or received)
    is a blob: ``put_blob(stream)`` stores it chunk by chunk inside the transaction, ``open_blob(id)``
    reads it back one chunk at a time (:mod:`msh.store.blobs`); neither holds a whole body in memory.

The engine's actions (``msh.engine``), as the runtime maps them
    ``Reliability`` <-> :class:`ReliabilityParameters` (the same xs:durations); the engine's
    ``OutboundState.failure`` (an Issue) <-> ``failure_code``/``failure_severity``/``failure_description``;
    ``ScheduleTimer`` -> ``schedule_timer(..., replace_existing=True)``; ``CancelTimer`` ->
    ``cancel_timers``; ``StoreInbound`` -> ``insert_inbound`` (``record_ack`` serialised as
    ``ack_envelope``, ``digest`` as ``content_digest``); ``RecordAcknowledgment`` ->
    ``record_acknowledgment``; ``StoredInbound`` <- ``find_inbound`` plus ``inbox_entry`` (delivered = the
    entry is no longer new, digest = ``content_digest``); ``ConflictingDuplicate`` -> ``append_event``
    (kind ``conflicting-duplicate``, both digests in the detail).
"""

from __future__ import annotations

import json
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from types import TracebackType
from typing import BinaryIO

from cpa.duration import XsDuration
from msh.errors import MshError, Severity

__all__ = [
    "Clock",
    "Direction",
    "DuplicateMessage",
    "Event",
    "InboundMessage",
    "InboxEntry",
    "InboxState",
    "OutboundMessage",
    "OutboundState",
    "OutboundStatus",
    "ReliabilityParameters",
    "Store",
    "StoreError",
    "Timer",
    "Transaction",
    "TransactionLost",
    "UnknownBlob",
    "UnknownMessage",
    "utc_now",
]

Clock = Callable[[], datetime]
"""A source of the current time as an aware datetime."""


def utc_now() -> datetime:
    """The current time, aware, in UTC (the default store clock)."""
    return datetime.now(UTC)


# ---------------------------------------------------------------------------------------------- errors


class StoreError(MshError):
    """The store could not do what was asked (the database failed, or the call is not allowed here)."""


class DuplicateMessage(StoreError):
    """A message with this MessageId is already stored; the transaction stays usable."""

    def __init__(self, message_id: str, direction: Direction) -> None:
        super().__init__(f"{direction.value} message {message_id!r} is already stored")
        self.message_id = message_id
        self.direction = direction


class TransactionLost(StoreError):
    """The database ended the whole transaction (e.g. a disk or I/O error rolled it back): nothing of it
    will be committed and it must be left."""


class UnknownMessage(StoreError, LookupError):
    """No stored message has this MessageId (or no inbox entry this id)."""

    def __init__(self, key: str | int, what: str = "message") -> None:
        super().__init__(f"no {what} {key!r} is stored")
        self.key = key


class UnknownBlob(StoreError, LookupError):
    """No blob has this id."""

    def __init__(self, blob_id: int) -> None:
        super().__init__(f"no blob {blob_id} is stored")
        self.blob_id = blob_id


# --------------------------------------------------------------------------------------------- records


class OutboundStatus(StrEnum):
    """Where a sent message stands (the engine's sending state)."""

    PENDING = "pending"
    AWAITING_ACK = "awaiting-ack"
    DELIVERED = "delivered"
    FAILED = "failed"


class InboxState(StrEnum):
    """Where a received message stands for the receiving application."""

    NEW = "new"
    DELIVERED_TO_APP = "delivered-to-app"
    ACKNOWLEDGED_BY_APP = "acknowledged-by-app"


class Direction(StrEnum):
    """Which way a message went, seen from this MSH."""

    OUTBOUND = "outbound"
    INBOUND = "inbound"


def check_aware(name: str, value: datetime | None) -> datetime | None:
    """``value`` in UTC; ``ValueError`` naming ``name`` for a naive datetime (or a non-datetime)."""
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise ValueError(f"{name} must be a datetime, not {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be a timezone-aware datetime (UTC), got the naive {value.isoformat()}")
    return value.astimezone(UTC)


def check_text(name: str, value: object) -> str:
    """``value`` if it is a non-empty string; ``ValueError`` naming ``name`` otherwise."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name} must be a non-empty string")
    return value


def _set(obj: object, name: str, value: object) -> None:
    object.__setattr__(obj, name, value)


@dataclass(frozen=True, slots=True)
class ReliabilityParameters:
    """How a sent message is retried (CPA ReliableMessaging, PersistDuration; header TimeToLive).

    ``retries`` and ``retry_interval`` come from the CPA (ebMS2 §6.4.3, §6.4.4), the first resend waits
    ``first_resend_timeout`` (DESIGN.md §3), ``persist_duration`` bounds the whole effort (ebMS2
    §6.4.6) and ``time_to_live`` is the header's TimeToLive (ebMS2 §6.4.5); ``ack_requested`` says whether
    an Acknowledgment is awaited at all, and ``ack_actor`` from whom (the AckRequested ``SOAP:actor``,
    ebMS2 §6.3.1.1; None for the default, the To Party MSH). Durations are xs:durations as the agreement
    wrote them (months kept: :class:`~cpa.duration.XsDuration`), never negative; the SQL store keeps them
    as their canonical text (``P1M``, ``PT30S``).
    """

    retries: int
    retry_interval: XsDuration
    first_resend_timeout: XsDuration
    persist_duration: XsDuration | None = None
    time_to_live: datetime | None = None
    ack_requested: bool = False
    ack_actor: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.retries, bool) or not isinstance(self.retries, int) or self.retries < 0:
            raise ValueError("ReliabilityParameters.retries must be an int >= 0")
        for name in ("retry_interval", "first_resend_timeout", "persist_duration"):
            value = getattr(self, name)
            if value is None and name == "persist_duration":
                continue
            if not isinstance(value, XsDuration) or value.is_negative:
                raise ValueError(f"ReliabilityParameters.{name} must be an XsDuration that is not negative")
        _set(self, "time_to_live", check_aware("ReliabilityParameters.time_to_live", self.time_to_live))
        _set(self, "ack_requested", bool(self.ack_requested))


@dataclass(frozen=True, slots=True)
class OutboundState:
    """The engine's state of one sent message (everything that changes as it is sent and retried).

    ``failure_*`` describe why the message failed (ebMS2 §6.5.7: DeliveryFailure, Error if no attempt
    ever reached the peer, Warning if one did); ``next_due_at`` is when the engine wants to act next.
    """

    status: OutboundStatus = OutboundStatus.PENDING
    attempts: int = 0
    first_sent_at: datetime | None = None
    reached_peer: bool = False
    next_due_at: datetime | None = None
    failure_code: str | None = None
    failure_severity: Severity | None = None
    failure_description: str | None = None

    def __post_init__(self) -> None:
        try:
            _set(self, "status", OutboundStatus(self.status))
        except ValueError:
            raise ValueError(f"OutboundState.status must be one of {[s.value for s in OutboundStatus]}") from None
        if isinstance(self.attempts, bool) or not isinstance(self.attempts, int) or self.attempts < 0:
            raise ValueError("OutboundState.attempts must be an int >= 0")
        _set(self, "first_sent_at", check_aware("OutboundState.first_sent_at", self.first_sent_at))
        _set(self, "next_due_at", check_aware("OutboundState.next_due_at", self.next_due_at))
        _set(self, "reached_peer", bool(self.reached_peer))
        if self.failure_severity is not None:
            try:
                _set(self, "failure_severity", Severity(self.failure_severity))
            except ValueError:
                raise ValueError("OutboundState.failure_severity must be Error or Warning") from None


@dataclass(frozen=True, slots=True)
class OutboundMessage:
    """A sent message as stored: its routing, the identical bytes to (re)send, its parameters and state.

    ``body_blob_id`` names the complete HTTP body (SOAP part and payloads with their MIME framing) and
    ``content_type`` the Content-Type header value (boundary and start included) sent with it: together
    they re-send the identical message (DESIGN.md §5.1).
    """

    message_id: str
    cpaid: str
    conversation_id: str
    service: str
    action: str
    from_party: str | None
    to_party: str
    endpoint_url: str
    content_type: str
    body_blob_id: int
    parameters: ReliabilityParameters
    state: OutboundState
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class InboundMessage:
    """A received message as stored, and for a message received under DuplicateElimination its
    duplicate-elimination record (ebMS2 §6.4.1).

    ``id`` is the store's number for this copy (also its inbox entry's id). ``ack_envelope`` is the
    Acknowledgment sent for it, its first response (``None`` while none was sent), resent unchanged for
    every duplicate (DESIGN.md §5.2, ebMS2 §6.5.5); ``duplicate_count`` counts the duplicates since.
    ``content_digest`` identifies its content (:func:`msh.ebms.digest.content_digest`), to tell an
    identical copy from another message under the same MessageId (ebMS2 §6.5.6); ``None`` for a copy
    stored before the store kept digests (schema revision 0003).
    """

    id: int
    message_id: str
    duplicate_elimination: bool
    from_party: str
    to_party: str | None
    cpaid: str
    conversation_id: str
    service: str
    action: str
    received_at: datetime
    content_type: str
    body_blob_id: int
    ack_envelope: bytes | None
    duplicate_count: int
    last_duplicate_at: datetime | None
    content_digest: str | None = None


@dataclass(frozen=True, slots=True)
class InboxEntry:
    """A received message as the receiving application sees it (DESIGN.md §5.3).

    ``id`` is the stored copy's :attr:`InboundMessage.id`: without DuplicateElimination one MessageId can
    have several entries, each delivered once.
    """

    id: int
    message_id: str
    state: InboxState
    received_at: datetime
    delivered_at: datetime | None
    acknowledged_at: datetime | None


@dataclass(frozen=True, slots=True)
class Timer:
    """Work due at ``due_at`` for a message; leased to ``lease_owner`` until ``lease_until`` once claimed."""

    id: int
    message_id: str
    kind: str
    due_at: datetime
    lease_owner: str | None
    lease_until: datetime | None


@dataclass(frozen=True, slots=True)
class Event:
    """One entry of the append-only journal (the source of the delivery reports)."""

    id: int
    at: datetime
    kind: str
    message_id: str | None
    direction: Direction | None
    detail: dict[str, object]


def normalise_detail(detail: Mapping[str, object] | None) -> dict[str, object]:
    """``detail`` as it will read back from JSON (``ValueError`` if it cannot be stored as JSON)."""
    if detail is None:
        return {}
    try:
        result: dict[str, object] = json.loads(json.dumps(dict(detail), allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"event detail must be JSON-serialisable: {exc}") from None
    return result


def check_limit(limit: int) -> int:
    """``limit`` if it is an int of at least 1; ``ValueError`` otherwise."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError("limit must be an int >= 1")
    return limit


# ------------------------------------------------------------------------------------------------ ports


class Transaction(ABC):
    """One unit of work on the store; see the module docs for the rules shared by every method."""

    @property
    @abstractmethod
    def readonly(self) -> bool:
        """True for a transaction opened with ``readonly=True``."""

    @abstractmethod
    def savepoint(self) -> AbstractContextManager[None]:
        """A nested unit of work: ``with tx.savepoint(): ...``. When the block raises, the changes made in
        it, and only those, are undone and the exception propagates; the transaction stays usable (this
        is how several callers' work shares one commit, :mod:`msh.store.writer`). Savepoints nest.
        Refused (:class:`StoreError`) in a read-only transaction. If the database lost the whole
        transaction meanwhile, leaving the block raises :class:`TransactionLost`."""

    # -- blobs

    @abstractmethod
    def put_blob(self, source: BinaryIO | bytes) -> int:
        """Store the content of ``source`` (read chunk by chunk to its end); return the new blob's id."""

    @abstractmethod
    def open_blob(self, blob_id: int) -> BinaryIO:
        """A reader of the blob that fetches one chunk at a time; usable until the transaction ends."""

    @abstractmethod
    def blob_size(self, blob_id: int) -> int:
        """The blob's length in bytes (for a Content-Length)."""

    # -- outbound

    @abstractmethod
    def insert_outbound(
        self,
        *,
        message_id: str,
        cpaid: str,
        conversation_id: str,
        service: str,
        action: str,
        to_party: str,
        endpoint_url: str,
        content_type: str,
        body_blob_id: int,
        parameters: ReliabilityParameters,
        from_party: str | None = None,
        state: OutboundState | None = None,
    ) -> OutboundMessage:
        """Record a message to send (before its first transmission, DESIGN.md §5.1).

        ``state`` defaults to pending with no attempt. :class:`DuplicateMessage` if the MessageId is
        already stored, :class:`UnknownBlob` if ``body_blob_id`` names no blob.
        """

    @abstractmethod
    def get_outbound(self, message_id: str, *, for_update: bool = False) -> OutboundMessage | None:
        """The stored message, or None. ``for_update`` locks the row until the transaction ends
        (PostgreSQL; SQLite transactions are serialised anyway; ignored in a read-only transaction)."""

    @abstractmethod
    def update_outbound_state(self, message_id: str, state: OutboundState) -> None:
        """Replace the message's state (:class:`UnknownMessage` if it is not stored)."""

    @abstractmethod
    def outbound_status(self, message_id: str) -> OutboundState | None:
        """Just the state of a sent message (what the sending application asks), or None."""

    # -- inbound

    @abstractmethod
    def find_inbound(self, message_id: str) -> InboundMessage | None:
        """The first stored copy of a received MessageId (for a message received under
        DuplicateElimination, its duplicate-elimination record), or None if it was never received."""

    @abstractmethod
    def get_inbound(self, inbound_id: int) -> InboundMessage | None:
        """The stored copy with this :attr:`InboundMessage.id` (an inbox entry's id), or None."""

    @abstractmethod
    def insert_inbound(
        self,
        *,
        message_id: str,
        from_party: str,
        cpaid: str,
        conversation_id: str,
        service: str,
        action: str,
        received_at: datetime,
        content_type: str,
        body_blob_id: int,
        ack_envelope: bytes | None,
        deliver: bool,
        duplicate_elimination: bool = True,
        to_party: str | None = None,
        content_digest: str | None = None,
    ) -> InboundMessage:
        """Record a received message and, with ``deliver``, its inbox entry in the same transaction
        (DESIGN.md §5.2, §5.3); ``ack_envelope`` is the Acknowledgment about to be sent (ebMS2 §6.5.3),
        ``content_digest`` the digest of its content (kept as given, never compared here).

        With ``duplicate_elimination`` the record is the MessageId's duplicate-elimination record:
        :class:`DuplicateMessage` if one is already stored (nothing is written, the transaction stays
        usable). Without it, every copy is stored (ebMS2 §6.6: duplicates possible, each delivered).
        :class:`UnknownBlob` if ``body_blob_id`` names no blob.
        """

    @abstractmethod
    def increment_duplicate(self, message_id: str, at: datetime) -> int:
        """Count one more duplicate of a received message (received ``at``) on its first stored copy;
        return the new count (:class:`UnknownMessage` if the MessageId was never received)."""

    @abstractmethod
    def record_acknowledgment(self, message_id: str, ack_envelope: bytes) -> bool:
        """Store the Acknowledgment of a received message as its first response (ebMS2 §6.5.5 (2)), on its
        first stored copy, unless one is stored already; True if it was stored, False if one was there."""

    # -- inbox

    @abstractmethod
    def inbox_list(self, state: InboxState | None = None, *, limit: int = 100) -> list[InboxEntry]:
        """Inbox entries (in ``state``, or all), oldest received first (then in the order stored)."""

    @abstractmethod
    def inbox_entry(self, entry_id: int) -> InboxEntry | None:
        """One inbox entry (its id is the stored copy's :attr:`InboundMessage.id`), or None."""

    @abstractmethod
    def inbox_mark_delivered(self, entry_id: int, at: datetime) -> InboxEntry:
        """The application has been given the message: new -> delivered-to-app (else unchanged)."""

    @abstractmethod
    def inbox_ack(self, entry_id: int, at: datetime) -> InboxEntry:
        """The application confirms it holds the message: -> acknowledged-by-app (idempotent).

        An entry acknowledged while still new also gets ``delivered_at = at``.
        """

    # -- timers

    @abstractmethod
    def schedule_timer(self, message_id: str, kind: str, due_at: datetime, *, replace_existing: bool = False) -> Timer:
        """Add a timer row; with ``replace_existing`` the message's timers of this ``kind`` are removed first
        (the engine's "set or replace the message's timer")."""

    @abstractmethod
    def cancel_timers(self, message_id: str, kind: str | None = None) -> int:
        """Remove the message's timers (of ``kind`` only, if given); return how many were removed."""

    @abstractmethod
    def claim_due_timers(self, now: datetime, owner: str, lease: timedelta, limit: int = 100) -> list[Timer]:
        """Lease to ``owner`` until ``now + lease`` up to ``limit`` timers due at ``now`` and not leased
        (or whose lease has expired), earliest first; return them with their new lease."""

    @abstractmethod
    def complete_timer(self, timer_id: int, owner: str) -> bool:
        """Remove a timer whose work is done; False (nothing removed) if ``owner`` no longer holds it."""

    @abstractmethod
    def next_timer_due(self) -> datetime | None:
        """When the next timer becomes claimable (its due time, or the end of its lease), or None."""

    # -- journal

    @abstractmethod
    def append_event(
        self,
        *,
        at: datetime,
        kind: str,
        message_id: str | None = None,
        direction: Direction | None = None,
        detail: Mapping[str, object] | None = None,
    ) -> int:
        """Append an event to the journal; return its id.

        Ids increase in the order events are appended. With several writers on PostgreSQL a transaction
        may commit after another one that appended a higher id, so an export that reads on from the last
        id it saw should leave out the newest events (e.g. those of the last minute) until the next run.
        """

    @abstractmethod
    def list_events(self, after_id: int = 0, *, limit: int = 1000) -> list[Event]:
        """Journal events with an id above ``after_id``, in id order (the export reads on from there)."""

    @abstractmethod
    def message_events(
        self, message_id: str, *, direction: Direction | None = None, limit: int = 1000
    ) -> list[Event]:
        """The journal of one message (``direction``: only the events of that direction), in the order
        appended: the newest ``limit`` of them when there are more (what ``msh status`` shows)."""


class Store(ABC):
    """The durable store; see the module docs. Use :meth:`open` to get one."""

    @staticmethod
    def open(
        url: str,
        *,
        clock: Clock | None = None,
        migrate: bool = True,
        blob_chunk_size: int | None = None,
    ) -> Store:
        """Open the store at ``url`` (a path, an SQLAlchemy URL or ``memory:``).

        A SQL store is upgraded to the newest schema revision unless ``migrate`` is False (then a store
        that is not up to date is a :class:`~msh.errors.ConfigurationError`). ``blob_chunk_size`` (bytes,
        at most 1 MiB, the default) is the size of the chunks payloads are stored in.
        """
        if url.strip().lower() in ("memory:", "memory://"):
            from msh.store.memory import MemoryStore

            return MemoryStore(clock=clock, blob_chunk_size=blob_chunk_size)
        from msh.store.sql import SqlStore

        return SqlStore.open(url, clock=clock, migrate=migrate, blob_chunk_size=blob_chunk_size)

    def __init__(self) -> None:
        self._local = threading.local()

    @property
    @abstractmethod
    def url(self) -> str:
        """Where the store is (passwords hidden)."""

    @abstractmethod
    def transaction(self, *, readonly: bool = False) -> AbstractContextManager[Transaction]:
        """A transaction: ``with store.transaction() as tx: ...`` commits at the end of the block."""

    @abstractmethod
    def open_blob(self, blob_id: int) -> BinaryIO:
        """A reader of a committed blob, outside any transaction (e.g. while sending it over HTTP).

        Each chunk is fetched in its own short read; committed blobs never change.
        """

    @abstractmethod
    def close(self) -> None:
        """Release connections; the store cannot be used afterwards."""

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- for implementations

    def _enter_thread(self) -> None:
        """Refuse a second transaction on this thread (it would wait for the first on SQLite)."""
        if getattr(self._local, "busy", False):
            raise StoreError("a transaction is already open on this thread; finish it before opening another")
        self._local.busy = True

    def _leave_thread(self) -> None:
        self._local.busy = False
