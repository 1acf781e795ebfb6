"""The in-memory twin's storage steps for the operator's queries (:mod:`msh.store.listing`).

The same filters and order as the SQL store (:mod:`msh.store.sql.listing_steps`), over the twin's dicts.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from msh.engine import OutboundStatus
from msh.store.app_records import InboxClaim
from msh.store.events import EventKind
from msh.store.inbox_status import InboxStatus, inbox_status
from msh.store.listing import ListedInbound, ListedOutbound, MessageFilter, Position
from msh.store.records import Direction, Event, InboundMessage, InboxEntry, OutboundMessage

__all__ = ["MemoryListingSteps"]


def _same_party(wanted: str, party: str | None) -> bool:
    """The party as stored (type:value), or its value alone."""
    return party is not None and (party == wanted or party.endswith(":" + wanted))


def _passes(query: MessageFilter, at: datetime, partner: str | None, cpaid: str, service: str, action: str) -> bool:
    """Whether a message with these facts passes the filter's partner, agreement, service, action and times."""
    wanted = ((query.cpa_id, cpaid), (query.service, service), (query.action, action))
    if any(want is not None and want != have for want, have in wanted):
        return False
    if query.partner is not None and not _same_party(query.partner, partner):
        return False
    if query.since is not None and at < query.since:
        return False
    return query.until is None or at < query.until


class _Tables(Protocol):
    """What the listing reads of the twin (:class:`~msh.store.memory.MemoryStore`'s dicts)."""

    outbound: dict[str, OutboundMessage]
    inbound: dict[int, InboundMessage]
    inbox: dict[int, InboxEntry]
    claims: dict[int, InboxClaim]
    events: dict[int, Event]


class MemoryListingSteps(ABC):
    """A mixin of the twin's transaction (which gives ``_store`` and ``_blob_info``)."""

    _store: _Tables

    @abstractmethod
    def _blob_info(self, blob_id: int) -> tuple[int, int] | None:
        """The blob's (chunk count, size), or None (the transaction's own step)."""

    def _listed_size(self, blob_id: int) -> int | None:
        info = self._blob_info(blob_id)
        return None if info is None else info[1]

    def _listed_outbound(
        self, query: MessageFilter, status: OutboundStatus | None, after: Position | None, limit: int
    ) -> list[ListedOutbound]:
        found = [
            r
            for r in self._store.outbound.values()
            if (status is None or r.state.status is status)
            and _passes(query, r.created_at, r.to_party, r.cpaid, r.service, r.action)
            and (after is None or (r.created_at, "o:" + r.message_id) < after)
        ]
        found.sort(key=lambda r: (r.created_at, r.message_id), reverse=True)
        return [(r, self._listed_size(r.body_blob_id)) for r in found[:limit]]

    def _listed_inbound(
        self, query: MessageFilter, status: InboxStatus | None, after: Position | None, now: datetime, limit: int
    ) -> list[ListedInbound]:
        found: list[ListedInbound] = []
        for entry in self._store.inbox.values():
            record = self._store.inbound[entry.id]
            claim = self._store.claims.get(entry.id)
            if status is not None and inbox_status(entry, claim, now) is not status:
                continue
            if not _passes(query, record.received_at, record.from_party, record.cpaid, record.service, record.action):
                continue
            if after is not None and (record.received_at, f"i:{record.id:020d}") >= after:
                continue
            found.append((record, entry, claim, self._listed_size(record.body_blob_id)))
        found.sort(key=lambda listed: (listed[0].received_at, listed[0].id), reverse=True)
        return found[:limit]

    def _transmissions(self, message_ids: Sequence[str]) -> dict[str, int]:
        wanted = set(message_ids)
        counts: dict[str, int] = {}
        for event in self._store.events.values():
            if (
                event.message_id in wanted
                and event.direction is Direction.OUTBOUND
                and event.kind == EventKind.TRANSMISSION
            ):
                counts[event.message_id] = counts.get(event.message_id, 0) + 1
        return counts

    def _last_causes(self, message_ids: Sequence[str]) -> dict[str, str]:
        wanted = set(message_ids)
        causes: dict[str, str] = {}
        for event in sorted(self._store.events.values(), key=lambda e: e.id):
            if event.message_id in wanted and event.direction is Direction.OUTBOUND and event.cause is not None:
                causes[event.message_id] = event.cause
        return causes
