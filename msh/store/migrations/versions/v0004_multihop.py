"""Multi-hop messaging (ebMS2 §10): the kind of an outbound row, its hop acknowledgment, status 'forwarded'.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23

``outbound_messages`` gains ``kind`` (``own``: a message the application submitted; ``forward``: a message
received for another party that this MSH stores and forwards as an intermediary; ``signal``: a signal of
this MSH sent hop by hop) and ``hop_ack`` (the message also asks the next MSH for an acknowledgment, ebMS2
§10.1.3); its status may now be ``forwarded`` (the next MSH acknowledged it, the end-to-end acknowledgment
is awaited). Rows stored before are the application's own messages sent without a hop acknowledgment:
``kind`` 'own', ``hop_ack`` false (the columns' defaults). ``(kind, status)`` is indexed for listings, and
``body_blob_id`` on both message tables, so that a replaced body is known unused without reading every row.

The check constraints of revision 0001 were named twice over (``ck_outbound_messages_ck_outbound_messages_
status``: Alembic applied the naming convention of :mod:`msh.store.schema` to names already complete);
the status constraint replaced here gets the name the convention gives (``ck_outbound_messages_status``),
as does the new ``ck_outbound_messages_kind``. Names are spelt out whole with ``op.f`` (used as given).

Downgrade refuses (and changes nothing) while a row is ``forwarded`` or is not the application's own,
which revision 0003 cannot hold: let forwarded messages end and delete the other rows first. It drops
``hop_ack`` as it is (revision 0003 keeps no hop acknowledgment: such a message then awaits the end-to-end
acknowledgment only; its stored bytes still ask for both).

Written by hand and frozen: later changes go in new revisions, never here. The constraint texts are
spelt out (not imported from :mod:`msh.store.schema`) so that this revision keeps doing what it did.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from msh.errors import ConfigurationError

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | None = None
depends_on: str | None = None

_OLD_STATUS_CHECK = "ck_outbound_messages_ck_outbound_messages_status"  # as revision 0001 left it
_OLD_STATUSES = "status IN ('pending', 'awaiting-ack', 'delivered', 'failed')"
_STATUS_CHECK = "ck_outbound_messages_status"
_STATUSES = "status IN ('pending', 'awaiting-ack', 'forwarded', 'delivered', 'failed')"
_KIND_CHECK = "ck_outbound_messages_kind"
_KINDS = "kind IN ('own', 'forward', 'signal')"
_KIND_INDEX = "ix_outbound_messages_kind_status"
_OUTBOUND_BLOB_INDEX = "ix_outbound_messages_body_blob_id"
_INBOUND_BLOB_INDEX = "ix_inbound_messages_body_blob_id"


def upgrade() -> None:
    # On SQLite the table is rebuilt once (batch); existing rows take the new columns' defaults.
    with op.batch_alter_table("outbound_messages") as batch:
        # ebMS2 §10.1.3: an AckRequested aimed at the next MSH as well (the engine's Reliability.hop_ack).
        batch.add_column(sa.Column("hop_ack", sa.Boolean(), nullable=False, server_default=sa.false()))
        # ebMS2 §10: whose message the row is; every row stored so far is the application's own.
        batch.add_column(sa.Column("kind", sa.Text(), nullable=False, server_default="own"))
        batch.drop_constraint(op.f(_OLD_STATUS_CHECK), type_="check")
        batch.create_check_constraint(op.f(_STATUS_CHECK), _STATUSES)
        batch.create_check_constraint(op.f(_KIND_CHECK), _KINDS)
        batch.create_index(_KIND_INDEX, ["kind", "status"])
        batch.create_index(_OUTBOUND_BLOB_INDEX, ["body_blob_id"])
    op.create_index(_INBOUND_BLOB_INDEX, "inbound_messages", ["body_blob_id"])


def _refuse_rows_0003_cannot_hold() -> None:
    """ConfigurationError (before anything is changed) while a row is forwarded or not the application's own."""
    table = sa.table("outbound_messages", sa.column("message_id"), sa.column("status"), sa.column("kind"))
    blocking = sa.or_(table.c.status == "forwarded", table.c.kind != "own")
    bind = op.get_bind()
    count = bind.execute(sa.select(sa.func.count()).select_from(table).where(blocking)).scalar_one()
    if not count:
        return
    first = bind.execute(
        sa.select(table.c.message_id, table.c.kind, table.c.status).where(blocking).order_by(table.c.message_id)
    ).first()
    assert first is not None
    raise ConfigurationError(
        f"the store cannot go back to revision 0003: {count} outbound message(s) cannot be kept there, the first "
        f"{first[0]!r} (kind {first[1]}, status {first[2]}); revision 0003 knows neither the status 'forwarded' "
        "(an intermediary acknowledged the message, the end-to-end acknowledgment is awaited) nor messages other "
        "than the application's own (kind 'forward': forwarded as an intermediary; kind 'signal': signals sent "
        "hop by hop). Let forwarded messages end (delivered or failed) and delete the rows of kind 'forward' "
        "and 'signal' before downgrading. Nothing was changed."
    )


def downgrade() -> None:
    _refuse_rows_0003_cannot_hold()
    op.drop_index(_INBOUND_BLOB_INDEX, table_name="inbound_messages")
    with op.batch_alter_table("outbound_messages") as batch:
        batch.drop_index(_OUTBOUND_BLOB_INDEX)
        batch.drop_index(_KIND_INDEX)
        batch.drop_constraint(op.f(_KIND_CHECK), type_="check")
        batch.drop_constraint(op.f(_STATUS_CHECK), type_="check")
        batch.create_check_constraint(op.f(_OLD_STATUS_CHECK), _OLD_STATUSES)
        batch.drop_column("kind")
        batch.drop_column("hop_ack")
