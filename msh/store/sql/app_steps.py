"""The SQL store's storage steps for the application interfaces (:mod:`msh.store.app_port`).

Inserts that must not repeat a key (a Message-ID, a batch id) are ``INSERT … ON CONFLICT DO NOTHING``:
a duplicate writes nothing and leaves the transaction usable; on PostgreSQL a concurrent insert of the
same key waits for the first transaction and then finds the duplicate. A claim is written by an upsert.
The listing is one query over the inbox, its received message and its claim, ordered by the priority
rules (a ``CASE``), then by reception.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import and_, case, delete, literal, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, RowMapping
from sqlalchemy.sql.elements import ColumnElement

from msh.store import app_records
from msh.store.records import InboxState
from msh.store.schema import (
    UtcDateTime,
    app_cursors,
    app_requests,
    inbound_messages,
    inbox,
    inbox_batches,
    inbox_claims,
)
from msh.store.sql import rows

__all__ = ["SqlAppSteps"]

_ACKNOWLEDGED = InboxState.ACKNOWLEDGED_BY_APP.value
_WAITING = (InboxState.NEW.value, InboxState.DELIVERED_TO_APP.value)
_NOT_OFFERED = tuple(s.value for s in InboxState if not s.offered)


def _claim(row: RowMapping) -> app_records.InboxClaim:
    return app_records.InboxClaim(
        int(row["inbound_id"]),
        row["application"],
        row["lease_until"],
        row["batch_id"],
        row["rejected_at"],
        row["reason"],
        int(row["takes"]),
    )


def _batch(row: RowMapping) -> app_records.InboxBatch:
    return app_records.InboxBatch(
        row["batch_id"],
        row["application"],
        tuple(int(i) for i in row["entry_ids"]),
        row["created_at"],
        row["lease_until"],
        row["confirmed_at"],
    )


def _view(view: app_records.InboxView, now: datetime) -> ColumnElement[bool] | None:
    """:func:`msh.store.app_records.in_view` in SQL (over the inbox left-joined with its claims)."""
    if view is app_records.InboxView.ALL:
        return None
    rejected = inbox_claims.c.rejected_at.is_not(None)
    if view is app_records.InboxView.DEAD:
        return rejected
    if view is app_records.InboxView.HELD:
        return inbox.c.state.in_(_NOT_OFFERED)
    waiting = and_(inbox.c.state.in_(_WAITING), or_(inbox_claims.c.inbound_id.is_(None), ~rejected))
    leased = and_(inbox_claims.c.lease_until.is_not(None), inbox_claims.c.lease_until > literal(now, UtcDateTime()))
    return and_(waiting, leased if view is app_records.InboxView.LEASED else ~leased)


class SqlAppSteps:
    """A mixin of :class:`~msh.store.sql.transaction.SqlTransaction` (which gives ``_conn``)."""

    _conn: Connection

    def _insert_ignoring_duplicate(self, table: Any, values: dict[str, object], key: str) -> bool:
        dialect = postgresql if self._conn.dialect.name == "postgresql" else sqlite
        statement = dialect.insert(table).values(**values).on_conflict_do_nothing(index_elements=[key])
        return bool(self._conn.execute(statement.returning(table.c[key])).first() is not None)

    def _app_request(self, message_id: str) -> app_records.AppRequest | None:
        row = self._conn.execute(select(app_requests).where(app_requests.c.message_id == message_id)).mappings().first()
        if row is None:
            return None
        return app_records.AppRequest(
            row["message_id"],
            row["application"],
            row["msg_create"],
            row["fingerprint"],
            int(row["status"]),
            bytes(row["response"]),
            row["created_at"],
        )

    def _add_app_request(self, request: app_records.AppRequest) -> bool:
        values: dict[str, object] = {
            "message_id": request.message_id,
            "application": request.application,
            "msg_create": request.msg_create,
            "fingerprint": request.fingerprint,
            "status": request.status,
            "response": request.response,
            "created_at": request.created_at,
        }
        return self._insert_ignoring_duplicate(app_requests, values, "message_id")

    def _purge_app_requests(self, before: datetime) -> int:
        result = self._conn.execute(delete(app_requests).where(app_requests.c.created_at < before))
        return int(result.rowcount)

    def _inbox_claim(self, entry_id: int) -> app_records.InboxClaim | None:
        row = self._conn.execute(select(inbox_claims).where(inbox_claims.c.inbound_id == entry_id)).mappings().first()
        return None if row is None else _claim(row)

    def _put_inbox_claim(self, claim: app_records.InboxClaim) -> bool:
        if self._conn.execute(select(inbox.c.inbound_id).where(inbox.c.inbound_id == claim.entry_id)).first() is None:
            return False
        values: dict[str, object] = {
            "application": claim.application,
            "lease_until": claim.lease_until,
            "batch_id": claim.batch_id,
            "rejected_at": claim.rejected_at,
            "reason": claim.reason,
            "takes": claim.takes,
        }
        dialect = postgresql if self._conn.dialect.name == "postgresql" else sqlite
        statement = dialect.insert(inbox_claims).values(inbound_id=claim.entry_id, **values)
        self._conn.execute(statement.on_conflict_do_update(index_elements=["inbound_id"], set_=values))
        return True

    def _add_inbox_batch(self, batch: app_records.InboxBatch) -> bool:
        values: dict[str, object] = {
            "batch_id": batch.batch_id,
            "application": batch.application,
            "entry_ids": list(batch.entry_ids),
            "created_at": batch.created_at,
            "lease_until": batch.lease_until,
            "confirmed_at": batch.confirmed_at,
        }
        return self._insert_ignoring_duplicate(inbox_batches, values, "batch_id")

    def _inbox_batch(self, batch_id: str) -> app_records.InboxBatch | None:
        row = self._conn.execute(select(inbox_batches).where(inbox_batches.c.batch_id == batch_id)).mappings().first()
        return None if row is None else _batch(row)

    def _confirm_inbox_batch(self, batch_id: str, at: datetime) -> None:
        self._conn.execute(update(inbox_batches).where(inbox_batches.c.batch_id == batch_id).values(confirmed_at=at))

    def _app_cursor(self, name: str) -> int:
        found = self._conn.execute(select(app_cursors.c.position).where(app_cursors.c.name == name)).scalar()
        return 0 if found is None else int(found)

    def _set_app_cursor(self, name: str, position: int) -> None:
        dialect = postgresql if self._conn.dialect.name == "postgresql" else sqlite
        statement = dialect.insert(app_cursors).values(name=name, position=position)
        self._conn.execute(statement.on_conflict_do_update(index_elements=["name"], set_={"position": position}))

    def _app_inbox(self, query: app_records.InboxQuery) -> list[app_records.AppInboxItem]:
        m = inbound_messages.c
        priority: ColumnElement[Any] = (
            case(
                *[
                    (
                        and_(
                            literal(True),
                            *[
                                column == value
                                for column, value in ((m.cpaid, r.cpaid), (m.service, r.service), (m.action, r.action))
                                if value is not None
                            ],
                        ),
                        literal(r.priority),
                    )
                    for r in query.priorities
                ],
                else_=literal(0),
            )
            if query.priorities
            else literal(0)
        )
        joined = inbox.join(inbound_messages, m.id == inbox.c.inbound_id).outerjoin(
            inbox_claims, inbox_claims.c.inbound_id == inbox.c.inbound_id
        )
        statement = select(
            inbox,
            m.cpaid,
            m.service,
            m.action,
            m.conversation_id,
            m.from_party,
            inbox_claims.c.inbound_id.label("claim_id"),
            inbox_claims.c.application,
            inbox_claims.c.lease_until,
            inbox_claims.c.batch_id,
            inbox_claims.c.rejected_at,
            inbox_claims.c.reason,
            inbox_claims.c.takes,
            priority.label("priority"),
        ).select_from(joined)
        view = _view(query.view, query.now)
        if view is not None:
            statement = statement.where(view)
        for column, value in (
            (m.cpaid, query.cpaid),
            (m.service, query.service),
            (m.action, query.action),
            (m.conversation_id, query.conversation_id),
        ):
            if value is not None:
                statement = statement.where(column == value)
        if query.received_before is not None:
            statement = statement.where(inbox.c.received_at < literal(query.received_before, UtcDateTime()))
        statement = statement.order_by(priority.desc(), inbox.c.received_at, inbox.c.inbound_id).limit(query.limit)
        items = []
        for row in self._conn.execute(statement).mappings():
            claim = None
            if row["claim_id"] is not None:
                claim = _claim({**row, "inbound_id": row["claim_id"]})  # type: ignore[arg-type]
            items.append(
                app_records.AppInboxItem(
                    rows.inbox_from_row(row),
                    row["cpaid"],
                    row["service"],
                    row["action"],
                    row["conversation_id"],
                    row["from_party"],
                    claim,
                    int(row["priority"]),
                )
            )
        return items
