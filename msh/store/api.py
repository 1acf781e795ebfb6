"""The store port: the durable state of the MSH, read and written in transactions (docs/design.md §2, §5, §8).

The store is the source of truth: every invariant of docs/design.md §5 is a property of the rows committed
through this port. Two implementations behave identically (the shared test suite runs on each):
:class:`~msh.store.sql.SqlStore` (SQLite file or PostgreSQL, the production store) and
:class:`~msh.store.memory.MemoryStore` (the in-memory twin for engine and runtime unit tests). Both are
implementations of the storage steps of :class:`Store` and :class:`~msh.store.transaction.Transaction`,
which apply the rules of this port (:mod:`msh.store.rules`) once for both; the records they hand out
are in :mod:`msh.store.records`, the errors in :mod:`msh.store.errors`.

Opening
    :func:`msh.store.open_store` takes a file path (an SQLite database file, created if absent), an
    SQLAlchemy URL (``sqlite:///path``, ``postgresql+psycopg://user@host/db``; ``postgresql://`` means
    psycopg 3) or ``memory:`` (the in-memory twin). A SQL store is migrated to the newest schema revision
    on opening.

Transactions
    ``with store.transaction() as tx:`` runs one unit of work: it commits when the block ends and rolls
    back when the block raises; nothing of a rolled-back transaction is ever visible. One transaction at
    a time per thread (opening a second one on the same thread raises :class:`StoreError`: it would wait
    for itself on SQLite). ``store.transaction(readonly=True)`` refuses every write (:class:`StoreError`)
    and on SQLite does not take the write lock. The records a transaction returns are frozen snapshots.

Sent messages
    The store speaks the engine's types: a sent message's state is the sending state machine's
    :class:`~msh.engine.OutboundState` (MessageId, :class:`~msh.engine.Reliability`,
    :class:`~msh.engine.OutboundStatus`, attempts, failure :class:`~msh.errors.Issue`), stored as the
    engine returned it and read back equal, its times in UTC and its failure as code, severity and
    description. The SQL store maps it to its columns in one place (:mod:`msh.store.sql.rows`: durations
    as canonical xs:duration text, the failure as three columns); the in-memory twin keeps the objects.
    Its status is one of pending, awaiting-ack, forwarded (an intermediary acknowledged it, the end-to-end
    acknowledgment is awaited), delivered and failed.

Kinds of sent messages
    Each row has an :class:`~msh.store.records.OutboundKind`: the application's own message (``own``, the
    default), a message this MSH forwards to the next hop as an intermediary (``forward``, ebMS2 §10) or
    a signal of this MSH sent hop by hop (``signal``). An intermediary forwards every copy it receives
    (ebMS2 §10.1: it never eliminates duplicates): ``requeue_outbound`` gives the row of a forwarded
    message or signal the new copy (a fresh state, the new body, content type and endpoint) and deletes
    the old body unless another row names it; the application's own messages are never replaced.
    ``list_outbound`` lists rows (of a kind, in a status) oldest first, a page after another.

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
    (the ``with`` block rolls it back). Bad arguments (a naive datetime, a negative limit, an unknown
    status) are ``ValueError`` naming the argument; a bad URL or an unreachable database is
    :class:`~msh.errors.ConfigurationError`.

Time
    Every timestamp is timezone-aware and stored as UTC; records carry aware UTC datetimes. Times that
    belong to the protocol (``received_at``, ``due_at``, the event time, the timer ``now``) are passed in
    by the caller, as the engine decides them; bookkeeping times (``created_at``, ``updated_at``) come from
    the store's ``clock`` (``datetime.now(UTC)`` unless one is given).

Timers
    A timer is a row (message id, :class:`TimerKind`, ``due_at``). ``claim_due_timers(now, owner, lease,
    limit)`` leases due timers to ``owner`` until ``now + lease``; a timer whose lease expired (its owner
    died) is due again and can be claimed by anyone. The owner executes the timer's work in a later
    transaction and removes the timer there with ``complete_timer(id, owner)``, which is refused (returns
    False) if the lease was lost meanwhile. On PostgreSQL the claim uses ``FOR UPDATE SKIP LOCKED``:
    several processes never claim the same timer. ``schedule_timer`` adds a row (replacing the message's
    timers of that kind with ``replace_existing``); ``cancel_timers`` removes a message's timers (all, or
    of one kind). Timer owners must be unique per process run (e.g. host, pid and a random part).

Payloads
    A message body (the SOAP part and the payloads with their MIME framing, exactly as sent or received)
    is a blob: ``put_blob(stream)`` stores it chunk by chunk inside the transaction, ``open_blob(id)``
    reads it back one chunk at a time (:mod:`msh.store.blobs`); neither holds a whole body in memory.
    A committed blob never changes; it is deleted only when ``requeue_outbound`` replaces the body of a
    forwarded message and no row names it any more (a reader still reading it may then fail with OSError).

The engine's actions (``msh.engine``), as the runtime executes them
    ``Submit``'s state -> ``insert_outbound(state=...)``; a new state -> ``update_outbound_state``;
    ``ScheduleTimer`` -> ``schedule_timer(..., TimerKind.RETRY, ..., replace_existing=True)``;
    ``CancelTimer`` -> ``cancel_timers``; ``StoreInbound`` -> ``insert_inbound`` (``record_ack``
    serialised as ``ack_envelope``, ``digest`` as ``content_digest``); ``RecordAcknowledgment`` ->
    ``record_acknowledgment``; ``StoredInbound`` <- ``find_inbound`` plus ``inbox_entry`` (delivered = the
    entry is no longer new, digest = ``content_digest``); ``ConflictingDuplicate`` -> ``append_event``
    (kind ``conflicting-duplicate``, both digests in the detail).
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from types import TracebackType
from typing import BinaryIO

from msh.store import rules
from msh.store.blobs import open_chunks

# What the port speaks of, also importable from here (each has its home module).
from msh.store.errors import DuplicateMessage as DuplicateMessage
from msh.store.errors import StoreError as StoreError
from msh.store.errors import TransactionLost as TransactionLost
from msh.store.errors import UnknownBlob as UnknownBlob
from msh.store.errors import UnknownMessage as UnknownMessage
from msh.store.events import EventKind as EventKind
from msh.store.records import Backlog as Backlog
from msh.store.records import Clock as Clock
from msh.store.records import Direction as Direction
from msh.store.records import Event as Event
from msh.store.records import InboundMessage as InboundMessage
from msh.store.records import InboxEntry as InboxEntry
from msh.store.records import InboxState as InboxState
from msh.store.records import OutboundKind as OutboundKind
from msh.store.records import OutboundMessage as OutboundMessage
from msh.store.records import Timer as Timer
from msh.store.records import TimerKind as TimerKind
from msh.store.records import utc_now as utc_now
from msh.store.transaction import BlobInfo
from msh.store.transaction import Transaction as Transaction

__all__ = ["Store"]


class Store(ABC):
    """The durable store; see the module docs. :func:`msh.store.open_store` opens one by its URL.

    Each store implements the storage steps (the abstract ``_``-methods); what every store does (the
    clock, the chunk size, one transaction at a time per thread, refusing work once closed) is here.
    """

    def __init__(self, *, clock: Clock | None = None, blob_chunk_size: int | None = None) -> None:
        self.blob_chunk_size = rules.chunk_size(blob_chunk_size)
        self._clock: Clock = clock or utc_now
        self._local = threading.local()
        self._closed = False

    @property
    @abstractmethod
    def url(self) -> str:
        """Where the store is (passwords hidden)."""

    def now(self) -> datetime:
        """The store clock's current time (aware UTC)."""
        return rules.required_aware("the store clock's time", self._clock())

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("the store is closed")

    @contextmanager
    def transaction(self, *, readonly: bool = False) -> Iterator[Transaction]:
        """A transaction: ``with store.transaction() as tx: ...`` commits at the end of the block."""
        self._check_open()
        # One transaction at a time per thread: a second one would wait for the first on SQLite.
        if getattr(self._local, "busy", False):
            raise StoreError("a transaction is already open on this thread; finish it before opening another")
        self._local.busy = True
        try:
            with self._begin(readonly) as tx:
                yield tx
        finally:
            self._local.busy = False

    def open_blob(self, blob_id: int) -> BinaryIO:
        """A reader of a committed blob, outside any transaction (e.g. while sending it over HTTP).

        Each chunk is fetched in its own short read; committed blobs never change (one is deleted only when
        ``requeue_outbound`` replaces it: a reader still reading it may then fail with OSError, "blob is damaged").
        """
        self._check_open()
        info = self._committed_blob(blob_id)
        if info is None:
            raise UnknownBlob(blob_id)

        def fetch(seq: int) -> bytes | None:
            self._check_open()
            return self._committed_chunk(blob_id, seq)

        return open_chunks(fetch, *info)

    def close(self) -> None:
        """Release connections; the store cannot be used afterwards."""
        if not self._closed:
            self._closed = True
            self._release()

    # -- storage steps (each store's own)

    @abstractmethod
    def _begin(self, readonly: bool) -> AbstractContextManager[Transaction]:
        """A transaction of this store: committed when the block ends, rolled back when it raises, and
        closed (``closed`` set) either way."""

    @abstractmethod
    def _committed_blob(self, blob_id: int) -> BlobInfo | None:
        """A committed blob's (chunk count, size), read outside any transaction; None if there is none."""

    @abstractmethod
    def _committed_chunk(self, blob_id: int, seq: int) -> bytes | None:
        """Chunk ``seq`` of a committed blob, read on its own; None past its end."""

    @abstractmethod
    def _release(self) -> None:
        """Release what the store holds (connections); called once, by :meth:`close`."""

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
