"""The first schema: blobs, outbound and inbound messages, inbox, timers, events.

Revision ID: 0001
Revises:
Create Date: 2025-01-01

Written by hand and frozen: later changes go in new revisions, never here. The types are spelt out
(not imported from :mod:`msh.store.schema`) so that this revision keeps creating what it created.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_TIME = sa.DateTime(timezone=True)
_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "blobs",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("chunk_count", sa.Integer(), nullable=False),
        sa.Column("created_at", _TIME, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_blobs"),
    )
    op.create_table(
        "blob_chunks",
        sa.Column("blob_id", _ID, nullable=False),
        sa.Column("seq", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(["blob_id"], ["blobs.id"], name="fk_blob_chunks_blob_id_blobs", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("blob_id", "seq", name="pk_blob_chunks"),
    )
    op.create_table(
        "outbound_messages",
        sa.Column("message_id", sa.Text(), nullable=False),
        sa.Column("cpaid", sa.Text(), nullable=False),
        sa.Column("conversation_id", sa.Text(), nullable=False),
        sa.Column("service", sa.Text(), nullable=False),
        sa.Column("action", sa.Text(), nullable=False),
        sa.Column("from_party", sa.Text(), nullable=True),
        sa.Column("to_party", sa.Text(), nullable=False),
        sa.Column("endpoint_url", sa.Text(), nullable=False),
        sa.Column("content_type", sa.Text(), nullable=False),
        sa.Column("body_blob_id", _ID, nullable=False),
        sa.Column("retries", sa.Integer(), nullable=False),
        sa.Column("retry_interval_s", sa.Float(), nullable=False),
        sa.Column("first_resend_timeout_s", sa.Float(), nullable=False),
        sa.Column("persist_duration_s", sa.Float(), nullable=True),
        sa.Column("time_to_live", _TIME, nullable=True),
        sa.Column("ack_requested", sa.Boolean(), nullable=False),
        sa.Column("ack_actor", sa.Text(), nullable=True),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("first_sent_at", _TIME, nullable=True),
        sa.Column("reached_peer", sa.Boolean(), nullable=False),
        sa.Column("next_due_at", _TIME, nullable=True),
        sa.Column("failure_code", sa.Text(), nullable=True),
        sa.Column("failure_severity", sa.Text(), nullable=True),
        sa.Column("failure_description", sa.Text(), nullable=True),
        sa.Column("created_at", _TIME, nullable=False),
        sa.Column("updated_at", _TIME, nullable=False),
        sa.CheckConstraint(
            "status IN ('pending', 'awaiting-ack', 'delivered', 'failed')", name="ck_outbound_messages_status"
        ),
        sa.CheckConstraint("failure_severity IN ('Error', 'Warning')", name="ck_outbound_messages_failure_severity"),
        sa.ForeignKeyConstraint(["body_blob_id"], ["blobs.id"], name="fk_outbound_messages_body_blob_id_blobs"),
        sa.PrimaryKeyConstraint("message_id", name="pk_outbound_messages"),
    )
    op.create_index("ix_outbound_messages_status", "outbound_messages", ["status"])
    op.create_index("ix_outbound_messages_conversation_id", "outbound_messages", ["conversation_id"])
    op.create_table(
        "inbound_messages",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("message_id", sa.Text(), nullable=False),
        sa.Column("duplicate_elimination", sa.Boolean(), nullable=False),
        sa.Column("from_party", sa.Text(), nullable=False),
        sa.Column("to_party", sa.Text(), nullable=True),
        sa.Column("cpaid", sa.Text(), nullable=False),
        sa.Column("conversation_id", sa.Text(), nullable=False),
        sa.Column("service", sa.Text(), nullable=False),
        sa.Column("action", sa.Text(), nullable=False),
        sa.Column("received_at", _TIME, nullable=False),
        sa.Column("content_type", sa.Text(), nullable=False),
        sa.Column("body_blob_id", _ID, nullable=False),
        sa.Column("ack_envelope", sa.LargeBinary(), nullable=True),
        sa.Column("duplicate_count", sa.Integer(), nullable=False),
        sa.Column("last_duplicate_at", _TIME, nullable=True),
        sa.ForeignKeyConstraint(["body_blob_id"], ["blobs.id"], name="fk_inbound_messages_body_blob_id_blobs"),
        sa.PrimaryKeyConstraint("id", name="pk_inbound_messages"),
    )
    op.create_index("ix_inbound_messages_message_id", "inbound_messages", ["message_id"])
    op.create_index("ix_inbound_messages_received_at", "inbound_messages", ["received_at"])
    op.create_index(
        "uq_inbound_messages_message_id_de",
        "inbound_messages",
        ["message_id"],
        unique=True,
        sqlite_where=sa.text("duplicate_elimination"),
        postgresql_where=sa.text("duplicate_elimination"),
    )
    op.create_table(
        "inbox",
        sa.Column("inbound_id", _ID, nullable=False),
        sa.Column("message_id", sa.Text(), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("received_at", _TIME, nullable=False),
        sa.Column("delivered_at", _TIME, nullable=True),
        sa.Column("acknowledged_at", _TIME, nullable=True),
        sa.CheckConstraint("state IN ('new', 'delivered-to-app', 'acknowledged-by-app')", name="ck_inbox_state"),
        sa.ForeignKeyConstraint(
            ["inbound_id"],
            ["inbound_messages.id"],
            name="fk_inbox_inbound_id_inbound_messages",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("inbound_id", name="pk_inbox"),
    )
    op.create_index("ix_inbox_state_received_at", "inbox", ["state", "received_at"])
    op.create_index("ix_inbox_message_id", "inbox", ["message_id"])
    op.create_table(
        "timers",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("message_id", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("due_at", _TIME, nullable=False),
        sa.Column("lease_owner", sa.Text(), nullable=True),
        sa.Column("lease_until", _TIME, nullable=True),
        sa.Column("created_at", _TIME, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_timers"),
    )
    op.create_index("ix_timers_due_at", "timers", ["due_at"])
    op.create_index("ix_timers_message_id", "timers", ["message_id"])
    op.create_table(
        "events",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("at", _TIME, nullable=False),
        sa.Column("message_id", sa.Text(), nullable=True),
        sa.Column("direction", sa.Text(), nullable=True),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("detail", _JSON, nullable=False),
        sa.CheckConstraint("direction IN ('outbound', 'inbound')", name="ck_events_direction"),
        sa.PrimaryKeyConstraint("id", name="pk_events"),
    )
    op.create_index("ix_events_at", "events", ["at"])
    op.create_index("ix_events_message_id", "events", ["message_id"])


def downgrade() -> None:
    for table in ("events", "timers", "inbox", "inbound_messages", "outbound_messages", "blob_chunks", "blobs"):
        op.drop_table(table)
