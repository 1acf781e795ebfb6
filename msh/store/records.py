"""What the store hands out: frozen records, the enums of its states and kinds, and its clock.

A sent message's state is the engine's own :class:`~msh.engine.OutboundState` (with its
:class:`~msh.engine.Reliability`, :class:`~msh.engine.OutboundStatus` and failure
:class:`~msh.errors.Issue`): the store keeps it as the engine made it, with no twin type and no
conversion in between (docs/design.md §2: the store is above the engine and may use its types, never the
reverse). Every timestamp of a record is an aware UTC datetime.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from msh.engine import OutboundKind as OutboundKind
from msh.engine import OutboundState

__all__ = [
    "Backlog",
    "Clock",
    "Direction",
    "Event",
    "InboundMessage",
    "InboxEntry",
    "InboxState",
    "OutboundKind",
    "OutboundMessage",
    "Timer",
    "TimerKind",
    "utc_now",
]

Clock = Callable[[], datetime]
"""A source of the current time as an aware datetime."""


def utc_now() -> datetime:
    """The current time, aware, in UTC (the default store clock)."""
    return datetime.now(UTC)


class InboxState(StrEnum):
    """Where a received message stands for the receiving application."""

    NEW = "new"
    DELIVERED_TO_APP = "delivered-to-app"
    ACKNOWLEDGED_BY_APP = "acknowledged-by-app"
    HELD = "held"
    """Stored and acknowledged, not yet offered: its turn in its sequence has not come (ebMS2 §9.1.1)."""
    ABANDONED = "abandoned"
    """Never offered: a message before it in its sequence never arrived (ebMS2 §9)."""

    @property
    def offered(self) -> bool:
        """Whether the application may be given the message (not held back by MessageOrder)."""
        return self not in (InboxState.HELD, InboxState.ABANDONED)


class Direction(StrEnum):
    """Which way a message went, seen from this MSH."""

    OUTBOUND = "outbound"
    INBOUND = "inbound"


class TimerKind(StrEnum):
    """What a timer row is for."""

    RETRY = "retry"
    """The sending state machine's timer (its ``next_due_at``): fires :class:`~msh.engine.TimerDue`."""

    TRANSMIT = "transmit"
    """A transmission not yet issued by this process: a message submitted by another process (``msh send``
    while ``msh serve`` runs) is picked up and transmitted by the server's timer loop."""

    ORDER_GAP = "order-gap"
    """A received sequence with held messages whose gap may not stay open longer (ebMS2 §9.1.1); its
    ``message_id`` names the sequence (:func:`msh.store.order_port.sequence_key`)."""


@dataclass(frozen=True, slots=True)
class OutboundMessage:
    """A sent message as stored: its routing, the identical bytes to (re)send, and the engine's state.

    ``body_blob_id`` names the complete HTTP body (SOAP part and payloads with their MIME framing) and
    ``content_type`` the Content-Type header value (boundary and start included) sent with it: together
    they re-send the identical message (docs/design.md §5.1). ``state`` is the sending state machine's state of
    the message (its MessageId, reliability parameters, status, attempts and failure). ``kind`` says whose
    message it is (:class:`OutboundKind`): the application's own, one forwarded as an intermediary, or a
    signal of this MSH.
    """

    cpaid: str
    conversation_id: str
    service: str
    action: str
    from_party: str | None
    to_party: str
    endpoint_url: str
    content_type: str
    body_blob_id: int
    state: OutboundState
    created_at: datetime
    updated_at: datetime
    kind: OutboundKind = OutboundKind.OWN
    sequence_number: int | None = None
    """Its SequenceNumber in its conversation (ebMS2 §9.1.1), for a message sent with MessageOrder."""

    @property
    def message_id(self) -> str:
        """The message's MessageId (its state's)."""
        return self.state.message_id


@dataclass(frozen=True, slots=True)
class InboundMessage:
    """A received message as stored, and for a message received under DuplicateElimination its
    duplicate-elimination record (ebMS2 §6.4.1).

    ``id`` is the store's number for this copy (also its inbox entry's id). ``ack_envelope`` is the
    Acknowledgment sent for it, its first response (``None`` while none was sent), resent unchanged for
    every duplicate (docs/design.md §5.2, ebMS2 §6.5.5); ``duplicate_count`` counts the duplicates since.
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
    sequence_number: int | None = None
    """Its SequenceNumber in its sequence (ebMS2 §9.1.1), for a message received with MessageOrder."""


@dataclass(frozen=True, slots=True)
class InboxEntry:
    """A received message as the receiving application sees it (docs/design.md §5.3).

    ``id`` is the stored copy's :attr:`InboundMessage.id`: without DuplicateElimination one MessageId can
    have several entries, each delivered once. ``received_at`` is when the message entered the inbox: when
    it was received, or, for a message held for its turn in a sequence (MessageOrder, ebMS2 §9.1.1), when
    its turn came (the inbox offers entries in this order; the stored copy keeps the time it was received).
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
    kind: TimerKind
    due_at: datetime
    lease_owner: str | None
    lease_until: datetime | None


@dataclass(frozen=True, slots=True)
class Event:
    """One entry of the append-only journal (the source of the delivery reports).

    Besides the free-form ``detail``, the facts the reports group and count by are typed fields
    (:mod:`msh.store.journal`): this MSH's ``role`` for the message (sender, receiver, intermediary), the
    agreement, both parties, service, action, conversation, the body's ``size`` in bytes, the transmission
    ``attempt``, and for a failure its ``severity`` and ``cause``; ``deadline`` is when the agreement's retry
    window ends (on the ``submitted`` event). None where the event has no such fact.
    """

    id: int
    at: datetime
    kind: str
    message_id: str | None
    direction: Direction | None
    detail: dict[str, object]
    role: str | None = None
    cpa_id: str | None = None
    from_party: str | None = None
    to_party: str | None = None
    service: str | None = None
    action: str | None = None
    conversation_id: str | None = None
    size: int | None = None
    attempt: int | None = None
    severity: str | None = None
    cause: str | None = None
    deadline: datetime | None = None

    def with_id(self, event_id: int) -> Event:
        """This event as the journal numbered it: ``dataclasses.replace`` without its per-call field walk
        (every event of every message passes here)."""
        return Event(event_id, *_EVENT_FIELDS_AFTER_ID(self))


_EVENT_FIELDS_AFTER_ID: Callable[[Event], tuple[Any, ...]] = operator.attrgetter(*(f.name for f in fields(Event)[1:]))


@dataclass(frozen=True, slots=True)
class Backlog:
    """What waits in the store at one moment (the gauges of :mod:`msh.admin`): the timers due and not taken
    by any process (``oldest_due``: the earliest one's due time), and the inbox entries in each state
    (``oldest_waiting``: when the earliest one the application has not settled yet, new or
    delivered-to-app, was received)."""

    timers_due: int
    oldest_due: datetime | None
    inbox: tuple[tuple[InboxState, int], ...]
    oldest_waiting: datetime | None
