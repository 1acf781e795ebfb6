"""The SQL store's storage steps for the operator's queries (:mod:`msh.store.listing`), in SQLAlchemy Core.

Each direction is one indexed query ordered newest first with the page's limit; a received copy's status is
computed in SQL the way :func:`msh.store.inbox_status.inbox_status` computes it, so a filter on it pages
like any other. MessageIds are ordered by code point, as the in-memory twin orders them (PostgreSQL's "C"
collation; SQLite compares bytes).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import and_, case, func, literal, or_, select
from sqlalchemy.engine import Connection, RowMapping
from sqlalchemy.sql.elements import ColumnElement

from msh.engine import OutboundStatus
from msh.store.app_records import InboxClaim
from msh.store.events import EventKind
from msh.store.inbox_status import InboxStatus
from msh.store.listing import ListedInbound, ListedOutbound, MessageFilter, Position
from msh.store.records import Direction, InboxEntry, InboxState
from msh.store.schema import UtcDateTime, blobs, events, inbound_messages, inbox, inbox_claims, outbound_messages
from msh.store.sql import rows

__all__ = ["SqlListingSteps"]


def _passing(query: MessageFilter, at: Any, partner: Any, cpaid: Any, service: Any, action: Any) -> list[Any]:
    """The conditions of the filter's partner, agreement, service, action and times on these columns."""
    wanted = ((cpaid, query.cpa_id), (service, query.service), (action, query.action))
    found = [column == value for column, value in wanted if value is not None]
    if query.partner is not None:
        # The party as stored (type:value), or its value alone: "…:value" (substr, as LIKE ignores case on SQLite).
        value = query.partner
        start = func.length(partner) - len(value)
        found.append(
            or_(partner == value, and_(func.substr(partner, start + 1) == value, func.substr(partner, start, 1) == ":"))
        )
    if query.since is not None:
        found.append(at >= query.since)
    if query.until is not None:
        found.append(at < query.until)
    return found


def _inbox_status(now: datetime) -> ColumnElement[Any]:
    """:func:`msh.store.inbox_status.inbox_status` in SQL (over the inbox left-joined with its claims)."""
    claim = inbox_claims.c
    return case(
        (inbox.c.state == InboxState.HELD.value, literal(InboxStatus.HELD.value)),
        (inbox.c.state == InboxState.ABANDONED.value, literal(InboxStatus.ABANDONED.value)),
        (claim.rejected_at.is_not(None), literal(InboxStatus.REJECTED.value)),
        (inbox.c.state == InboxState.ACKNOWLEDGED_BY_APP.value, literal(InboxStatus.ACKNOWLEDGED.value)),
        (
            and_(claim.lease_until.is_not(None), claim.lease_until > literal(now, UtcDateTime())),
            literal(InboxStatus.LEASED.value),
        ),
        else_=literal(InboxStatus.AVAILABLE.value),
    )


def _entry(row: RowMapping) -> InboxEntry:
    return InboxEntry(
        int(row["id"]),
        row["message_id"],
        InboxState(row["entry_state"]),
        row["entry_received_at"],
        row["entry_delivered_at"],
        row["entry_acknowledged_at"],
    )


def _claim(row: RowMapping) -> InboxClaim | None:
    if row["claim_id"] is None:
        return None
    return InboxClaim(
        int(row["claim_id"]),
        row["application"],
        row["lease_until"],
        row["batch_id"],
        row["rejected_at"],
        row["reason"],
        int(row["takes"]),
    )


def _size(row: RowMapping) -> int | None:
    return None if row["body_size"] is None else int(row["body_size"])


class SqlListingSteps:
    """A mixin of :class:`~msh.store.sql.transaction.SqlTransaction` (which gives ``_conn`` and ``_postgres``)."""

    _conn: Connection
    _postgres: bool

    def write_events(self) -> None:
        """Write the journal events still waiting, before reading the journal (SqlTransaction's)."""
        raise NotImplementedError  # pragma: no cover - SqlTransaction's own comes first

    def _listed_outbound(
        self, query: MessageFilter, status: OutboundStatus | None, after: Position | None, limit: int
    ) -> list[ListedOutbound]:
        o = outbound_messages.c
        message_id = o.message_id.collate("C") if self._postgres else o.message_id
        conditions = _passing(query, o.created_at, o.to_party, o.cpaid, o.service, o.action)
        if status is not None:
            conditions.append(o.status == status.value)
        if after is not None:
            at, key = after
            # Sent messages come before received ones at the same instant: after a received one, none is left.
            same = and_(o.created_at == at, message_id < key[2:]) if key.startswith("o:") else literal(False)
            conditions.append(or_(o.created_at < at, same))
        statement = (
            select(outbound_messages, blobs.c.size.label("body_size"))
            .select_from(outbound_messages.outerjoin(blobs, blobs.c.id == o.body_blob_id))
            .where(*conditions)
            .order_by(o.created_at.desc(), message_id.desc())
            .limit(limit)
        )
        return [(rows.outbound_from_row(row), _size(row)) for row in self._conn.execute(statement).mappings()]

    def _listed_inbound(
        self, query: MessageFilter, status: InboxStatus | None, after: Position | None, now: datetime, limit: int
    ) -> list[ListedInbound]:
        m, claim = inbound_messages.c, inbox_claims.c
        conditions = _passing(query, m.received_at, m.from_party, m.cpaid, m.service, m.action)
        if status is not None:
            conditions.append(_inbox_status(now) == status.value)
        if after is not None:
            at, key = after
            same = m.id < int(key[2:]) if key.startswith("i:") else literal(True)
            conditions.append(or_(m.received_at < at, and_(m.received_at == at, same)))
        joined = (
            inbound_messages.join(inbox, inbox.c.inbound_id == m.id)
            .outerjoin(inbox_claims, claim.inbound_id == m.id)
            .outerjoin(blobs, blobs.c.id == m.body_blob_id)
        )
        statement = (
            select(
                inbound_messages,
                inbox.c.state.label("entry_state"),
                inbox.c.received_at.label("entry_received_at"),
                inbox.c.delivered_at.label("entry_delivered_at"),
                inbox.c.acknowledged_at.label("entry_acknowledged_at"),
                claim.inbound_id.label("claim_id"),
                claim.application,
                claim.lease_until,
                claim.batch_id,
                claim.rejected_at,
                claim.reason,
                claim.takes,
                blobs.c.size.label("body_size"),
            )
            .select_from(joined)
            .where(*conditions)
            .order_by(m.received_at.desc(), m.id.desc())
            .limit(limit)
        )
        return [
            (rows.inbound_from_row(row), _entry(row), _claim(row), _size(row))
            for row in self._conn.execute(statement).mappings()
        ]

    def _transmissions(self, message_ids: Sequence[str]) -> dict[str, int]:
        if not message_ids:
            return {}
        self.write_events()
        e = events.c
        statement = (
            select(e.message_id, func.count().label("n"))
            .where(
                e.message_id.in_(list(message_ids)),
                e.direction == Direction.OUTBOUND.value,
                e.kind == EventKind.TRANSMISSION.value,
            )
            .group_by(e.message_id)
        )
        return {row["message_id"]: int(row["n"]) for row in self._conn.execute(statement).mappings()}

    def _last_causes(self, message_ids: Sequence[str]) -> dict[str, str]:
        if not message_ids:
            return {}
        self.write_events()
        e = events.c
        newest = (
            select(func.max(e.id).label("id"))
            .where(e.message_id.in_(list(message_ids)), e.direction == Direction.OUTBOUND.value, e.cause.is_not(None))
            .group_by(e.message_id)
            .subquery()
        )
        statement = select(e.message_id, e.cause).join(newest, e.id == newest.c.id)
        return {row["message_id"]: row["cause"] for row in self._conn.execute(statement).mappings()}
