"""The in-memory twin of the SQL store, for engine and runtime unit tests (docs/design.md §9).

It follows every rule of :mod:`msh.store.api` as the SQL store does (the same test suite runs on both;
the rules themselves are applied once for both by :mod:`msh.store.transaction`): transactions commit at the end
of the ``with`` block and roll back entirely when it raises, a duplicate MessageId raises
:class:`~msh.store.api.DuplicateMessage` and leaves the transaction usable, a read-only transaction
refuses writes, timers are leased and completed the same way, records are frozen snapshots and
timestamps aware UTC. It keeps the records as objects (a sent message's state is the engine's own).

How: dicts of frozen records behind one lock held for the whole transaction (one transaction at a time,
like a single SQLite writer). Every change inside a transaction is logged with the value it replaced;
a rollback puts the old values back in reverse order. Blobs written in a transaction are kept aside and
join the committed blobs at commit; blobs deleted in a transaction are hidden from it and leave the
committed blobs at commit (a reader outside the transaction sees them until then). Ids (blobs, timers,
events) are never reused, even after a rollback. Nothing survives the process: this store is for tests
and demonstrations, never for real traffic.
"""

from __future__ import annotations

import copy
import itertools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from typing import Any, BinaryIO, Final

from msh.engine import OutboundState, OutboundStatus
from msh.engine.ordering import OrderPosition, SequenceCounter
from msh.store import app_records, records, rules
from msh.store.api import Store
from msh.store.blobs import iter_chunks
from msh.store.memory_listing import MemoryListingSteps
from msh.store.memory_retention import MemoryRetentionSteps
from msh.store.order_port import SequenceKey
from msh.store.transaction import BlobInfo, Transaction

__all__ = ["MemoryStore"]

_MISSING: Final = object()


def _info(chunks: tuple[bytes, ...]) -> BlobInfo:
    return len(chunks), sum(len(c) for c in chunks)


def _nth(chunks: tuple[bytes, ...], seq: int) -> bytes | None:
    return chunks[seq] if seq < len(chunks) else None


def _own_copy(event: records.Event) -> records.Event:
    return replace(event, detail=copy.deepcopy(event.detail))


class _MemoryTransaction(MemoryListingSteps, MemoryRetentionSteps, Transaction):
    _store: MemoryStore

    def __init__(self, store: MemoryStore, readonly: bool) -> None:
        super().__init__(store.now, readonly)
        self._store = store
        self._undo: list[tuple[dict[Any, Any], object, object]] = []
        self.new_blobs: dict[int, tuple[bytes, ...]] = {}
        self.dropped_blobs: set[int] = set()

    # -- changes, and undoing them

    def _set(self, table: dict[Any, Any], key: object, value: object) -> None:
        self._undo.append((table, key, table.get(key, _MISSING)))
        table[key] = value

    def _remove(self, table: dict[Any, Any], key: object) -> None:
        self._undo.append((table, key, table[key]))
        del table[key]

    def rollback(self) -> None:
        self._undo_to(0)
        self.new_blobs.clear()
        self.dropped_blobs.clear()

    def commit(self) -> None:
        """Make the blobs written in this transaction committed ones, and drop those it deleted."""
        blobs = self._store.blobs
        blobs.update(self.new_blobs)
        for blob_id in self.dropped_blobs:
            blobs.pop(blob_id, None)

    def _undo_to(self, mark: int) -> None:
        while len(self._undo) > mark:
            table, key, old = self._undo.pop()
            if old is _MISSING:
                table.pop(key, None)
            else:
                table[key] = old

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        self._writable()
        mark = len(self._undo)
        appended = len(self.appended)
        blobs_before = set(self.new_blobs)
        dropped_before = set(self.dropped_blobs)
        try:
            yield
        except BaseException:
            self._undo_to(mark)
            del self.appended[appended:]  # its events are undone with it
            for blob_id in set(self.new_blobs) - blobs_before:
                del self.new_blobs[blob_id]
            self.dropped_blobs = dropped_before
            raise

    # -- blobs

    def _chunks(self, blob_id: int) -> tuple[bytes, ...] | None:
        if blob_id in self.dropped_blobs:
            return None
        chunks = self.new_blobs.get(blob_id)
        return self._store.blobs.get(blob_id) if chunks is None else chunks

    def _put_blob(self, source: BinaryIO | bytes) -> int:
        store = self._store
        blob_id = next(store.blob_ids)
        self.new_blobs[blob_id] = tuple(iter_chunks(source, store.blob_chunk_size))
        return blob_id

    def _blob_info(self, blob_id: int) -> BlobInfo | None:
        chunks = self._chunks(blob_id)
        return None if chunks is None else _info(chunks)

    def _chunk(self, blob_id: int, seq: int) -> bytes | None:
        chunks = self._chunks(blob_id)
        return None if chunks is None else _nth(chunks, seq)

    # -- outbound

    def _add_outbound(self, record: records.OutboundMessage) -> bool:
        if record.message_id in self._store.outbound:
            return False
        self._set(self._store.outbound, record.message_id, record)
        return True

    def _outbound(self, message_id: str, *, for_update: bool) -> records.OutboundMessage | None:
        return self._store.outbound.get(message_id)

    def _set_outbound_state(self, state: OutboundState, at: datetime) -> bool:
        record = self._store.outbound.get(state.message_id)
        if record is None:
            return False
        # The SQL store reads end_to_end back from the row's kind: so does its twin.
        state = rules.with_kind(state, record.kind)
        self._set(self._store.outbound, state.message_id, replace(record, state=state, updated_at=at))
        return True

    def _outbound_state(self, message_id: str) -> OutboundState | None:
        record = self._store.outbound.get(message_id)
        return None if record is None else record.state

    def _replace_outbound(self, record: records.OutboundMessage) -> bool:
        if record.message_id not in self._store.outbound:
            return False
        self._set(self._store.outbound, record.message_id, record)
        return True

    def _delete_unused_blob(self, blob_id: int) -> bool:
        store = self._store
        if self._chunks(blob_id) is None:
            return False
        if any(r.body_blob_id == blob_id for r in store.outbound.values()) or any(
            r.body_blob_id == blob_id for r in store.inbound.values()
        ):
            return False
        self.dropped_blobs.add(blob_id)
        return True

    def _outbound_list(
        self,
        kind: records.OutboundKind | None,
        status: OutboundStatus | None,
        after: tuple[datetime, str] | None,
        limit: int,
    ) -> list[records.OutboundMessage]:
        found = [
            r
            for r in self._store.outbound.values()
            if (kind is None or r.kind is kind)
            and (status is None or r.state.status is status)
            and (after is None or (r.created_at, r.message_id) > after)
        ]
        found.sort(key=lambda r: (r.created_at, r.message_id))
        return found[:limit]

    # -- inbound

    def _first_inbound(self, message_id: str) -> records.InboundMessage | None:
        first = self._store.first_copy.get(message_id)
        return None if first is None else self._store.inbound[first]

    def _inbound(self, inbound_id: int) -> records.InboundMessage | None:
        return self._store.inbound.get(inbound_id)

    def _add_inbound(self, record: records.InboundMessage) -> int | None:
        store = self._store
        message_id = record.message_id
        if record.duplicate_elimination and message_id in store.de_records:
            return None
        record = replace(record, id=next(store.inbound_ids))
        self._set(store.inbound, record.id, record)
        if message_id not in store.first_copy:
            self._set(store.first_copy, message_id, record.id)
        if record.duplicate_elimination:
            self._set(store.de_records, message_id, record.id)
        return record.id

    def _add_inbox_entry(self, entry: records.InboxEntry) -> None:
        self._set(self._store.inbox, entry.id, entry)

    def _count_duplicate(self, message_id: str, at: datetime) -> int | None:
        record = self._first_inbound(message_id)
        if record is None:
            return None
        count = record.duplicate_count + 1
        self._set(self._store.inbound, record.id, replace(record, duplicate_count=count, last_duplicate_at=at))
        return count

    def _keep_first_ack(self, message_id: str, ack_envelope: bytes) -> bool | None:
        record = self._first_inbound(message_id)
        if record is None:
            return None
        if record.ack_envelope is not None:
            return False
        self._set(self._store.inbound, record.id, replace(record, ack_envelope=ack_envelope))
        return True

    # -- inbox

    def _inbox_entries(self, state: records.InboxState | None, limit: int) -> list[records.InboxEntry]:
        entries = [e for e in self._store.inbox.values() if state is None or e.state is state]
        entries.sort(key=lambda e: (e.received_at, e.id))
        return entries[:limit]

    def _inbox_entry(self, entry_id: int, *, for_update: bool) -> records.InboxEntry | None:
        return self._store.inbox.get(entry_id)

    def _set_inbox_entry(self, entry: records.InboxEntry) -> None:
        self._set(self._store.inbox, entry.id, entry)

    # -- timers

    def _add_timer(self, message_id: str, kind: records.TimerKind, due_at: datetime) -> int:
        timer = records.Timer(next(self._store.timer_ids), message_id, kind, due_at, None, None)
        self._set(self._store.timers, timer.id, timer)
        return timer.id

    def _remove_timers(self, message_id: str, kind: records.TimerKind | None) -> int:
        timers = self._store.timers
        doomed = [t.id for t in timers.values() if t.message_id == message_id and (kind is None or t.kind is kind)]
        for timer_id in doomed:
            self._remove(timers, timer_id)
        return len(doomed)

    def _claimable_timers(self, now: datetime, limit: int) -> list[records.Timer]:
        due = [t for t in self._store.timers.values() if rules.claimable_at(t) <= now]
        due.sort(key=lambda t: (t.due_at, t.id))
        return due[:limit]

    def _lease_timers(self, claimed: list[records.Timer]) -> None:
        for timer in claimed:
            self._set(self._store.timers, timer.id, timer)

    def _renew_leases(self, timer_ids: list[int], owner: str, until: datetime) -> int:
        held = [t for i in timer_ids if (t := self._store.timers.get(i)) is not None and t.lease_owner == owner]
        for timer in held:
            self._set(self._store.timers, timer.id, replace(timer, lease_until=until))
        return len(held)

    def _release_leases(self, owner: str) -> int:
        held = [t for t in self._store.timers.values() if t.lease_owner == owner]
        for timer in held:
            self._set(self._store.timers, timer.id, replace(timer, lease_owner=None, lease_until=None))
        return len(held)

    def _remove_leased_timer(self, timer_id: int, owner: str) -> bool:
        timer = self._store.timers.get(timer_id)
        if timer is None or timer.lease_owner != owner:
            return False
        self._remove(self._store.timers, timer_id)
        return True

    def _timers_due(self, now: datetime) -> tuple[int, datetime | None]:
        due = [t.due_at for t in self._store.timers.values() if rules.claimable_at(t) <= now]
        return len(due), min(due, default=None)

    def _inbox_counts(self) -> tuple[dict[records.InboxState, int], datetime | None]:
        counts: dict[records.InboxState, int] = {}
        waiting = (records.InboxState.NEW, records.InboxState.DELIVERED_TO_APP)
        oldest: datetime | None = None
        for entry in self._store.inbox.values():
            counts[entry.state] = counts.get(entry.state, 0) + 1
            if entry.state in waiting and (oldest is None or entry.received_at < oldest):
                oldest = entry.received_at
        return counts, oldest

    def _next_timer_due(self) -> datetime | None:
        return min((rules.claimable_at(t) for t in self._store.timers.values()), default=None)

    # -- journal

    def _add_event(self, event: records.Event) -> None:
        event = event.with_id(next(self._store.event_ids))
        self._set(self._store.events, event.id, event)
        self.appended[-1] = event

    def _events_after(self, after_id: int, limit: int) -> list[records.Event]:
        found: list[records.Event] = []
        for event in self._store.events.values():
            if event.id > after_id:
                found.append(_own_copy(event))
                if len(found) >= limit:
                    break
        return found

    def _message_events(self, message_id: str, direction: records.Direction | None, limit: int) -> list[records.Event]:
        found = [
            event
            for event in self._store.events.values()
            if event.message_id == message_id and (direction is None or event.direction is direction)
        ]
        return [_own_copy(event) for event in found[-limit:]]

    # -- MessageOrder (msh.store.order_port)

    def _sequence_counter(self, cpaid: str, conversation_id: str) -> SequenceCounter | None:
        return self._store.counters.get((cpaid, conversation_id))

    def _set_sequence_counter(self, cpaid: str, conversation_id: str, counter: SequenceCounter) -> None:
        self._set(self._store.counters, (cpaid, conversation_id), counter)

    def _ordered_under_way(self, cpaid: str, conversation_id: str) -> int:
        return sum(
            1
            for r in self._store.outbound.values()
            if r.kind is records.OutboundKind.OWN
            and r.sequence_number is not None
            and r.cpaid == cpaid
            and r.conversation_id == conversation_id
            and not r.state.status.final
        )

    def _order_position(self, key: SequenceKey) -> OrderPosition | None:
        return self._store.positions.get(key)

    def _set_order_position(self, key: SequenceKey, position: OrderPosition) -> None:
        self._set(self._store.positions, key, position)

    def _held_entries(self, key: SequenceKey) -> list[tuple[int, records.InboxEntry]]:
        found = []
        for entry in self._store.inbox.values():
            if entry.state is not records.InboxState.HELD:
                continue
            record = self._store.inbound[entry.id]
            if (record.cpaid, record.from_party, record.conversation_id) == key and record.sequence_number is not None:
                found.append((record.sequence_number, entry))
        found.sort(key=lambda held: (held[1].received_at, held[1].id))
        return found

    # -- application interfaces (msh.store.app_port)

    def _app_request(self, message_id: str) -> app_records.AppRequest | None:
        return self._store.app_requests.get(message_id)

    def _add_app_request(self, request: app_records.AppRequest) -> bool:
        if request.message_id in self._store.app_requests:
            return False
        self._set(self._store.app_requests, request.message_id, request)
        return True

    def _purge_app_requests(self, before: datetime) -> int:
        old = [k for k, r in self._store.app_requests.items() if r.created_at < before]
        for key in old:
            self._remove(self._store.app_requests, key)
        return len(old)

    def _inbox_claim(self, entry_id: int) -> app_records.InboxClaim | None:
        return self._store.claims.get(entry_id)

    def _put_inbox_claim(self, claim: app_records.InboxClaim) -> bool:
        if claim.entry_id not in self._store.inbox:
            return False
        self._set(self._store.claims, claim.entry_id, claim)
        return True

    def _add_inbox_batch(self, batch: app_records.InboxBatch) -> bool:
        if batch.batch_id in self._store.batches:
            return False
        self._set(self._store.batches, batch.batch_id, batch)
        return True

    def _inbox_batch(self, batch_id: str) -> app_records.InboxBatch | None:
        return self._store.batches.get(batch_id)

    def _confirm_inbox_batch(self, batch_id: str, at: datetime) -> None:
        self._set(self._store.batches, batch_id, replace(self._store.batches[batch_id], confirmed_at=at))

    def _app_cursor(self, name: str) -> int:
        return self._store.cursors.get(name, 0)

    def _set_app_cursor(self, name: str, position: int) -> None:
        self._set(self._store.cursors, name, position)

    def _app_inbox(self, query: app_records.InboxQuery) -> list[app_records.AppInboxItem]:
        items = []
        for entry in self._store.inbox.values():
            claim = self._store.claims.get(entry.id)
            if not app_records.in_view(query.view, entry, claim, query.now):
                continue
            if query.received_before is not None and entry.received_at >= query.received_before:
                continue
            record = self._store.inbound[entry.id]
            wanted = (
                (query.cpaid, record.cpaid),
                (query.service, record.service),
                (query.action, record.action),
                (query.conversation_id, record.conversation_id),
            )
            if any(want is not None and want != have for want, have in wanted):
                continue
            priority = query.priority(record.cpaid, record.service, record.action)
            items.append(app_records.AppInboxItem.of(entry, record, claim, priority))
        items.sort(key=lambda i: (-i.priority, i.entry.received_at, i.entry.id))
        return items[: query.limit]


class MemoryStore(Store):
    """A store that lives in this process's memory (see the module docs); ``open_store("memory:")``."""

    def __init__(self, *, clock: records.Clock | None = None, blob_chunk_size: int | None = None) -> None:
        super().__init__(clock=clock, blob_chunk_size=blob_chunk_size)
        self._lock = threading.Lock()
        self.outbound: dict[str, records.OutboundMessage] = {}
        self.inbound: dict[int, records.InboundMessage] = {}
        self.first_copy: dict[str, int] = {}  # MessageId -> id of its first stored copy
        self.de_records: dict[str, int] = {}  # MessageId -> id of its duplicate-elimination record
        self.inbox: dict[int, records.InboxEntry] = {}
        self.app_requests: dict[str, app_records.AppRequest] = {}
        self.claims: dict[int, app_records.InboxClaim] = {}
        self.batches: dict[str, app_records.InboxBatch] = {}
        self.cursors: dict[str, int] = {}
        self.counters: dict[tuple[str, str], SequenceCounter] = {}
        self.positions: dict[SequenceKey, OrderPosition] = {}
        self.timers: dict[int, records.Timer] = {}
        self.events: dict[int, records.Event] = {}
        self.blobs: dict[int, tuple[bytes, ...]] = {}
        self.blob_ids = itertools.count(1)
        self.inbound_ids = itertools.count(1)
        self.timer_ids = itertools.count(1)
        self.event_ids = itertools.count(1)

    @property
    def url(self) -> str:
        return "memory:"

    @contextmanager
    def _begin(self, readonly: bool) -> Iterator[Transaction]:
        with self._lock:
            tx = _MemoryTransaction(self, readonly)
            try:
                yield tx
            except BaseException:
                tx.rollback()
                raise
            else:
                tx.commit()
            finally:
                tx.closed = True

    def _committed_blob(self, blob_id: int) -> BlobInfo | None:
        chunks = self.blobs.get(blob_id)
        return None if chunks is None else _info(chunks)

    def _committed_chunk(self, blob_id: int, seq: int) -> bytes | None:
        chunks = self.blobs.get(blob_id)
        return None if chunks is None else _nth(chunks, seq)

    def _release(self) -> None:
        """Nothing to release: the records go with the object."""
