"""The journal half of the transaction port: appending events with their typed columns, and reading them.

:class:`JournalSteps` is a base of :class:`~msh.store.transaction.Transaction`; it fills the typed columns
of each event (:mod:`msh.store.journal`) from the facts given or from the message's stored row, read once
per transaction, so the event is written in the transaction of the change it records: no commit of its
own (docs/design.md §5).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from datetime import datetime

from msh.store import journal, records, rules
from msh.store.events import EventKind

__all__ = ["JournalSteps"]


class JournalSteps(ABC):
    """Journal methods of a transaction; the storage steps they use are the store's own."""

    _facts: dict[tuple[str, records.Direction], journal.MessageFacts]
    appended: list[records.Event]

    @abstractmethod
    def _live(self) -> None:
        """Refuse use after the end of the transaction."""

    @abstractmethod
    def _writable(self) -> None:
        """Refuse writes in a read-only or ended transaction."""

    @abstractmethod
    def _outbound(self, message_id: str, *, for_update: bool) -> records.OutboundMessage | None:
        """The stored sent message, or None."""

    @abstractmethod
    def _first_inbound(self, message_id: str) -> records.InboundMessage | None:
        """The first stored copy of a received MessageId, or None."""

    @abstractmethod
    def _inbound(self, inbound_id: int) -> records.InboundMessage | None:
        """The stored copy with this id, or None."""

    @abstractmethod
    def _blob_info(self, blob_id: int) -> tuple[int, int] | None:
        """The blob's (chunk count, size), or None."""

    # -- journal

    def append_event(
        self,
        *,
        at: datetime,
        kind: EventKind,
        message_id: str | None = None,
        direction: records.Direction | None = None,
        detail: Mapping[str, object] | None = None,
        facts: journal.MessageFacts | None = None,
    ) -> None:
        """Append an event to the journal, in this transaction (no commit of its own).

        Its typed columns (:mod:`msh.store.journal`) come from ``facts`` when given, else from the
        message's stored row (the outbound row for an outbound event, the first stored copy for an inbound
        one; read once per transaction), and the attempt, severity and cause from ``detail``.

        The event is in :attr:`appended` at once; its id is the store's, set when it is written (at the
        latest when the transaction commits; the SQL store writes a transaction's events together). Ids
        increase in the order events are appended. With several writers on PostgreSQL a transaction
        may commit after another one that appended a higher id, so an export that reads on from the last
        id it saw should leave out the newest events (e.g. those of the last minute) until the next run.
        """
        moment = rules.required_aware("at", at)
        kind = rules.event_kind(kind)
        way = rules.direction(direction)
        kept = rules.detail(detail)
        self._writable()
        if facts is None and message_id is not None:
            facts = self._facts_of(message_id, way, deadline=kind is EventKind.SUBMITTED)
        facts = facts or journal.MessageFacts()
        event = records.Event(
            0,
            moment,
            kind,
            message_id,
            way,
            kept,
            role=None if facts.role is None else facts.role.value,
            cpa_id=facts.cpa_id,
            from_party=facts.from_party,
            to_party=facts.to_party,
            service=facts.service,
            action=facts.action,
            conversation_id=facts.conversation_id,
            size=facts.size,
            attempt=journal.attempt_of(kept),
            severity=journal.severity_of(kept),
            cause=journal.cause_of(kept),
            deadline=facts.deadline if kind is EventKind.SUBMITTED else None,
        )
        self.appended.append(event)
        self._add_event(event)

    def write_events(self) -> None:  # noqa: B027 (a hook: nothing to do where events are written at once)
        """Write the appended events a store keeps for the commit (the SQL store's,
        :mod:`msh.store.sql.journal_writes`); done anyway when the transaction commits."""

    def _facts_of(
        self, message_id: str, direction: records.Direction | None, *, deadline: bool = False
    ) -> journal.MessageFacts | None:
        """The journal facts of a stored message (None if it is not stored in that direction); ``deadline``:
        with the deadline of a sent message (what a ``submitted`` event carries)."""
        # An event about one of our messages may be journaled as inbound (a signal received about it) and a
        # forward as inbound (it came in): the other direction's row is looked for next.
        ways = (records.Direction.OUTBOUND, records.Direction.INBOUND)
        if direction is records.Direction.INBOUND:
            ways = (records.Direction.INBOUND, records.Direction.OUTBOUND)
        for way in ways:
            found = self._facts.get((message_id, way))
            if found is not None and (found.deadline is not None or not deadline or way is records.Direction.INBOUND):
                return found
            if way is records.Direction.OUTBOUND:
                outbound = self._outbound(message_id, for_update=False)
                if outbound is not None:
                    info = self._blob_info(outbound.body_blob_id)
                    found = journal.facts_of_outbound(outbound, None if info is None else info[1], deadline=deadline)
            else:
                inbound = self._first_inbound(message_id)
                if inbound is not None:
                    info = self._blob_info(inbound.body_blob_id)
                    found = journal.facts_of_inbound(inbound, None if info is None else info[1])
            if found is not None:
                self._facts[(message_id, way)] = found
                return found
        return None

    def list_events(self, after_id: int = 0, *, limit: int = 1000) -> list[records.Event]:
        """Journal events with an id above ``after_id``, in id order (the export reads on from there)."""
        rules.limit(limit)
        self._live()
        return self._events_after(after_id, limit)

    def message_events(
        self, message_id: str, *, direction: records.Direction | None = None, limit: int = 1000
    ) -> list[records.Event]:
        """The journal of one message (``direction``: only the events of that direction), in the order
        appended: the newest ``limit`` of them when there are more (what ``msh status`` shows)."""
        rules.text("message_id", message_id)
        rules.limit(limit)
        wanted = rules.direction(direction)
        self._live()
        return self._message_events(message_id, wanted, limit)

    def _journal_entry(self, entry: records.InboxEntry, kind: EventKind, at: datetime) -> None:
        """Journal a move of an inbox entry, with the facts of its stored copy."""
        record = self._inbound(entry.id)
        facts = None
        if record is not None:
            info = self._blob_info(record.body_blob_id)
            facts = journal.facts_of_inbound(record, None if info is None else info[1])
        self.append_event(
            at=at,
            kind=kind,
            message_id=entry.message_id,
            direction=records.Direction.INBOUND,
            detail={"entry": entry.id},
            facts=facts,
        )

    @abstractmethod
    def _add_event(self, event: records.Event) -> None:
        """Append ``event``, the last of :attr:`appended` (its ``id`` 0), to the journal: a store that writes
        it at once replaces it there with its id."""

    @abstractmethod
    def _events_after(self, after_id: int, limit: int) -> list[records.Event]:
        """Up to ``limit`` events with an id above ``after_id``, in id order (each the caller's copy)."""

    @abstractmethod
    def _message_events(self, message_id: str, direction: records.Direction | None, limit: int) -> list[records.Event]:
        """The newest ``limit`` events of the message (of ``direction``, if given), oldest first."""
