"""The SQL store's storage steps of retention (:mod:`msh.store.retention_port`).

The rule that makes a purge safe is in the DELETE itself (``WHERE status IN (final) AND NOT EXISTS (timer)``,
``… AND the inbox entry is settled``): on PostgreSQL under READ COMMITTED a row changed by a concurrent
transaction (a resend making a failed message pending again) is re-checked against it after that transaction
commits, so a listing that went stale never removes a message in flight.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import and_, delete, func, not_, or_, select
from sqlalchemy.engine import Connection, RowMapping

from msh.store.records import InboxState
from msh.store.retention_port import InboundPosition, OutboundPosition, PurgeCandidate
from msh.store.schema import OUTBOUND_FINAL, blobs, inbound_messages, inbox, outbound_messages, timers
from msh.store.sql import rows

__all__ = ["SqlRetentionSteps"]

_SETTLED = (InboxState.ACKNOWLEDGED_BY_APP.value, InboxState.ABANDONED.value)
_out, _in = outbound_messages.c, inbound_messages.c

_NO_TIMER = not_(select(timers.c.id).where(timers.c.message_id == _out.message_id).correlate_except(timers).exists())
_FINAL_OUT = and_(_out.status.in_(OUTBOUND_FINAL), _NO_TIMER)
# A received copy is settled when its inbox entry is, or when it has none; and no forward of it is under way.
_UNSETTLED_ENTRY = (
    select(inbox.c.inbound_id)
    .where(inbox.c.inbound_id == _in.id, inbox.c.state.not_in(_SETTLED))
    .correlate_except(inbox)
    .exists()
)
_SENDING = (
    select(_out.message_id)
    .where(_out.message_id == _in.message_id, _out.status.not_in(OUTBOUND_FINAL))
    .correlate_except(outbound_messages)
    .exists()
)
_SETTLED_IN = and_(not_(_UNSETTLED_ENTRY), not_(_SENDING))


class SqlRetentionSteps:
    """A mixin of :class:`~msh.store.sql.transaction.SqlTransaction` (which gives ``_conn``)."""

    _conn: Connection
    _postgres: bool

    def _outbound_candidates(
        self, before: datetime, after: OutboundPosition | None, limit: int
    ) -> list[PurgeCandidate]:
        message_id = _out.message_id.collate("C") if self._postgres else _out.message_id
        statement = (
            select(outbound_messages, blobs.c.size.label("body_size"))
            .join(blobs, blobs.c.id == _out.body_blob_id)
            .where(_FINAL_OUT, _out.updated_at < before)
            .order_by(_out.updated_at, message_id)
            .limit(limit)
        )
        if after is not None:
            at, last = after
            statement = statement.where(or_(_out.updated_at > at, and_(_out.updated_at == at, message_id > last)))
        return [self._outbound_candidate(row) for row in self._conn.execute(statement).mappings()]

    @staticmethod
    def _outbound_candidate(row: RowMapping) -> PurgeCandidate:
        record = rows.outbound_from_row(row)
        state = record.state
        return PurgeCandidate(
            record.message_id,
            None,
            record.cpaid,
            record.kind.value,
            state.status.value,
            False,
            state.first_sent_at or record.created_at,
            record.updated_at,
            state.reliability.persist_duration,
            int(row["body_size"]),
        )

    def _inbound_candidates(self, before: datetime, after: InboundPosition | None, limit: int) -> list[PurgeCandidate]:
        settled = func.coalesce(inbox.c.acknowledged_at, _in.received_at).label("settled_at")
        statement = (
            select(
                _in.id,
                _in.message_id,
                _in.cpaid,
                _in.duplicate_elimination,
                _in.received_at,
                inbox.c.state,
                inbox.c.acknowledged_at,
                blobs.c.size,
            )
            .select_from(inbound_messages.outerjoin(inbox, inbox.c.inbound_id == _in.id))
            .join(blobs, blobs.c.id == _in.body_blob_id)
            .where(_SETTLED_IN, settled < before)
            .order_by(settled, _in.id)
            .limit(limit)
        )
        if after is not None:
            at, last = after
            statement = statement.where(or_(settled > at, and_(settled == at, _in.id > last)))
        found = []
        for row in self._conn.execute(statement).mappings():
            received: datetime = row["received_at"]
            acknowledged: datetime | None = row["acknowledged_at"]
            found.append(
                PurgeCandidate(
                    row["message_id"],
                    int(row["id"]),
                    row["cpaid"],
                    "received",
                    row["state"] or "none",
                    bool(row["duplicate_elimination"]),
                    received,
                    acknowledged or received,
                    None,
                    int(row["size"]),
                )
            )
        return found

    def _delete_final_outbound(self, message_id: str) -> int | None:
        statement = delete(outbound_messages).where(_out.message_id == message_id, _FINAL_OUT)
        blob = self._conn.execute(statement.returning(_out.body_blob_id)).scalar_one_or_none()
        return None if blob is None else int(blob)

    def _settled_inbound(self, inbound_id: int) -> tuple[str, int] | None:
        statement = select(_in.message_id, _in.body_blob_id).where(_in.id == inbound_id, _SETTLED_IN)
        row = self._conn.execute(statement).first()
        return None if row is None else (str(row[0]), int(row[1]))

    def _delete_settled_inbound(self, inbound_id: int) -> bool:
        # The inbox entry and its claim go by ON DELETE CASCADE (foreign keys are on in SQLite too).
        statement = delete(inbound_messages).where(_in.id == inbound_id, _SETTLED_IN)
        return bool(self._conn.execute(statement).rowcount)
