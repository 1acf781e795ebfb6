"""The operator's queries: sent and received messages, newest first and paged, and one message's history.

:class:`ListingPort` is a base of :class:`~msh.store.transaction.Transaction`: its public methods check their
arguments, decide what a row says, and call the storage steps (the abstract ``_``-methods) each store
implements (:mod:`msh.store.sql.listing_steps`, :mod:`msh.store.memory_listing`).

``list_messages(MessageFilter, now)``
    Sent messages (every outbound row: the application's own, forwards, signals; ``kind`` tells them
    apart) and received ones (each stored copy, by its inbox entry) as :class:`MessageRow`, newest first
    (by when submitted or received; at the same instant sent before received, then by MessageId, then by
    copy), at most ``limit`` per :class:`MessagePage`, whose ``next_cursor`` asks for the page after it.
    A row's ``status`` is in the project's one vocabulary: a sent message's
    :class:`~msh.engine.OutboundStatus` (pending, awaiting-ack, forwarded, delivered, sent, failed), a
    received one's :class:`~msh.store.inbox_status.InboxStatus` (available, leased, acknowledged,
    rejected, held, abandoned). Its ``partner`` is the other party: the To party of a sent message, the
    From party of a received one. ``last_error`` is why a sent message failed, else the cause of its last
    failed transmission (from the journal); for a received message the reason it was rejected.
``message_history(message_id)``
    Every journal event of the MessageId (both directions), in the order appended.
"""

from __future__ import annotations

import base64
import binascii
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from msh.engine import OutboundStatus
from msh.store import rules
from msh.store.app_records import InboxClaim
from msh.store.inbox_status import InboxStatus, inbox_status
from msh.store.records import Direction, Event, InboundMessage, InboxEntry, OutboundKind, OutboundMessage

__all__ = [
    "DEFAULT_LIMIT",
    "STATUSES",
    "ListedInbound",
    "ListedOutbound",
    "ListingPort",
    "MessageFilter",
    "MessagePage",
    "MessageRow",
    "Position",
    "decode_cursor",
    "encode_cursor",
]

DEFAULT_LIMIT = 50
"""Rows per page when the filter does not say."""

STATUSES: dict[str, Direction] = {
    **{s.value: Direction.OUTBOUND for s in OutboundStatus},
    **{s.value: Direction.INBOUND for s in InboxStatus},
}
"""Every status a row can have, with the direction whose vocabulary it belongs to."""

Position = tuple[datetime, str]
"""Where a row stands in the listing: (when submitted or received, its key); rows are listed in descending
order of position. The key of a sent message is ``o:`` + MessageId, of a received copy ``i:`` + its id
(20 digits), so at the same instant sent messages come before received ones."""

ListedOutbound = tuple[OutboundMessage, int | None]
"""A sent message as a store lists it: its record and the size of its stored body in bytes."""
ListedInbound = tuple[InboundMessage, InboxEntry, InboxClaim | None, int | None]
"""A received copy as a store lists it: its record, its inbox entry, its claim, its body's size in bytes."""


@dataclass(frozen=True, slots=True)
class MessageFilter:
    """Which messages to list (None: any); ``partner``: the party as listed (``type:value``) or its value
    alone; ``since``/``until``: submitted or received at or after ``since`` and before ``until``; ``cursor``:
    the ``next_cursor`` of the page before."""

    direction: Direction | None = None
    status: str | None = None
    partner: str | None = None
    cpa_id: str | None = None
    service: str | None = None
    action: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    limit: int = DEFAULT_LIMIT
    cursor: str | None = None


@dataclass(frozen=True, slots=True)
class MessageRow:
    """One listed message (see the module docs for ``status``, ``partner`` and ``last_error``).

    ``created_at`` is when it was submitted (sent) or received; ``updated_at`` when it last changed (its
    state, or for a received message its inbox entry or claim). ``attempts`` counts the transmissions of a
    sent message its journal holds (what went on the wire, all attempt series; None for a received one),
    ``duplicates`` the copies of a received message eliminated as
    duplicates (None for a sent one). ``size`` is the stored body (SOAP part and payloads with their MIME
    framing) in bytes. ``kind`` is a sent message's :class:`~msh.store.records.OutboundKind` (None for a
    received one); ``entry_id`` a received copy's inbox entry (None for a sent message).
    """

    message_id: str
    direction: Direction
    status: str
    partner: str | None
    cpa_id: str
    service: str
    action: str
    conversation_id: str
    created_at: datetime
    updated_at: datetime
    attempts: int | None
    duplicates: int | None
    last_error: str | None
    size: int | None
    kind: OutboundKind | None = None
    entry_id: int | None = None

    @property
    def position(self) -> Position:
        """Where the row stands in the listing."""
        if self.direction is Direction.OUTBOUND:
            return self.created_at, "o:" + self.message_id
        return self.created_at, f"i:{self.entry_id or 0:020d}"


@dataclass(frozen=True, slots=True)
class MessagePage:
    """A page of the listing, newest first; ``next_cursor`` (None on the last page) asks for the next one."""

    rows: tuple[MessageRow, ...]
    next_cursor: str | None


def encode_cursor(position: Position) -> str:
    """The opaque text that asks for the rows after ``position``."""
    at, key = position
    return base64.urlsafe_b64encode(f"{at.isoformat()}|{key}".encode()).decode("ascii").rstrip("=")


def decode_cursor(cursor: str) -> Position:
    """The position a cursor names; ``ValueError`` for text that is not a cursor this listing gave."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        when, key = raw.split("|", 1)
        at = rules.required_aware("cursor", datetime.fromisoformat(when))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise ValueError(f"cursor {cursor!r} is not one this listing gave; start again without it") from None
    if not key.startswith(("o:", "i:")) or (key.startswith("i:") and not key[2:].isdigit()):
        raise ValueError(f"cursor {cursor!r} is not one this listing gave; start again without it")
    return at, key


def _checked(query: MessageFilter) -> MessageFilter:
    if not isinstance(query, MessageFilter):
        raise ValueError("query must be a MessageFilter")
    rules.limit(query.limit)
    rules.direction(query.direction)
    rules.aware("since", query.since)
    rules.aware("until", query.until)
    if query.status is not None and query.status not in STATUSES:
        known = ", ".join(STATUSES)
        raise ValueError(f"status {query.status!r} is not one of {known}")
    return query


def _issue_text(record: OutboundMessage) -> str | None:
    failure = record.state.failure
    if failure is None:
        return None
    code = failure.error_code.value
    return f"{code}: {failure.description}" if failure.description else code


def outbound_row(listed: ListedOutbound, cause: str | None, transmissions: Mapping[str, int]) -> MessageRow:
    """The row of a sent message (``cause``: of its last failed transmission, from the journal)."""
    record, size = listed
    return MessageRow(
        message_id=record.message_id,
        direction=Direction.OUTBOUND,
        status=record.state.status.value,
        partner=record.to_party,
        cpa_id=record.cpaid,
        service=record.service,
        action=record.action,
        conversation_id=record.conversation_id,
        created_at=record.created_at,
        updated_at=record.updated_at,
        attempts=transmissions.get(record.message_id, 0),  # what happened on the wire, from the journal
        duplicates=None,
        last_error=_issue_text(record) or cause,
        size=size,
        kind=record.kind,
    )


def inbound_row(listed: ListedInbound, now: datetime) -> MessageRow:
    """The row of a received copy, its status at ``now``."""
    record, entry, claim, size = listed
    status = inbox_status(entry, claim, now)
    changes = [record.received_at, entry.delivered_at, entry.acknowledged_at, record.last_duplicate_at]
    if claim is not None:
        changes.append(claim.rejected_at)
    return MessageRow(
        message_id=record.message_id,
        direction=Direction.INBOUND,
        status=status.value,
        partner=record.from_party,
        cpa_id=record.cpaid,
        service=record.service,
        action=record.action,
        conversation_id=record.conversation_id,
        created_at=record.received_at,
        updated_at=max(t for t in changes if t is not None),
        attempts=None,
        duplicates=record.duplicate_count,
        last_error=claim.reason if status is InboxStatus.REJECTED and claim is not None else None,
        size=size,
        entry_id=record.id,
    )


class ListingPort(ABC):
    """The operator's queries of a transaction (see the module docs)."""

    @abstractmethod
    def _live(self) -> None:
        """Refuse use after the end of the transaction."""

    def list_messages(self, query: MessageFilter, now: datetime) -> MessagePage:
        """A page of sent and received messages, newest first (see the module docs); statuses at ``now``."""
        query = _checked(query)
        moment = rules.required_aware("now", now)
        after = None if query.cursor is None else decode_cursor(query.cursor)
        self._live()
        wanted = STATUSES.get(query.status) if query.status is not None else None
        ways = [d for d in Direction if query.direction in (None, d) and wanted in (None, d)]
        fetch = query.limit + 1  # one more than the page tells whether a page follows
        found: list[MessageRow] = []
        if Direction.OUTBOUND in ways:
            status = None if query.status is None else OutboundStatus(query.status)
            sent = self._listed_outbound(query, status, after, fetch)
            ids = [record.message_id for record, _ in sent]
            causes, tries = self._last_causes(ids), self._transmissions(ids)
            found += [outbound_row(listed, causes.get(listed[0].message_id), tries) for listed in sent]
        if Direction.INBOUND in ways:
            inbox = None if query.status is None else InboxStatus(query.status)
            received = self._listed_inbound(query, inbox, after, moment, fetch)
            found += [inbound_row(listed, moment) for listed in received]
        found.sort(key=lambda row: row.position, reverse=True)
        page = tuple(found[: query.limit])
        more = len(found) > query.limit
        return MessagePage(page, encode_cursor(page[-1].position) if more else None)

    def message_history(self, message_id: str) -> list[Event]:
        """Every journal event of the MessageId (both directions), in the order appended."""
        rules.text("message_id", message_id)
        self._live()
        limit = 1000
        while True:
            found = self._message_events(message_id, None, limit)
            if len(found) < limit:
                return found
            limit *= 4

    # -- storage steps (each store's own)

    @abstractmethod
    def _listed_outbound(
        self, query: MessageFilter, status: OutboundStatus | None, after: Position | None, limit: int
    ) -> list[ListedOutbound]:
        """Up to ``limit`` sent messages that pass ``query`` (its partner is the To party, its times the
        ``created_at``; ``status`` instead of ``query.status``), in descending order of position, only those
        before ``after`` when given (see :data:`Position`)."""

    @abstractmethod
    def _listed_inbound(
        self, query: MessageFilter, status: InboxStatus | None, after: Position | None, now: datetime, limit: int
    ) -> list[ListedInbound]:
        """Up to ``limit`` received copies with an inbox entry that pass ``query`` (its partner is the From
        party, its times the ``received_at``; ``status`` at ``now`` by
        :func:`~msh.store.inbox_status.inbox_status`), in descending order of position, only those before
        ``after`` when given."""

    @abstractmethod
    def _last_causes(self, message_ids: Sequence[str]) -> dict[str, str]:
        """For each of the sent messages that has one, the ``cause`` of its newest outbound journal event
        that has a cause."""

    @abstractmethod
    def _transmissions(self, message_ids: Sequence[str]) -> dict[str, int]:
        """For each of the sent messages that has any, how many ``transmission`` events its journal holds."""

    @abstractmethod
    def _message_events(self, message_id: str, direction: Direction | None, limit: int) -> list[Event]:
        """The newest ``limit`` events of the message (of ``direction``, if given), oldest first."""
