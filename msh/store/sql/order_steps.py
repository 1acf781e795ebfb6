"""The SQL store's storage steps for MessageOrder (:mod:`msh.store.order_port`), in SQLAlchemy Core.

On PostgreSQL a writing transaction takes a transaction-scoped advisory lock named after the sequence before
it reads the sequence's record (SQLite serialises writers anyway): two processes never give one
SequenceNumber twice nor place two messages of one sequence at once, also when the record does not exist yet
(a row lock cannot guard a row that is not there). Writes are upserts on the primary key.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import and_, func, select, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from msh.engine.ordering import OrderPosition, SequenceCounter
from msh.store import records
from msh.store.order_port import SequenceKey
from msh.store.schema import (
    OUTBOUND_FINAL,
    inbound_messages,
    inbox,
    order_positions,
    outbound_messages,
    sequence_counters,
)
from msh.store.sql import rows

__all__ = ["SqlOrderSteps"]


class SqlOrderSteps:
    """A mixin of :class:`~msh.store.sql.transaction.SqlTransaction` (which gives ``_conn`` and ``_postgres``)."""

    _conn: Connection
    _postgres: bool
    _readonly: bool

    def _upsert(self, table: Any, keys: list[str], values: dict[str, object]) -> None:
        dialect = postgresql if self._postgres else sqlite
        statement = dialect.insert(table).values(**values)
        changed = {k: v for k, v in values.items() if k not in keys}
        self._conn.execute(statement.on_conflict_do_update(index_elements=keys, set_=changed))

    def _lock_sequence(self, *key: str) -> None:
        if self._postgres and not self._readonly:
            name = json.dumps(["sequence", *key], separators=(",", ":"))
            self._conn.execute(text("SELECT pg_advisory_xact_lock(hashtextextended(:name, 0))"), {"name": name})

    def _sequence_counter(self, cpaid: str, conversation_id: str) -> SequenceCounter | None:
        t = sequence_counters
        self._lock_sequence("sending", cpaid, conversation_id)
        statement = select(t).where(t.c.cpaid == cpaid, t.c.conversation_id == conversation_id)
        row = self._conn.execute(statement).mappings().first()
        if row is None:
            return None
        return SequenceCounter(int(row["next_number"]), bool(row["broken"]), bool(row["restarted"]))

    def _set_sequence_counter(self, cpaid: str, conversation_id: str, counter: SequenceCounter) -> None:
        values: dict[str, object] = {
            "cpaid": cpaid,
            "conversation_id": conversation_id,
            "next_number": counter.next_number,
            "broken": counter.broken,
            "restarted": counter.restarted,
        }
        self._upsert(sequence_counters, ["cpaid", "conversation_id"], values)

    def _ordered_under_way(self, cpaid: str, conversation_id: str) -> int:
        t = outbound_messages
        statement = select(func.count()).where(
            t.c.cpaid == cpaid,
            t.c.conversation_id == conversation_id,
            t.c.kind == records.OutboundKind.OWN.value,
            t.c.sequence_number.is_not(None),
            t.c.status.not_in(OUTBOUND_FINAL),
        )
        return int(self._conn.execute(statement).scalar_one())

    def _order_position(self, key: SequenceKey) -> OrderPosition | None:
        t = order_positions
        cpaid, from_party, conversation_id = key
        self._lock_sequence("receiving", cpaid, from_party, conversation_id)
        statement = select(t).where(
            t.c.cpaid == cpaid, t.c.from_party == from_party, t.c.conversation_id == conversation_id
        )
        row = self._conn.execute(statement).mappings().first()
        if row is None:
            return None
        number = row["next_number"]
        return OrderPosition(
            None if number is None else int(number),
            int(row["held"]),
            row["gap_since"],
            bool(row["broken"]),
            row["offered_at"],
        )

    def _set_order_position(self, key: SequenceKey, position: OrderPosition) -> None:
        cpaid, from_party, conversation_id = key
        values: dict[str, object] = {
            "cpaid": cpaid,
            "from_party": from_party,
            "conversation_id": conversation_id,
            "next_number": position.next_number,
            "held": position.held,
            "gap_since": position.gap_since,
            "broken": position.broken,
            "offered_at": position.offered_at,
        }
        self._upsert(order_positions, ["cpaid", "from_party", "conversation_id"], values)

    def _held_entries(self, key: SequenceKey) -> list[tuple[int, records.InboxEntry]]:
        cpaid, from_party, conversation_id = key
        m = inbound_messages
        statement = (
            select(inbox, m.c.sequence_number)
            .join(m, m.c.id == inbox.c.inbound_id)
            .where(
                and_(
                    m.c.cpaid == cpaid,
                    m.c.from_party == from_party,
                    m.c.conversation_id == conversation_id,
                    m.c.sequence_number.is_not(None),
                    inbox.c.state == records.InboxState.HELD.value,
                )
            )
            .order_by(inbox.c.received_at, inbox.c.inbound_id)
        )
        return [
            (int(row["sequence_number"]), rows.inbox_from_row(row)) for row in self._conn.execute(statement).mappings()
        ]
