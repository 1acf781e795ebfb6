"""The duplicate-elimination lookup answered from an index alone; the MessageOrder index only where it counts.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-06

Every received message looks up the first stored copy of its MessageId (``min(id) … WHERE message_id = ?``,
:data:`msh.store.sql.statements.FIRST_COPY`). The index on ``message_id`` alone found the rows, but on
PostgreSQL each match was then read from the table for its ``id``; an index on ``(message_id, id)`` answers
the lookup by an index-only scan. On SQLite the old index already held the rowid (``id``): the new one takes
the same room. It replaces ``ix_inbound_messages_message_id``, so the store keeps one index on MessageId.

``ix_inbound_messages_sequence`` (revision 0008) finds the held messages of a sequence received with
MessageOrder; the query asks for ``sequence_number IS NOT NULL``, so the index now holds only those rows
(partial), instead of an entry of four text columns for every message received (about 200 bytes each).

Written by hand and frozen: later changes go in new revisions, never here.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | None = None
depends_on: str | None = None


_SEQUENCE_INDEX = "ix_inbound_messages_sequence"
_SEQUENCE_COLUMNS = ["cpaid", "from_party", "conversation_id", "sequence_number"]
_ORDERED = "sequence_number IS NOT NULL"


def upgrade() -> None:
    op.create_index("ix_inbound_messages_message_id_id", "inbound_messages", ["message_id", "id"])
    op.drop_index("ix_inbound_messages_message_id", table_name="inbound_messages")
    op.drop_index(_SEQUENCE_INDEX, table_name="inbound_messages")
    op.create_index(
        _SEQUENCE_INDEX,
        "inbound_messages",
        _SEQUENCE_COLUMNS,
        sqlite_where=sa.text(_ORDERED),
        postgresql_where=sa.text(_ORDERED),
    )


def downgrade() -> None:
    op.drop_index(_SEQUENCE_INDEX, table_name="inbound_messages")
    op.create_index(_SEQUENCE_INDEX, "inbound_messages", _SEQUENCE_COLUMNS)
    op.create_index("ix_inbound_messages_message_id", "inbound_messages", ["message_id"])
    op.drop_index("ix_inbound_messages_message_id_id", table_name="inbound_messages")
