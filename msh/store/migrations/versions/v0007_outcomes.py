"""Truthful outcomes: status 'sent', the evidence of each status, refused attempts, receipt problems, outages.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-27

``outbound_messages`` changes as the sending state machine did (:mod:`msh.engine.outcomes`):

* its status may now be ``sent`` (handed over, no acknowledgment by design: ebMS2 §6.6 rows 3, 4, 7, 8);
* ``evidence`` says what the status rests on (``to-party-acknowledgment``, ``hop-acknowledgment``, ...);
  rows stored before keep NULL (their status was reached before evidence was recorded);
* ``reached_peer`` (an HTTP answer came) gives way to ``refused_attempts``: how many of the attempts are
  known never to have left (connection refused, an HTTP refusal); the message was transmitted (ebMS2
  §6.5.7: a DeliveryFailure is then a Warning) unless all were. Rows stored before get 0: whatever
  happened to their attempts, each may have arrived (the cautious reading: a later DeliveryFailure says
  Warning, "may have been delivered", rather than an Error that could be untrue);
* ``receipt_problem``: why the signed receipt that delivered the message does not prove what was sent;
* ``unreachable_since``: since when every attempt failed without leaving (for the status question
  before a resend after an outage, ebMS2 §7).

Downgrade refuses (and changes nothing) while a row is ``sent``, which revision 0006 cannot hold: let such
rows be deleted first (revision 0006 would have called them delivered, which they were not known to be).
It sets ``reached_peer`` for the rows with an attempt that was not refused.

Written by hand and frozen: later changes go in new revisions, never here. The constraint texts are spelt
out (not imported from :mod:`msh.store.schema`) so that this revision keeps doing what it did.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from msh.errors import ConfigurationError

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | None = None
depends_on: str | None = None

_STATUS_CHECK = "ck_outbound_messages_status"
_OLD_STATUSES = "status IN ('pending', 'awaiting-ack', 'forwarded', 'delivered', 'failed')"
_STATUSES = "status IN ('pending', 'awaiting-ack', 'forwarded', 'delivered', 'sent', 'failed')"
_TIME = sa.DateTime(timezone=True)


def upgrade() -> None:
    # On SQLite the table is rebuilt once (batch); existing rows keep their values.
    with op.batch_alter_table("outbound_messages") as batch:
        batch.drop_column("reached_peer")
        batch.add_column(sa.Column("refused_attempts", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("evidence", sa.Text(), nullable=True))
        batch.add_column(sa.Column("receipt_problem", sa.Text(), nullable=True))
        batch.add_column(sa.Column("unreachable_since", _TIME, nullable=True))
        batch.drop_constraint(op.f(_STATUS_CHECK), type_="check")
        batch.create_check_constraint(op.f(_STATUS_CHECK), _STATUSES)


def _refuse_sent_rows() -> None:
    """ConfigurationError (before anything is changed) while a row has the status 'sent'."""
    table = sa.table("outbound_messages", sa.column("message_id"), sa.column("status"))
    bind = op.get_bind()
    count = bind.execute(sa.select(sa.func.count()).select_from(table).where(table.c.status == "sent")).scalar_one()
    if not count:
        return
    first = bind.execute(
        sa.select(table.c.message_id).where(table.c.status == "sent").order_by(table.c.message_id)
    ).scalar_one()
    raise ConfigurationError(
        f"the store cannot go back to revision 0006: {count} outbound message(s) have the status 'sent', the first "
        f"{first!r}; revision 0006 knows no such status (it called such messages delivered, which nothing showed). "
        "Delete those rows before downgrading. Nothing was changed."
    )


def downgrade() -> None:
    _refuse_sent_rows()
    with op.batch_alter_table("outbound_messages") as batch:
        batch.drop_constraint(op.f(_STATUS_CHECK), type_="check")
        batch.create_check_constraint(op.f(_STATUS_CHECK), _OLD_STATUSES)
        batch.drop_column("unreachable_since")
        batch.drop_column("receipt_problem")
        batch.drop_column("evidence")
        batch.add_column(sa.Column("reached_peer", sa.Boolean(), nullable=False, server_default=sa.false()))
    table = sa.table(
        "outbound_messages", sa.column("reached_peer"), sa.column("attempts"), sa.column("refused_attempts")
    )
    op.get_bind().execute(sa.update(table).values(reached_peer=table.c.attempts > table.c.refused_attempts))
    with op.batch_alter_table("outbound_messages") as batch:
        batch.drop_column("refused_attempts")
