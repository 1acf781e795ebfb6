"""The journal as files: the Parquet columns every exported or generated journal has (its ``kind`` column holds
the names of :class:`msh.store.events.EventKind`, the one list of event kinds).

A journal folder is a Parquet dataset partitioned by day (``day=YYYY-MM-DD/part-….parquet``); each row is
one event of the store's journal (:class:`msh.store.records.Event`) with ``source``, the PartyId of the
MSH whose journal it is (so the journals of several MSHs can be read together, for reconciliation).
"""

from __future__ import annotations

from typing import Final

import pyarrow as pa

__all__ = ["SCHEMA", "day_of"]

_TIME = pa.timestamp("us", tz="UTC")

SCHEMA: Final = pa.schema(
    [
        pa.field("source", pa.string(), nullable=False),
        pa.field("event_id", pa.int64(), nullable=False),
        pa.field("at", _TIME, nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("message_id", pa.string()),
        pa.field("direction", pa.string()),
        pa.field("role", pa.string()),
        pa.field("cpa_id", pa.string()),
        pa.field("from_party", pa.string()),
        pa.field("to_party", pa.string()),
        pa.field("service", pa.string()),
        pa.field("action", pa.string()),
        pa.field("conversation_id", pa.string()),
        pa.field("size", pa.int64()),
        pa.field("attempt", pa.int32()),
        pa.field("severity", pa.string()),
        pa.field("cause", pa.string()),
        pa.field("deadline", _TIME),
        pa.field("detail", pa.string()),
    ]
)
"""The columns of a journal file (the ``day`` partition column comes from the folder name)."""


def day_of(table: pa.Table) -> pa.ChunkedArray:
    """The UTC day of each event of ``table`` (dates: the partition value is their ISO form)."""
    # UTC wall time, then its date (a cast; formatting each time as text costs fifty times more).
    return table.column("at").cast(pa.timestamp("us")).cast(pa.date32())
