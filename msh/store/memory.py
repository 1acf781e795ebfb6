"""The in-memory twin of the SQL store, for engine and runtime unit tests (DESIGN.md §9).

It follows every rule of :mod:`msh.store.api` as the SQL store does (the same test suite runs on both):
transactions commit at the end of the ``with`` block and roll back entirely when it raises, a duplicate
MessageId raises :class:`~msh.store.api.DuplicateMessage` and leaves the transaction usable, a read-only
transaction refuses writes, timers are leased and completed the same way, records are frozen snapshots
and timestamps aware UTC.

How: dicts of frozen records behind one lock held for the whole transaction (one transaction at a time,
like a single SQLite writer). Every change inside a transaction is logged with the value it replaced;
a rollback puts the old values back in reverse order. Blobs written in a transaction are kept aside and
join the committed blobs at commit. Ids (blobs, timers, events) are never reused, even after a rollback.
Nothing survives the process: this store is for tests and demonstrations, never for real traffic.
"""

from __future__ import annotations

import copy
import itertools
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, BinaryIO, Final

from msh.errors import ConfigurationError
from msh.store.api import (
    Clock,
    Direction,
    DuplicateMessage,
    Event,
    InboundMessage,
    InboxEntry,
    InboxState,
    OutboundMessage,
    OutboundState,
    ReliabilityParameters,
    Store,
    StoreError,
    Timer,
    Transaction,
    UnknownBlob,
    UnknownMessage,
    check_aware,
    check_limit,
    check_text,
    normalise_detail,
    utc_now,
)
from msh.store.blobs import DEFAULT_CHUNK_SIZE, MAX_CHUNK_SIZE, iter_chunks, open_chunks

__all__ = ["MemoryStore"]

_MISSING: Final = object()


class _MemoryTransaction(Transaction):
    def __init__(self, store: MemoryStore, readonly: bool) -> None:
        self._store = store
        self._readonly = readonly
        self._undo: list[tuple[dict[Any, Any], object, object]] = []
        self.new_blobs: dict[int, tuple[bytes, ...]] = {}
        self.closed = False

    @property
    def readonly(self) -> bool:
        return self._readonly

    # -- helpers

    def _use(self) -> MemoryStore:
        if self.closed:
            raise StoreError("the transaction has ended; open a new one")
        return self._store

    def _write(self) -> MemoryStore:
        store = self._use()
        if self._readonly:
            raise StoreError("this transaction is read-only; open store.transaction() to write")
        return store

    def _set(self, table: dict[Any, Any], key: object, value: object) -> None:
        self._undo.append((table, key, table.get(key, _MISSING)))
        table[key] = value

    def _remove(self, table: dict[Any, Any], key: object) -> None:
        self._undo.append((table, key, table[key]))
        del table[key]

    def rollback(self) -> None:
        self._undo_to(0)
        self.new_blobs.clear()

    def _undo_to(self, mark: int) -> None:
        while len(self._undo) > mark:
            table, key, old = self._undo.pop()
            if old is _MISSING:
                table.pop(key, None)
            else:
                table[key] = old

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        self._write()
        mark = len(self._undo)
        blobs_before = set(self.new_blobs)
        try:
            yield
        except BaseException:
            self._undo_to(mark)
            for blob_id in set(self.new_blobs) - blobs_before:
                del self.new_blobs[blob_id]
            raise

    def _chunks(self, blob_id: int) -> tuple[bytes, ...]:
        store = self._use()
        chunks = self.new_blobs.get(blob_id)
        if chunks is None:
            chunks = store.blobs.get(blob_id)
        if chunks is None:
            raise UnknownBlob(blob_id)
        return chunks

    # -- blobs

    def put_blob(self, source: BinaryIO | bytes) -> int:
        store = self._write()
        chunks = tuple(iter_chunks(source, store.blob_chunk_size))
        blob_id = next(store.blob_ids)
        self.new_blobs[blob_id] = chunks
        return blob_id

    def open_blob(self, blob_id: int) -> BinaryIO:
        chunks = self._chunks(blob_id)

        def fetch(seq: int) -> bytes | None:
            self._use()
            return chunks[seq] if seq < len(chunks) else None

        return open_chunks(fetch, len(chunks), sum(len(c) for c in chunks))

    def blob_size(self, blob_id: int) -> int:
        return sum(len(c) for c in self._chunks(blob_id))

    # -- outbound

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
        store = self._write()
        check_text("message_id", message_id)
        state = state or OutboundState()
        self._chunks(body_blob_id)
        if message_id in store.outbound:
            raise DuplicateMessage(message_id, Direction.OUTBOUND)
        now = store.now()
        record = OutboundMessage(
            message_id=message_id,
            cpaid=cpaid,
            conversation_id=conversation_id,
            service=service,
            action=action,
            from_party=from_party,
            to_party=to_party,
            endpoint_url=endpoint_url,
            content_type=content_type,
            body_blob_id=body_blob_id,
            parameters=parameters,
            state=state,
            created_at=now,
            updated_at=now,
        )
        self._set(store.outbound, message_id, record)
        return record

    def get_outbound(self, message_id: str, *, for_update: bool = False) -> OutboundMessage | None:
        return self._use().outbound.get(message_id)

    def update_outbound_state(self, message_id: str, state: OutboundState) -> None:
        if not isinstance(state, OutboundState):
            raise ValueError("state must be an OutboundState")
        store = self._write()
        record = store.outbound.get(message_id)
        if record is None:
            raise UnknownMessage(message_id, "outbound message")
        self._set(store.outbound, message_id, replace(record, state=state, updated_at=store.now()))

    def outbound_status(self, message_id: str) -> OutboundState | None:
        record = self._use().outbound.get(message_id)
        return None if record is None else record.state

    # -- inbound

    def _first(self, message_id: str) -> InboundMessage | None:
        store = self._use()
        first = store.first_copy.get(message_id)
        return None if first is None else store.inbound[first]

    def find_inbound(self, message_id: str) -> InboundMessage | None:
        return self._first(message_id)

    def get_inbound(self, inbound_id: int) -> InboundMessage | None:
        return self._use().inbound.get(inbound_id)

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
        store = self._write()
        check_text("message_id", message_id)
        received = check_aware("received_at", received_at)
        assert received is not None
        self._chunks(body_blob_id)
        if duplicate_elimination and message_id in store.de_records:
            raise DuplicateMessage(message_id, Direction.INBOUND)
        record = InboundMessage(
            id=next(store.inbound_ids),
            message_id=message_id,
            duplicate_elimination=bool(duplicate_elimination),
            from_party=from_party,
            to_party=to_party,
            cpaid=cpaid,
            conversation_id=conversation_id,
            service=service,
            action=action,
            received_at=received,
            content_type=content_type,
            body_blob_id=body_blob_id,
            ack_envelope=None if ack_envelope is None else bytes(ack_envelope),
            duplicate_count=0,
            last_duplicate_at=None,
            content_digest=content_digest,
        )
        self._set(store.inbound, record.id, record)
        if message_id not in store.first_copy:
            self._set(store.first_copy, message_id, record.id)
        if duplicate_elimination:
            self._set(store.de_records, message_id, record.id)
        if deliver:
            entry = InboxEntry(record.id, message_id, InboxState.NEW, received, None, None)
            self._set(store.inbox, record.id, entry)
        return record

    def increment_duplicate(self, message_id: str, at: datetime) -> int:
        moment = check_aware("at", at)
        store = self._write()
        record = self._first(message_id)
        if record is None:
            raise UnknownMessage(message_id, "inbound message")
        count = record.duplicate_count + 1
        self._set(store.inbound, record.id, replace(record, duplicate_count=count, last_duplicate_at=moment))
        return count

    def record_acknowledgment(self, message_id: str, ack_envelope: bytes) -> bool:
        if not isinstance(ack_envelope, (bytes, bytearray)):
            raise ValueError("ack_envelope must be bytes")
        store = self._write()
        record = self._first(message_id)
        if record is None:
            raise UnknownMessage(message_id, "inbound message")
        if record.ack_envelope is not None:
            return False
        self._set(store.inbound, record.id, replace(record, ack_envelope=bytes(ack_envelope)))
        return True

    # -- inbox

    def inbox_list(self, state: InboxState | None = None, *, limit: int = 100) -> list[InboxEntry]:
        check_limit(limit)
        wanted = None if state is None else InboxState(state)
        entries = [e for e in self._use().inbox.values() if wanted is None or e.state is wanted]
        entries.sort(key=lambda e: (e.received_at, e.id))
        return entries[:limit]

    def inbox_entry(self, entry_id: int) -> InboxEntry | None:
        return self._use().inbox.get(entry_id)

    def _entry(self, entry_id: int) -> InboxEntry:
        entry = self._use().inbox.get(entry_id)
        if entry is None:
            raise UnknownMessage(entry_id, "inbox entry")
        return entry

    def inbox_mark_delivered(self, entry_id: int, at: datetime) -> InboxEntry:
        moment = check_aware("at", at)
        store = self._write()
        entry = self._entry(entry_id)
        if entry.state is InboxState.NEW:
            entry = replace(entry, state=InboxState.DELIVERED_TO_APP, delivered_at=moment)
            self._set(store.inbox, entry_id, entry)
        return entry

    def inbox_ack(self, entry_id: int, at: datetime) -> InboxEntry:
        moment = check_aware("at", at)
        store = self._write()
        entry = self._entry(entry_id)
        if entry.state is not InboxState.ACKNOWLEDGED_BY_APP:
            entry = replace(
                entry,
                state=InboxState.ACKNOWLEDGED_BY_APP,
                acknowledged_at=moment,
                delivered_at=entry.delivered_at or moment,
            )
            self._set(store.inbox, entry_id, entry)
        return entry

    # -- timers

    def schedule_timer(self, message_id: str, kind: str, due_at: datetime, *, replace_existing: bool = False) -> Timer:
        check_text("message_id", message_id)
        check_text("kind", kind)
        due = check_aware("due_at", due_at)
        assert due is not None
        store = self._write()
        if replace_existing:
            self.cancel_timers(message_id, kind)
        timer = Timer(next(store.timer_ids), message_id, kind, due, None, None)
        self._set(store.timers, timer.id, timer)
        return timer

    def cancel_timers(self, message_id: str, kind: str | None = None) -> int:
        store = self._write()
        doomed = [
            t.id for t in store.timers.values() if t.message_id == message_id and (kind is None or t.kind == kind)
        ]
        for timer_id in doomed:
            self._remove(store.timers, timer_id)
        return len(doomed)

    def claim_due_timers(self, now: datetime, owner: str, lease: timedelta, limit: int = 100) -> list[Timer]:
        moment = check_aware("now", now)
        assert moment is not None
        check_text("owner", owner)
        if not isinstance(lease, timedelta) or lease <= timedelta(0):
            raise ValueError("lease must be a positive timedelta")
        check_limit(limit)
        store = self._write()
        due = [
            t
            for t in store.timers.values()
            if t.due_at <= moment and (t.lease_until is None or t.lease_until <= moment)
        ]
        due.sort(key=lambda t: (t.due_at, t.id))
        claimed = [replace(t, lease_owner=owner, lease_until=moment + lease) for t in due[:limit]]
        for timer in claimed:
            self._set(store.timers, timer.id, timer)
        return claimed

    def complete_timer(self, timer_id: int, owner: str) -> bool:
        store = self._write()
        timer = store.timers.get(timer_id)
        if timer is None or timer.lease_owner != owner:
            return False
        self._remove(store.timers, timer_id)
        return True

    def next_timer_due(self) -> datetime | None:
        times = [
            t.lease_until if t.lease_until is not None and t.lease_until > t.due_at else t.due_at
            for t in self._use().timers.values()
        ]
        return min(times, default=None)

    # -- journal

    def append_event(
        self,
        *,
        at: datetime,
        kind: str,
        message_id: str | None = None,
        direction: Direction | None = None,
        detail: Mapping[str, object] | None = None,
    ) -> int:
        moment = check_aware("at", at)
        assert moment is not None
        check_text("kind", kind)
        store = self._write()
        record = Event(
            next(store.event_ids),
            moment,
            kind,
            message_id,
            None if direction is None else Direction(direction),
            normalise_detail(detail),
        )
        self._set(store.events, record.id, record)
        return record.id

    def list_events(self, after_id: int = 0, *, limit: int = 1000) -> list[Event]:
        check_limit(limit)
        found: list[Event] = []
        for record in self._use().events.values():
            if record.id > after_id:
                found.append(replace(record, detail=copy.deepcopy(record.detail)))
                if len(found) >= limit:
                    break
        return found

    def message_events(
        self, message_id: str, *, direction: Direction | None = None, limit: int = 1000
    ) -> list[Event]:
        check_text("message_id", message_id)
        check_limit(limit)
        wanted = None if direction is None else Direction(direction)
        found = [
            replace(record, detail=copy.deepcopy(record.detail))
            for record in self._use().events.values()
            if record.message_id == message_id and (wanted is None or record.direction is wanted)
        ]
        return found[-limit:]


class MemoryStore(Store):
    """A store that lives in this process's memory (see the module docs); ``Store.open("memory:")``."""

    def __init__(self, *, clock: Clock | None = None, blob_chunk_size: int | None = None) -> None:
        super().__init__()
        if blob_chunk_size is None:
            blob_chunk_size = DEFAULT_CHUNK_SIZE
        if isinstance(blob_chunk_size, bool) or not 1 <= blob_chunk_size <= MAX_CHUNK_SIZE:
            raise ConfigurationError(f"blob_chunk_size must be a number of bytes from 1 to {MAX_CHUNK_SIZE} (1 MiB)")
        self.blob_chunk_size = blob_chunk_size
        self._clock: Clock = clock or utc_now
        self._lock = threading.Lock()
        self._closed = False
        self.outbound: dict[str, OutboundMessage] = {}
        self.inbound: dict[int, InboundMessage] = {}
        self.first_copy: dict[str, int] = {}  # MessageId -> id of its first stored copy
        self.de_records: dict[str, int] = {}  # MessageId -> id of its duplicate-elimination record
        self.inbox: dict[int, InboxEntry] = {}
        self.timers: dict[int, Timer] = {}
        self.events: dict[int, Event] = {}
        self.blobs: dict[int, tuple[bytes, ...]] = {}
        self.blob_ids = itertools.count(1)
        self.inbound_ids = itertools.count(1)
        self.timer_ids = itertools.count(1)
        self.event_ids = itertools.count(1)

    @property
    def url(self) -> str:
        return "memory:"

    def now(self) -> datetime:
        """The store clock's current time (aware UTC)."""
        value = check_aware("the store clock's time", self._clock())
        assert value is not None
        return value

    @contextmanager
    def transaction(self, *, readonly: bool = False) -> Iterator[Transaction]:
        if self._closed:
            raise StoreError("the store is closed")
        self._enter_thread()
        try:
            with self._lock:
                tx = _MemoryTransaction(self, readonly)
                try:
                    yield tx
                except BaseException:
                    tx.rollback()
                    raise
                else:
                    self.blobs.update(tx.new_blobs)
                finally:
                    tx.closed = True
        finally:
            self._leave_thread()

    def open_blob(self, blob_id: int) -> BinaryIO:
        if self._closed:
            raise StoreError("the store is closed")
        chunks = self.blobs.get(blob_id)
        if chunks is None:
            raise UnknownBlob(blob_id)

        def fetch(seq: int) -> bytes | None:
            if self._closed:
                raise StoreError("the store is closed")
            return chunks[seq] if seq < len(chunks) else None

        return open_chunks(fetch, len(chunks), sum(len(c) for c in chunks))

    def close(self) -> None:
        self._closed = True
