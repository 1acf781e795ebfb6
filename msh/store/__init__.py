"""The durable store of the MSH: messages, payload bodies, inbox, timers and the event journal.

``open_store(url)`` gives a :class:`~msh.store.sql.SqlStore` (an SQLite file by default, PostgreSQL for
several processes over one shared state) migrated to the newest schema, or the in-memory twin
:class:`~msh.store.memory.MemoryStore` for ``memory:`` (:mod:`msh.store.factory`).

By concern: the port and its rules in :mod:`msh.store.api`; the records it hands out (a sent message's
state is the engine's :class:`~msh.engine.OutboundState`) in :mod:`msh.store.records`; the argument checks
and record changes both stores share in :mod:`msh.store.rules`, applied by the ports
(:class:`~msh.store.api.Store`, :class:`~msh.store.transaction.Transaction`); the errors in
:mod:`msh.store.errors`; the SQL
store in :mod:`msh.store.sql` (connection, transaction, statements, row mapping); the tables in
:mod:`msh.store.schema`; payload streaming in :mod:`msh.store.blobs`; group commit in
:mod:`msh.store.writer`; prepared statements in :mod:`msh.store.prepared`; versioned migrations in
:mod:`msh.store.migrations`.
"""

from __future__ import annotations

from msh.store.api import Store
from msh.store.errors import DuplicateMessage, StoreError, TransactionLost, UnknownBlob, UnknownMessage
from msh.store.factory import open_store
from msh.store.memory import MemoryStore
from msh.store.records import (
    Clock,
    Direction,
    Event,
    InboundMessage,
    InboxEntry,
    InboxState,
    OutboundKind,
    OutboundMessage,
    Timer,
    TimerKind,
    utc_now,
)
from msh.store.sql import SqlStore
from msh.store.transaction import Transaction

__all__ = [
    "Clock",
    "Direction",
    "DuplicateMessage",
    "Event",
    "InboundMessage",
    "InboxEntry",
    "InboxState",
    "MemoryStore",
    "OutboundKind",
    "OutboundMessage",
    "SqlStore",
    "Store",
    "StoreError",
    "Timer",
    "TimerKind",
    "Transaction",
    "TransactionLost",
    "UnknownBlob",
    "UnknownMessage",
    "open_store",
    "utc_now",
]
