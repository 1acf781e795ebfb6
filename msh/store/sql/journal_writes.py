"""Writing a SQL transaction's journal events together (:class:`~msh.store.journal_steps.JournalSteps`).

An event appended in a transaction is kept (:attr:`~msh.store.transaction.Transaction.appended`) and
written with the others in one ``executemany``, with their ids, before the transaction commits or reads the
journal: one statement for the events of a whole group commit (:mod:`msh.store.writer`) instead of one per
event. The ids follow the order the events were appended: SQLite's rule for a new rowid (the largest plus
one; every writing transaction holds the write lock from its ``BEGIN IMMEDIATE``, so no other writer can take
one meanwhile), or PostgreSQL's sequence of the table. The events of a savepoint rolled back are dropped with
it, and those written inside it are written again (:meth:`SqlTransaction.savepoint`).

What could make the database refuse an event is refused or made storable when it is appended
(:func:`msh.store.rules.detail`), as a refusal at the commit would fail every unit of the group commit.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Connection

from msh.store import records
from msh.store.schema import events
from msh.store.sql import rows
from msh.store.sql.statements import EVENT_WRITE_KEYS

__all__ = ["SqlJournalWrites"]


class SqlJournalWrites:
    """A mixin of :class:`~msh.store.sql.transaction.SqlTransaction`, which gives the connection, the
    store, its statements and ``_written``: how many of ``appended`` are written."""

    _conn: Connection
    _store: Any
    _readonly: bool
    _written: int
    appended: list[records.Event]

    def _run(self, name: str, values: Any, *, keys: tuple[str, ...] | None = None) -> Any:
        raise NotImplementedError  # pragma: no cover - SqlTransaction's own comes first

    def _driver_cursor(self) -> Any:
        raise NotImplementedError  # pragma: no cover - SqlTransaction's own comes first

    def _add_event(self, event: records.Event) -> None:
        """Written by :meth:`write_events`, with the others of this transaction (see the module docs)."""

    def write_events(self) -> None:
        """Write the events appended and not yet written, in one statement, and give them their ids.

        Called before the transaction commits and before it reads the journal."""
        pending = self.appended[self._written :]
        if not pending or self._readonly:
            return
        cursor = self._run("event-next-id", {"b_count": len(pending)})
        try:
            found = [int(row[0]) for row in cursor.fetchall()]
        except self._store.driver_error as exc:
            raise self._store.failure(exc) from exc
        # SQLite answers the first id (the rest follow it); PostgreSQL one id per event, in order.
        ids = found if len(found) == len(pending) else list(range(found[0], found[0] + len(pending)))
        prepared = self._store.prepared("event-insert", EVENT_WRITE_KEYS)
        bind = prepared.binder(rows.EVENT_ROW_NAMES)
        params = [bind(rows.event_row(event, i)) for event, i in zip(pending, ids, strict=True)]
        try:
            self._driver_cursor().executemany(prepared.sql, params)
        except self._store.driver_error as exc:
            raise self._store.failure(exc) from exc
        start = self._written
        for offset, (event, event_id) in enumerate(zip(pending, ids, strict=True)):
            self.appended[start + offset] = event.with_id(event_id)
        self._written = len(self.appended)

    def _events_after(self, after_id: int, limit: int) -> list[records.Event]:
        self.write_events()
        statement = select(events).where(events.c.id > after_id).order_by(events.c.id).limit(limit)
        return [rows.event_from_row(row) for row in self._conn.execute(statement).mappings()]

    def _message_events(self, message_id: str, direction: records.Direction | None, limit: int) -> list[records.Event]:
        self.write_events()
        statement = select(events).where(events.c.message_id == message_id)
        if direction is not None:
            statement = statement.where(events.c.direction == direction.value)
        newest = statement.order_by(events.c.id.desc()).limit(limit)
        return [rows.event_from_row(row) for row in reversed(self._conn.execute(newest).mappings().all())]
