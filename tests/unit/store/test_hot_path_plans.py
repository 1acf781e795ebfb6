"""The statements a message's steps run find their rows by an index, never by reading a whole table, so a
store stays as fast with a million past messages as empty (docs/benchmarks.md, "Flat as the store grows").

One message's steps are run on a migrated store (SQLite and PostgreSQL) while every statement the store
sends to the database is recorded, then each SELECT, UPDATE and DELETE among them is explained with the
same parameters: SQLite's query plan must name an index or the primary key for each table it reads
(never ``SCAN <table>``), PostgreSQL's plan must hold no ``Seq Scan`` (asked with ``enable_seqscan=off``, so
that the planner's liking for a sequential scan of a tiny table does not hide a missing index: with no
usable index it still scans). The duplicate-elimination lookup (the first stored copy of a MessageId) must
be answered from the index alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from msh.engine import OutboundStatus
from msh.store import SqlStore
from msh.store.events import EventKind
from msh.store.prepared import Prepared
from msh.store.records import Direction, TimerKind
from tests.support.store import T0, add_inbound, add_outbound, outbound_state

Recorded = list[tuple[str, Any]]


def _record(store: SqlStore, monkeypatch: pytest.MonkeyPatch) -> Recorded:
    """Record every statement (driver SQL, driver parameters) the store runs from now on."""
    seen: Recorded = []
    original = Prepared.execute

    def execute(self: Prepared, cursor: Any, values: Any) -> Any:
        seen.append((self.sql, self.params(values)))
        return original(self, cursor, values)

    monkeypatch.setattr(Prepared, "execute", execute)
    engine: Engine = store._engine

    def before(_conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, many: bool) -> None:
        if not many:
            seen.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", before)
    return seen


def _one_message_each_way(store: SqlStore) -> None:
    """What the runtime asks of the store for a message sent and acknowledged, and one received."""
    lease = timedelta(seconds=30)
    with store.transaction() as tx:  # submission
        sent = add_outbound(tx, "out@example.com")
        tx.append_event(at=T0, kind=EventKind.SUBMITTED, message_id=sent.message_id, direction=Direction.OUTBOUND)
        tx.schedule_timer(sent.message_id, TimerKind.RETRY, T0)
    with store.transaction() as tx:  # transmission: the timer loop claims, the sender reads the body
        timer = tx.claim_due_timers(T0, "node-1", lease)[0]
        assert tx.get_outbound(sent.message_id, for_update=True) is not None
        assert tx.open_blob(sent.body_blob_id).read()
        state = outbound_state(sent.message_id, status=OutboundStatus.AWAITING_ACK, attempts=1, first_sent_at=T0)
        tx.update_outbound_state(state)
        tx.complete_timer(timer.id, "node-1")
    with store.transaction() as tx:  # the acknowledgment
        assert tx.outbound_status(sent.message_id) is not None
        tx.update_outbound_state(outbound_state(sent.message_id, status=OutboundStatus.DELIVERED, attempts=1))
        tx.cancel_timers(sent.message_id)
        tx.cancel_timers(sent.message_id, TimerKind.RETRY)
        tx.append_event(at=T0, kind=EventKind.DELIVERED, message_id=sent.message_id, direction=Direction.OUTBOUND)
    with store.transaction() as tx:  # a message received, then a duplicate of it
        received = add_inbound(tx, "in@example.com", ack=None)
        assert tx.record_acknowledgment(received.message_id, b"<eb:Acknowledgment/>")
        tx.append_event(at=T0, kind=EventKind.RECEIVED, message_id=received.message_id, direction=Direction.INBOUND)
    with store.transaction() as tx:
        assert tx.find_inbound(received.message_id) is not None
        tx.increment_duplicate(received.message_id, T0)
        entry = tx.inbox_entry(received.id)
        assert entry is not None
        tx.inbox_mark_delivered(entry.id, T0)
        tx.inbox_ack(entry.id, T0)


def _explained(store: SqlStore, recorded: Recorded) -> Iterator[tuple[str, str]]:
    """(statement, its plan as one text) for each recorded statement that reads rows."""
    engine: Engine = store._engine
    postgres = engine.dialect.name == "postgresql"
    pooled = engine.raw_connection()
    try:
        raw: Any = pooled.driver_connection
        cursor = raw.cursor()
        if postgres:
            cursor.execute("SET enable_seqscan = off")
        else:
            cursor.execute("BEGIN")
        done: set[str] = set()
        for sql, params in recorded:
            verb = sql.lstrip().split(None, 1)[0].upper()
            if verb not in ("SELECT", "UPDATE", "DELETE", "WITH") or sql in done:
                continue
            done.add(sql)
            cursor.execute(("EXPLAIN " if postgres else "EXPLAIN QUERY PLAN ") + sql, params)
            plan = [str(row[0] if postgres else row[-1]) for row in cursor.fetchall()]
            yield sql, "\n".join(plan)
        raw.rollback()
    finally:
        pooled.close()


def test_every_statement_of_a_messages_steps_finds_its_rows_by_an_index(
    sql_store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded = _record(sql_store, monkeypatch)
    _one_message_each_way(sql_store)
    plans = dict(_explained(sql_store, recorded))
    assert len(plans) >= 10, f"too few statements recorded: {list(plans)}"
    postgres = sql_store._engine.dialect.name == "postgresql"
    for sql, plan in plans.items():
        if postgres:
            assert "Seq Scan" not in plan, f"{sql}\n{plan}"
        else:
            scans = [line for line in plan.splitlines() if line.startswith("SCAN ") and "CONSTANT ROW" not in line]
            assert not scans, f"{sql}\n{plan}"


def test_the_first_copy_of_a_message_id_is_found_from_the_index_alone(
    sql_store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    with sql_store.transaction() as tx:
        add_inbound(tx, "in@example.com", ack=None)
    recorded = _record(sql_store, monkeypatch)
    with sql_store.transaction() as tx:
        assert tx.find_inbound("in@example.com") is not None
    plans = [plan for sql, plan in _explained(sql_store, recorded) if "min(" in sql]
    assert plans, "the lookup of the first stored copy was not recorded"
    postgres = sql_store._engine.dialect.name == "postgresql"
    expected = "Index Only Scan using ix_inbound_messages_message_id_id" if postgres else "USING COVERING INDEX"
    assert all(expected in plan for plan in plans), plans
