"""The store port's part for MessageOrder (ebMS2 §9; the decisions are :mod:`msh.engine.ordering`'s).

:class:`OrderPort` is a base of :class:`~msh.store.transaction.Transaction`: its public methods check their
arguments and call the storage steps (the abstract ``_``-methods) each store implements.

Sending
    ``sequence_counter(cpaid, conversation_id)`` / ``set_sequence_counter``: the next SequenceNumber of a
    conversation we send in, and whether its sequence broke (the sequence is locked until the end of the
    transaction on PostgreSQL, so two processes never give one number twice); ``break_sequence`` marks it
    broken (one of its messages failed); ``ordered_under_way`` counts the conversation's messages with a
    SequenceNumber that are not final (a broken sequence starts again only when none is, and the message
    after a restart's 0 waits for it the same way).
Receiving
    A sequence is named by (CPAId, From party, ConversationId): ``order_position`` / ``set_order_position``
    keep the number the next message must have, how many are held and since when, whether it broke;
    ``held_entries`` lists the inbox entries held for their turn, each with its SequenceNumber, in the order
    received; ``release_held`` offers one to the application (state ``new``, entering the inbox then),
    ``abandon_held`` ends it (state ``abandoned``: never offered). A message is stored held by
    ``insert_inbound(hold=True)``.
The gap timer
    One timer row of kind ``order-gap`` per sequence with held messages; its key (in the timer's
    ``message_id``) is :func:`sequence_key` of the sequence, read back by :func:`sequence_of`.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import replace
from datetime import datetime

from msh.engine.ordering import OrderPosition, SequenceCounter
from msh.store import records, rules
from msh.store.errors import UnknownMessage

__all__ = ["OrderPort", "SequenceKey", "sequence_key", "sequence_of"]

SequenceKey = tuple[str, str, str]
"""A received sequence: (CPAId, From party, ConversationId)."""


def sequence_key(key: SequenceKey) -> str:
    """The text that names a received sequence in its gap timer row."""
    return "order-gap:" + json.dumps(list(key), separators=(",", ":"))


def sequence_of(text: str) -> SequenceKey | None:
    """The sequence a gap timer's key names (None: not such a key)."""
    if not text.startswith("order-gap:"):
        return None
    try:
        cpaid, from_party, conversation_id = json.loads(text.removeprefix("order-gap:"))
    except (ValueError, TypeError):
        return None
    return str(cpaid), str(from_party), str(conversation_id)


def _counter(counter: object) -> SequenceCounter:
    if not isinstance(counter, SequenceCounter):
        raise ValueError("counter must be a SequenceCounter (msh.engine.ordering)")
    rules.sequence_number("counter.next_number", counter.next_number)
    return counter


def _position(position: object) -> OrderPosition:
    if not isinstance(position, OrderPosition):
        raise ValueError("position must be an OrderPosition (msh.engine.ordering)")
    if position.next_number is not None:
        rules.sequence_number("position.next_number", position.next_number)
    if position.held < 0:
        raise ValueError(f"position.held must be 0 or more, got {position.held}")
    rules.aware("position.gap_since", position.gap_since)
    rules.aware("position.offered_at", position.offered_at)
    return position


class OrderPort(ABC):
    """The MessageOrder methods of a transaction (see the module docs)."""

    @abstractmethod
    def _live(self) -> None: ...

    @abstractmethod
    def _writable(self) -> None: ...

    # -- sending

    def sequence_counter(self, cpaid: str, conversation_id: str) -> SequenceCounter | None:
        """The conversation's counter, or None when none of its messages was given a number yet (locked until
        the end of the transaction on PostgreSQL, unless read-only)."""
        self._live()
        return self._sequence_counter(rules.text("cpaid", cpaid), rules.text("conversation_id", conversation_id))

    def set_sequence_counter(self, cpaid: str, conversation_id: str, counter: SequenceCounter) -> None:
        """Keep ``counter`` for the conversation (created or replaced)."""
        self._writable()
        self._set_sequence_counter(
            rules.text("cpaid", cpaid), rules.text("conversation_id", conversation_id), _counter(counter)
        )

    def break_sequence(self, cpaid: str, conversation_id: str) -> None:
        """Mark the conversation's sequence broken (one of its messages failed); nothing when it has no counter."""
        counter = self.sequence_counter(cpaid, conversation_id)
        if counter is not None and not counter.broken:
            self.set_sequence_counter(cpaid, conversation_id, replace(counter, broken=True, restarted=False))

    def ordered_under_way(self, cpaid: str, conversation_id: str) -> int:
        """How many of the conversation's messages with a SequenceNumber (ours) are not final."""
        self._live()
        return self._ordered_under_way(rules.text("cpaid", cpaid), rules.text("conversation_id", conversation_id))

    # -- receiving

    def order_position(self, key: SequenceKey) -> OrderPosition | None:
        """The received sequence's position, or None (locked until the end of the transaction on PostgreSQL)."""
        self._live()
        return self._order_position(rules.sequence_key(key))

    def set_order_position(self, key: SequenceKey, position: OrderPosition) -> None:
        """Keep ``position`` for the received sequence (created or replaced)."""
        self._writable()
        self._set_order_position(rules.sequence_key(key), _position(position))

    def held_entries(self, key: SequenceKey) -> list[tuple[int, records.InboxEntry]]:
        """The sequence's entries held for their turn, each with its SequenceNumber, in the order received."""
        self._live()
        return self._held_entries(rules.sequence_key(key))

    def release_held(self, entry_id: int, offered_at: datetime) -> records.InboxEntry:
        """Offer a held entry to the application (its turn has come): held -> new, entering the inbox
        ``offered_at`` (its ``received_at``, by which the inbox orders what it offers)."""
        return self._move_held(entry_id, records.InboxState.NEW, rules.required_aware("offered_at", offered_at))

    def abandon_held(self, entry_id: int) -> records.InboxEntry:
        """End a held entry that can never be presented in order: held -> abandoned (never offered)."""
        return self._move_held(entry_id, records.InboxState.ABANDONED)

    def _move_held(
        self, entry_id: int, state: records.InboxState, offered_at: datetime | None = None
    ) -> records.InboxEntry:
        self._writable()
        entry = self._inbox_entry(entry_id, for_update=True)
        if entry is None:
            raise UnknownMessage(entry_id, "inbox entry")
        if entry.state is not records.InboxState.HELD:
            raise ValueError(f"inbox entry {entry_id} is {entry.state.value}, not held")
        moved = records.InboxEntry(entry.id, entry.message_id, state, offered_at or entry.received_at, None, None)
        self._set_inbox_entry(moved)
        return moved

    # -- storage steps

    @abstractmethod
    def _inbox_entry(self, entry_id: int, *, for_update: bool) -> records.InboxEntry | None: ...

    @abstractmethod
    def _set_inbox_entry(self, entry: records.InboxEntry) -> None: ...

    @abstractmethod
    def _sequence_counter(self, cpaid: str, conversation_id: str) -> SequenceCounter | None:
        """The counter row, or None (locked for update where the store can)."""

    @abstractmethod
    def _set_sequence_counter(self, cpaid: str, conversation_id: str, counter: SequenceCounter) -> None:
        """Insert or replace the counter row."""

    @abstractmethod
    def _ordered_under_way(self, cpaid: str, conversation_id: str) -> int:
        """Outbound messages of kind own with a sequence number, not delivered, sent or failed."""

    @abstractmethod
    def _order_position(self, key: SequenceKey) -> OrderPosition | None:
        """The position row, or None (locked for update where the store can)."""

    @abstractmethod
    def _set_order_position(self, key: SequenceKey, position: OrderPosition) -> None:
        """Insert or replace the position row."""

    @abstractmethod
    def _held_entries(self, key: SequenceKey) -> list[tuple[int, records.InboxEntry]]:
        """(SequenceNumber, entry) of the held entries of the sequence, in the order received."""
