"""The application interfaces (msh.api): exactly-once requests, inbox claims, fetched batches.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25

``app_requests`` keeps each exactly-once request an application made (SOA-Rity for HTTP): its Message-ID,
MsgCreate, the application, a fingerprint of the request and the response it got, written in the
transaction that did the work. ``inbox_claims`` keeps, per inbox entry, the lease of the application that
took it (and the batch it came in) or its rejection to the dead-letter list with a reason.
``inbox_batches`` keeps the batches fetched in one request (the HTTPR specification) and when each was confirmed;
``app_cursors`` how far each reader of the journal (a webhook) has got.
Existing rows are untouched; downgrade drops the three tables (what they held is lost: applications then
cannot repeat their requests, and leased or rejected entries are offered again).

Written by hand and frozen: later changes go in new revisions, never here.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | None = None
depends_on: str | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_TIME = sa.DateTime(timezone=True)
_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "app_requests",
        sa.Column("message_id", sa.Text(), nullable=False),
        sa.Column("application", sa.Text(), nullable=False),
        sa.Column("msg_create", _TIME, nullable=False),
        sa.Column("fingerprint", sa.Text(), nullable=False),
        sa.Column("status", sa.Integer(), nullable=False),
        sa.Column("response", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", _TIME, nullable=False),
        sa.PrimaryKeyConstraint("message_id", name="pk_app_requests"),
    )
    op.create_index("ix_app_requests_created_at", "app_requests", ["created_at"])
    op.create_table(
        "inbox_claims",
        sa.Column("inbound_id", _ID, nullable=False),
        sa.Column("application", sa.Text(), nullable=True),
        sa.Column("lease_until", _TIME, nullable=True),
        sa.Column("batch_id", sa.Text(), nullable=True),
        sa.Column("rejected_at", _TIME, nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("takes", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["inbound_id"], ["inbox.inbound_id"], name="fk_inbox_claims_inbound_id_inbox", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("inbound_id", name="pk_inbox_claims"),
    )
    op.create_table(
        "inbox_batches",
        sa.Column("batch_id", sa.Text(), nullable=False),
        sa.Column("application", sa.Text(), nullable=False),
        sa.Column("entry_ids", _JSON, nullable=False),
        sa.Column("created_at", _TIME, nullable=False),
        sa.Column("lease_until", _TIME, nullable=False),
        sa.Column("confirmed_at", _TIME, nullable=True),
        sa.PrimaryKeyConstraint("batch_id", name="pk_inbox_batches"),
    )

    op.create_table(
        "app_cursors",
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("position", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_app_cursors"),
    )


def downgrade() -> None:
    op.drop_table("app_cursors")
    op.drop_table("inbox_batches")
    op.drop_table("inbox_claims")
    op.drop_index("ix_app_requests_created_at", table_name="app_requests")
    op.drop_table("app_requests")
