"""The transaction port, written once on a handful of storage steps (docs/design.md §2, §5).

:class:`Transaction` is what the runtime uses: every public method checks its arguments
(:mod:`msh.store.rules`), refuses writes in a read-only transaction and use after the end, builds the
records and decides what a change does, then calls the storage steps (the abstract ``_``-methods: put a
record, find one, change a column) that each store implements. So the SQL store (:mod:`msh.store.sql`)
and the in-memory twin (:mod:`msh.store.memory`) differ only in how they store; the rules themselves
are in :mod:`msh.store.api`.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Collection
from contextlib import AbstractContextManager
from dataclasses import replace
from datetime import datetime, timedelta
from typing import BinaryIO

from msh.engine import OutboundState, OutboundStatus
from msh.store import journal, records, rules
from msh.store.app_port import AppPort
from msh.store.blobs import open_chunks
from msh.store.errors import DuplicateMessage, StoreError, UnknownBlob, UnknownMessage
from msh.store.events import EventKind
from msh.store.journal_steps import JournalSteps
from msh.store.listing import ListingPort
from msh.store.order_port import OrderPort
from msh.store.retention_port import RetentionPort

__all__ = ["BlobInfo", "Transaction"]

BlobInfo = tuple[int, int]
"""A stored blob's (chunk count, size in bytes)."""


class Transaction(JournalSteps, AppPort, OrderPort, ListingPort, RetentionPort):
    """One unit of work on the store; see :mod:`msh.store.api` for the rules shared by every method.

    The public methods are the port; each applies its rules and calls the storage steps (the abstract
    ``_``-methods) that a store implements.
    """

    def __init__(self, now: Callable[[], datetime], readonly: bool) -> None:
        self._now = now
        self._readonly = readonly
        self.closed = False
        # The journal facts of the messages this transaction wrote or read: (MessageId, direction) -> facts.
        self._facts: dict[tuple[str, records.Direction], journal.MessageFacts] = {}
        self.appended: list[records.Event] = []
        """The events appended in this transaction but in savepoints rolled back, in order; each with its id
        once written, at the latest at the commit (when :mod:`msh.store.writer` hands them to its watchers)."""

    @property
    def readonly(self) -> bool:
        """True for a transaction opened with ``readonly=True``."""
        return self._readonly

    def _live(self) -> None:
        if self.closed:
            raise StoreError("the transaction has ended; open a new one")

    def _writable(self) -> None:
        self._live()
        if self._readonly:
            raise StoreError("this transaction is read-only; open store.transaction() to write")

    @abstractmethod
    def savepoint(self) -> AbstractContextManager[None]:
        """A nested unit of work: ``with tx.savepoint(): ...``. When the block raises, the changes made in
        it, and only those, are undone and the exception propagates; the transaction stays usable (this
        is how several callers' work shares one commit, :mod:`msh.store.writer`). Savepoints nest.
        Refused (:class:`StoreError`) in a read-only transaction. If the database lost the whole
        transaction meanwhile, leaving the block raises :class:`TransactionLost`."""

    # -- blobs

    def put_blob(self, source: BinaryIO | bytes) -> int:
        """Store the content of ``source`` (read chunk by chunk to its end); return the new blob's id."""
        self._writable()
        return self._put_blob(source)

    def _existing_blob(self, blob_id: int) -> BlobInfo:
        self._live()
        info = self._blob_info(blob_id)
        if info is None:
            raise UnknownBlob(blob_id)
        return info

    def open_blob(self, blob_id: int) -> BinaryIO:
        """A reader of the blob that fetches one chunk at a time; usable until the transaction ends."""
        count, size = self._existing_blob(blob_id)

        def fetch(seq: int) -> bytes | None:
            self._live()
            return self._chunk(blob_id, seq)

        return open_chunks(fetch, count, size)

    def blob_size(self, blob_id: int) -> int:
        """The blob's length in bytes (for a Content-Length)."""
        return self._existing_blob(blob_id)[1]

    # -- outbound

    def insert_outbound(
        self,
        *,
        state: OutboundState,
        cpaid: str,
        conversation_id: str,
        service: str,
        action: str,
        to_party: str,
        endpoint_url: str,
        content_type: str,
        body_blob_id: int,
        from_party: str | None = None,
        kind: records.OutboundKind = records.OutboundKind.OWN,
        sequence_number: int | None = None,
    ) -> records.OutboundMessage:
        """Record a message to send (before its first transmission, docs/design.md §5.1) with the sending
        machine's ``state`` of it (its MessageId and reliability included). ``kind``: the application's
        own message (the default), one this MSH forwards as an intermediary, or a signal of this MSH.

        :class:`DuplicateMessage` if the MessageId is already stored, :class:`UnknownBlob` if
        ``body_blob_id`` names no blob.
        """
        self._writable()
        kind = rules.outbound_kind(kind)
        state = rules.outbound_state(state, kind)
        if sequence_number is not None:
            rules.sequence_number("sequence_number", sequence_number)
        size = self._existing_blob(body_blob_id)[1]
        now = self._now()
        record = records.OutboundMessage(
            cpaid=cpaid,
            conversation_id=conversation_id,
            service=service,
            action=action,
            from_party=from_party,
            to_party=to_party,
            endpoint_url=endpoint_url,
            content_type=content_type,
            body_blob_id=body_blob_id,
            state=state,
            created_at=now,
            updated_at=now,
            kind=kind,
            sequence_number=sequence_number,
        )
        if not self._add_outbound(record):
            raise DuplicateMessage(state.message_id, records.Direction.OUTBOUND)
        self._facts[(state.message_id, records.Direction.OUTBOUND)] = journal.facts_of_outbound(record, size)
        return record

    def get_outbound(self, message_id: str, *, for_update: bool = False) -> records.OutboundMessage | None:
        """The stored message, or None. ``for_update`` locks the row until the transaction ends
        (PostgreSQL; SQLite transactions are serialised anyway; ignored in a read-only transaction)."""
        self._live()
        return self._outbound(message_id, for_update=for_update and not self._readonly)

    def update_outbound_state(self, state: OutboundState) -> None:
        """Replace the state of the message ``state.message_id`` (all of it, reliability included) and
        its ``updated_at`` (:class:`UnknownMessage` if it is not stored)."""
        state = rules.outbound_state(state)
        self._writable()
        if not self._set_outbound_state(state, self._now()):
            raise UnknownMessage(state.message_id, "outbound message")

    def outbound_status(self, message_id: str) -> OutboundState | None:
        """Just the state of a sent message (what the sending application asks), or None."""
        self._live()
        return self._outbound_state(message_id)

    def requeue_outbound(
        self, *, state: OutboundState, body_blob_id: int, content_type: str, endpoint_url: str
    ) -> records.OutboundMessage:
        """Send another copy of a message this MSH forwards: the row of ``state.message_id`` gets the new
        ``state`` (a fresh sending machine state), the new body, its ``content_type`` and ``endpoint_url``,
        and ``updated_at`` now; the rest (kind, agreement, parties, service, action, conversation,
        ``created_at``) stays. The old body blob is deleted unless another message row still names it.

        An intermediary never eliminates duplicates and forwards every copy it receives (ebMS2 §10.1), so
        only rows of kind :attr:`~msh.store.records.OutboundKind.FORWARD` or
        :attr:`~msh.store.records.OutboundKind.SIGNAL` can be requeued: :class:`UnknownMessage` if the
        MessageId is not stored, ``ValueError`` if the row is the application's own message,
        :class:`UnknownBlob` if ``body_blob_id`` names no blob. Returns the row as it now is.
        """
        self._writable()
        state = rules.outbound_state(state)
        rules.text("content_type", content_type)
        rules.text("endpoint_url", endpoint_url)
        size = self._existing_blob(body_blob_id)[1]
        current = self._outbound(state.message_id, for_update=True)
        if current is None:
            raise UnknownMessage(state.message_id, "outbound message")
        # ebMS2 §10.1: only what this MSH forwards (or its own hop-by-hop signals) is replaced by a new copy.
        if current.kind is records.OutboundKind.OWN:
            raise ValueError(
                f"outbound message {state.message_id!r} is the application's own message (kind 'own'), and "
                "cannot be replaced by another copy: only messages forwarded as an intermediary and signals "
                "are requeued; to change its state use update_outbound_state"
            )
        state = rules.outbound_state(state, current.kind)
        record = replace(
            current,
            state=state,
            body_blob_id=body_blob_id,
            content_type=content_type,
            endpoint_url=endpoint_url,
            updated_at=self._now(),
        )
        if not self._replace_outbound(record):
            raise UnknownMessage(state.message_id, "outbound message")
        self._facts[(state.message_id, records.Direction.OUTBOUND)] = journal.facts_of_outbound(record, size)
        if current.body_blob_id != body_blob_id:
            # The body of the replaced copy is no longer sent; another row may still name it (then it stays).
            self._delete_unused_blob(current.body_blob_id)
        return record

    def list_outbound(
        self,
        *,
        kind: records.OutboundKind | None = None,
        status: OutboundStatus | None = None,
        limit: int = 100,
        after: str | None = None,
    ) -> list[records.OutboundMessage]:
        """Up to ``limit`` sent messages (of ``kind`` and in ``status``, when given), oldest first: ordered by
        ``created_at``, then by MessageId (code point order).

        ``after`` is a MessageId of an earlier page (the last one seen): the listing goes on with the
        messages after it in that order (:class:`UnknownMessage` if it is not stored). ``ValueError`` for
        an unknown kind or status or a limit below 1.
        """
        rules.limit(limit)
        wanted_kind = None if kind is None else rules.outbound_kind(kind)
        wanted_status = None if status is None else rules.outbound_status(status)
        self._live()
        position = None
        if after is not None:
            rules.text("after", after)
            anchor = self._outbound(after, for_update=False)
            if anchor is None:
                raise UnknownMessage(after, "outbound message (the 'after' of a listing)")
            position = (anchor.created_at, anchor.message_id)
        return self._outbound_list(wanted_kind, wanted_status, position, limit)

    # -- inbound

    def find_inbound(self, message_id: str) -> records.InboundMessage | None:
        """The first stored copy of a received MessageId (for a message received under
        DuplicateElimination, its duplicate-elimination record), or None if it was never received."""
        self._live()
        return self._first_inbound(message_id)

    def get_inbound(self, inbound_id: int) -> records.InboundMessage | None:
        """The stored copy with this :attr:`InboundMessage.id` (an inbox entry's id), or None."""
        self._live()
        return self._inbound(inbound_id)

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
        hold: bool = False,
        sequence_number: int | None = None,
        offered_at: datetime | None = None,
    ) -> records.InboundMessage:
        """Record a received message and, with ``deliver``, its inbox entry in the same transaction
        (docs/design.md §5.2, §5.3); ``ack_envelope`` is the Acknowledgment about to be sent (ebMS2 §6.5.3),
        ``content_digest`` the digest of its content (kept as given, never compared here); ``hold``: its inbox
        entry is held until its turn in its sequence comes (ebMS2 §9.1.1; ``deliver`` must be False),
        ``sequence_number`` is its SequenceNumber, and ``offered_at`` when its inbox entry is offered (its
        ``received_at``; default: when received).

        With ``duplicate_elimination`` the record is the MessageId's duplicate-elimination record:
        :class:`DuplicateMessage` if one is already stored (nothing is written, the transaction stays
        usable). Without it, every copy is stored (ebMS2 §6.6: duplicates possible, each delivered).
        :class:`UnknownBlob` if ``body_blob_id`` names no blob.
        """
        self._writable()
        rules.text("message_id", message_id)
        received = rules.required_aware("received_at", received_at)
        if sequence_number is not None:
            rules.sequence_number("sequence_number", sequence_number)
        if hold and deliver:
            raise ValueError("a message is either delivered (deliver) or held for its turn (hold), not both")
        size = self._existing_blob(body_blob_id)[1]
        record = records.InboundMessage(
            id=0,  # the store numbers the copy
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
            sequence_number=sequence_number,
        )
        inbound_id = self._add_inbound(record)
        if inbound_id is None:
            # ebMS2 §6.4.1: one duplicate-elimination record per MessageId; nothing was written.
            raise DuplicateMessage(message_id, records.Direction.INBOUND)
        record = replace(record, id=inbound_id)
        self._facts.setdefault((message_id, records.Direction.INBOUND), journal.facts_of_inbound(record, size))
        if deliver or hold:
            # docs/design.md §5.3: the inbox entry is written in the duplicate-elimination record's transaction.
            offered = rules.aware("offered_at", offered_at)
            self._add_inbox_entry(rules.new_entry(record, hold=hold, offered_at=offered))
        return record

    def increment_duplicate(self, message_id: str, at: datetime) -> int:
        """Count one more duplicate of a received message (received ``at``) on its first stored copy;
        return the new count (:class:`UnknownMessage` if the MessageId was never received)."""
        moment = rules.required_aware("at", at)
        self._writable()
        count = self._count_duplicate(message_id, moment)
        if count is None:
            raise UnknownMessage(message_id, "inbound message")
        return count

    def record_acknowledgment(self, message_id: str, ack_envelope: bytes) -> bool:
        """Store the Acknowledgment of a received message as its first response (ebMS2 §6.5.5 (2)), on its
        first stored copy, unless one is stored already; True if it was stored, False if one was there."""
        if not isinstance(ack_envelope, (bytes, bytearray)):
            raise ValueError("ack_envelope must be bytes")
        self._writable()
        stored = self._keep_first_ack(message_id, bytes(ack_envelope))
        if stored is None:
            raise UnknownMessage(message_id, "inbound message")
        return stored

    # -- inbox

    def inbox_list(self, state: records.InboxState | None = None, *, limit: int = 100) -> list[records.InboxEntry]:
        """Inbox entries (in ``state``, or all), oldest received first (then in the order stored)."""
        rules.limit(limit)
        wanted = None if state is None else rules.inbox_state(state)
        self._live()
        return self._inbox_entries(wanted, limit)

    def inbox_entry(self, entry_id: int) -> records.InboxEntry | None:
        """One inbox entry (its id is the stored copy's :attr:`InboundMessage.id`), or None."""
        self._live()
        return self._inbox_entry(entry_id, for_update=False)

    def _move_entry(
        self, entry_id: int, at: datetime, move: Callable[[records.InboxEntry, datetime], records.InboxEntry]
    ) -> records.InboxEntry:
        moment = rules.required_aware("at", at)
        self._writable()
        entry = self._inbox_entry(entry_id, for_update=True)
        if entry is None:
            raise UnknownMessage(entry_id, "inbox entry")
        moved = move(entry, moment)
        if moved != entry:
            self._set_inbox_entry(moved)
            # The journal records the application's side too: given the message, then holding it.
            if entry.delivered_at is None and moved.delivered_at is not None:
                self._journal_entry(moved, EventKind.APP_DELIVERED, moment)
            if moved.state is records.InboxState.ACKNOWLEDGED_BY_APP:
                self._journal_entry(moved, EventKind.APP_TAKEN, moment)
        return moved

    def inbox_mark_delivered(self, entry_id: int, at: datetime) -> records.InboxEntry:
        """The application has been given the message: new -> delivered-to-app (else unchanged)."""
        return self._move_entry(entry_id, at, rules.delivered)

    def inbox_ack(self, entry_id: int, at: datetime) -> records.InboxEntry:
        """The application confirms it holds the message: -> acknowledged-by-app (idempotent).

        An entry acknowledged while still new also gets ``delivered_at = at``.
        """
        return self._move_entry(entry_id, at, rules.acknowledged)

    # -- timers

    def schedule_timer(
        self, message_id: str, kind: records.TimerKind, due_at: datetime, *, replace_existing: bool = False
    ) -> records.Timer:
        """Add a timer row; with ``replace_existing`` the message's timers of this ``kind`` are removed first
        (the engine's "set or replace the message's timer")."""
        rules.text("message_id", message_id)
        kind = rules.timer_kind(kind)
        due = rules.required_aware("due_at", due_at)
        self._writable()
        if replace_existing:
            self._remove_timers(message_id, kind)
        return records.Timer(self._add_timer(message_id, kind, due), message_id, kind, due, None, None)

    def cancel_timers(self, message_id: str, kind: records.TimerKind | None = None) -> int:
        """Remove the message's timers (of ``kind`` only, if given); return how many were removed."""
        which = None if kind is None else rules.timer_kind(kind)
        self._writable()
        return self._remove_timers(message_id, which)

    def claim_due_timers(self, now: datetime, owner: str, lease: timedelta, limit: int = 100) -> list[records.Timer]:
        """Lease to ``owner`` until ``now + lease`` up to ``limit`` timers due at ``now`` and not leased
        (or whose lease has expired), earliest first; return them with their new lease."""
        moment = rules.required_aware("now", now)
        rules.text("owner", owner)
        until = moment + rules.lease(lease)
        rules.limit(limit)
        self._writable()
        claimed = [replace(t, lease_owner=owner, lease_until=until) for t in self._claimable_timers(moment, limit)]
        if claimed:
            self._lease_timers(claimed)
        return claimed

    def complete_timer(self, timer_id: int, owner: str) -> bool:
        """Remove a timer whose work is done; False (nothing removed) if ``owner`` no longer holds it."""
        self._writable()
        return self._remove_leased_timer(timer_id, owner)

    def renew_timer_leases(self, timer_ids: Collection[int], owner: str, now: datetime, lease: timedelta) -> int:
        """Extend to ``now + lease`` the leases ``owner`` still holds on ``timer_ids`` (the heartbeat of a
        process still working on them, docs/cluster.md); how many it still held (a timer missing from the
        count was completed, or taken over by another process after its lease ran out)."""
        moment = rules.required_aware("now", now)
        rules.text("owner", owner)
        until = moment + rules.lease(lease)
        self._writable()
        ids = sorted(set(timer_ids))
        return self._renew_leases(ids, owner, until) if ids else 0

    def release_timers(self, owner: str) -> int:
        """End every lease ``owner`` holds (a clean stop): its timers can be claimed by another process at once,
        at their due time; how many were released."""
        rules.text("owner", owner)
        self._writable()
        return self._release_leases(owner)

    def next_timer_due(self) -> datetime | None:
        """When the next timer becomes claimable (its due time, or the end of its lease), or None."""
        self._live()
        return self._next_timer_due()

    def backlog(self, now: datetime) -> records.Backlog:
        """What waits at ``now``: timers due and not taken, inbox entries by state (:class:`records.Backlog`)."""
        moment = rules.required_aware("now", now)
        self._live()
        due, oldest_due = self._timers_due(moment)
        counts, oldest_waiting = self._inbox_counts()
        return records.Backlog(due, oldest_due, tuple(sorted(counts.items())), oldest_waiting)

    # -- storage steps (each store's own)

    @abstractmethod
    def _timers_due(self, now: datetime) -> tuple[int, datetime | None]:
        """How many timers are claimable at ``now``, and the earliest due time among them."""

    @abstractmethod
    def _inbox_counts(self) -> tuple[dict[records.InboxState, int], datetime | None]:
        """Inbox entries per state, and the earliest reception of those new or delivered-to-app."""

    @abstractmethod
    def _put_blob(self, source: BinaryIO | bytes) -> int:
        """Store ``source`` chunk by chunk; the new blob's id."""

    @abstractmethod
    def _blob_info(self, blob_id: int) -> BlobInfo | None:
        """The blob's (chunk count, size), or None if there is no such blob."""

    @abstractmethod
    def _chunk(self, blob_id: int, seq: int) -> bytes | None:
        """Chunk ``seq`` of the blob, or None past its end."""

    @abstractmethod
    def _add_outbound(self, record: records.OutboundMessage) -> bool:
        """Store ``record``; False (nothing written) if its MessageId is stored already."""

    @abstractmethod
    def _outbound(self, message_id: str, *, for_update: bool) -> records.OutboundMessage | None:
        """The stored message (its row locked until the end of the transaction with ``for_update``)."""

    @abstractmethod
    def _set_outbound_state(self, state: OutboundState, at: datetime) -> bool:
        """Replace the message's state, updated ``at``; False if the message is not stored."""

    @abstractmethod
    def _outbound_state(self, message_id: str) -> OutboundState | None:
        """The stored message's state, or None."""

    @abstractmethod
    def _replace_outbound(self, record: records.OutboundMessage) -> bool:
        """Replace the stored row of ``record.message_id`` by ``record`` (its state, body, content type,
        endpoint and ``updated_at``); False if the message is not stored."""

    @abstractmethod
    def _delete_unused_blob(self, blob_id: int) -> bool:
        """Delete the blob and its chunks unless a stored message (outbound or inbound) names it as its
        body; whether it was deleted (in one step)."""

    @abstractmethod
    def _outbound_list(
        self,
        kind: records.OutboundKind | None,
        status: OutboundStatus | None,
        after: tuple[datetime, str] | None,
        limit: int,
    ) -> list[records.OutboundMessage]:
        """Up to ``limit`` messages (of ``kind``, in ``status``) ordered by (``created_at``, MessageId in code
        point order), only those after the position ``after`` = (``created_at``, MessageId) when given."""

    @abstractmethod
    def _first_inbound(self, message_id: str) -> records.InboundMessage | None:
        """The first stored copy of the MessageId, or None."""

    @abstractmethod
    def _inbound(self, inbound_id: int) -> records.InboundMessage | None:
        """The stored copy with this id, or None."""

    @abstractmethod
    def _add_inbound(self, record: records.InboundMessage) -> int | None:
        """Store a new copy (``record.id`` is to be assigned); its id, or None (nothing written) if it is
        a duplicate-elimination record and the MessageId has one already."""

    @abstractmethod
    def _add_inbox_entry(self, entry: records.InboxEntry) -> None:
        """Store a new inbox entry."""

    @abstractmethod
    def _count_duplicate(self, message_id: str, at: datetime) -> int | None:
        """Add one to the duplicate count of the MessageId's first copy (last duplicate ``at``); the new
        count, or None if the MessageId was never received. One step: concurrent duplicates all count."""

    @abstractmethod
    def _keep_first_ack(self, message_id: str, ack_envelope: bytes) -> bool | None:
        """Store ``ack_envelope`` on the MessageId's first copy unless it has one (in one step); whether it
        was stored, or None if the MessageId was never received."""

    @abstractmethod
    def _inbox_entries(self, state: records.InboxState | None, limit: int) -> list[records.InboxEntry]:
        """Up to ``limit`` entries (in ``state``, or all), oldest received first, then in the order stored."""

    @abstractmethod
    def _inbox_entry(self, entry_id: int, *, for_update: bool) -> records.InboxEntry | None:
        """One entry, or None (locked until the end of the transaction with ``for_update``)."""

    @abstractmethod
    def _set_inbox_entry(self, entry: records.InboxEntry) -> None:
        """Replace the stored entry ``entry.id`` (its state and times)."""

    @abstractmethod
    def _add_timer(self, message_id: str, kind: records.TimerKind, due_at: datetime) -> int:
        """Store a new timer, not leased; its id."""

    @abstractmethod
    def _remove_timers(self, message_id: str, kind: records.TimerKind | None) -> int:
        """Remove the message's timers (of ``kind``, or all); how many."""

    @abstractmethod
    def _claimable_timers(self, now: datetime, limit: int) -> list[records.Timer]:
        """Up to ``limit`` timers claimable at ``now`` (:func:`msh.store.rules.claimable_at`), earliest due
        first (then in the order stored); rows another transaction is claiming are passed over."""

    @abstractmethod
    def _lease_timers(self, claimed: list[records.Timer]) -> None:
        """Store the leases of the ``claimed`` timers (all with the same owner and end)."""

    @abstractmethod
    def _renew_leases(self, timer_ids: list[int], owner: str, until: datetime) -> int:
        """Set the lease end of those of ``timer_ids`` that ``owner`` holds to ``until``; how many."""

    @abstractmethod
    def _release_leases(self, owner: str) -> int:
        """Clear the lease of every timer ``owner`` holds; how many."""

    @abstractmethod
    def _remove_leased_timer(self, timer_id: int, owner: str) -> bool:
        """Remove the timer if ``owner`` holds it; whether it was removed."""

    @abstractmethod
    def _next_timer_due(self) -> datetime | None:
        """The earliest :func:`msh.store.rules.claimable_at` of all timers, or None."""
