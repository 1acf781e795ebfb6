"""The duplicate-elimination lookup answered from an index alone, however many messages the store holds.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-06

Every received message looks up the first stored copy of its MessageId (``min(id) … WHERE message_id = ?``,
:data:`msh.store.sql.statements.FIRST_COPY`). The index on ``message_id`` alone found the rows, but on
PostgreSQL each match was then read from the table for its ``id``; an index on ``(message_id, id)`` answers
the lookup by an index-only scan. On SQLite the old index already held the rowid (``id``): the new one takes
the same room. It replaces ``ix_inbound_messages_message_id``, so the store keeps one index on MessageId.

Written by hand and frozen: later changes go in new revisions, never here.
"""

from __future__ import annotations

from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_index("ix_inbound_messages_message_id_id", "inbound_messages", ["message_id", "id"])
    op.drop_index("ix_inbound_messages_message_id", table_name="inbound_messages")


def downgrade() -> None:
    op.create_index("ix_inbound_messages_message_id", "inbound_messages", ["message_id"])
    op.drop_index("ix_inbound_messages_message_id_id", table_name="inbound_messages")
