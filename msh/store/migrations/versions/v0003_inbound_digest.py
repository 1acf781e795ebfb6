"""The content digest of each received message (ebMS2 §6.5.6: a duplicate must be the identical message).

Revision ID: 0003
Revises: 0002
Create Date: 2025-06-01

``inbound_messages.content_digest`` holds :func:`msh.ebms.digest.content_digest` of the stored copy, so
that a later copy of the same MessageId with other content is refused instead of acknowledged. Rows stored
before this revision keep NULL: the receiving engine takes any later copy of them as identical, as it did
before. Written by hand and frozen, like every revision.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.add_column("inbound_messages", sa.Column("content_digest", sa.Text(), nullable=True))


def downgrade() -> None:
    # SQLite has DROP COLUMN since 3.35; the column is in no index or constraint.
    op.drop_column("inbound_messages", "content_digest")
