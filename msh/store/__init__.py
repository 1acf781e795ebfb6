"""The durable store of the MSH: messages, payload bodies, inbox, timers and the event journal.

``Store.open(url)`` gives a :class:`~msh.store.sql.SqlStore` (an SQLite file by default, PostgreSQL for
several processes over one shared state) migrated to the newest schema, or the in-memory twin
:class:`~msh.store.memory.MemoryStore` for ``memory:``. The rules every store follows are in
:mod:`msh.store.api`; the SQL particulars in :mod:`msh.store.sql`; the tables in :mod:`msh.store.schema`;
payload streaming in :mod:`msh.store.blobs`; versioned migrations in :mod:`msh.store.migrations`.
"""

from __future__ import annotations

from msh.store.api import (
    Clock,
    Direction,
    DuplicateMessage,
    Event,
    InboundMessage,
    InboxEntry,
    InboxState,
    OutboundMessage,
    OutboundState,
    OutboundStatus,
    ReliabilityParameters,
    Store,
    StoreError,
    Timer,
    Transaction,
    UnknownBlob,
    UnknownMessage,
    utc_now,
)
from msh.store.memory import MemoryStore
from msh.store.sql import SqlStore

__all__ = [
    "Clock",
    "Direction",
    "DuplicateMessage",
    "Event",
    "InboundMessage",
    "InboxEntry",
    "InboxState",
    "MemoryStore",
    "OutboundMessage",
    "OutboundState",
    "OutboundStatus",
    "ReliabilityParameters",
    "SqlStore",
    "Store",
    "StoreError",
    "Timer",
    "Transaction",
    "UnknownBlob",
    "UnknownMessage",
    "utc_now",
]
