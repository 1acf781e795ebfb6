"""The operator's listing: sent messages found newest first by an index, not by sorting the table.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-28

``msh messages`` and the console list sent messages newest first (``created_at``, then MessageId) a page at
a time (:mod:`msh.store.listing`); without an index every page sorted the whole ``outbound_messages`` table.
Received messages needed none (``inbound_messages.received_at`` is indexed since revision 0001).

Written by hand and frozen: later changes go in new revisions, never here.
"""

from __future__ import annotations

from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_index("ix_outbound_messages_created_at", "outbound_messages", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_outbound_messages_created_at", table_name="outbound_messages")
