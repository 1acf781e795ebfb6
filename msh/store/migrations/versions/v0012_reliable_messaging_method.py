"""Who makes a sent message reliable: the ebXML protocol or a queuing transport (ReliableMessagingMethod).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-07

``outbound_messages`` gains ``reliable_messaging_method``: ``ebXML`` (acknowledgments and resends, ebMS2 §6)
or ``Transport`` (a queuing transport delivers the message; the MSH retries only hand-offs the transport did
not accept, :mod:`msh.engine.sending`), spelt as the *Reliable Messaging* draft spells them. Every row stored
before gets ``ebXML``, the column's default: that is how they were being sent.

Downgrade refuses (and changes nothing) while a row says ``Transport``: revision 0011 would send it by the
ebXML rules, resending what the transport had accepted, and could not read its evidence
(``accepted-by-transport``, ``retry-window-ended``). Let such messages end and delete their rows first.

Written by hand and frozen: later changes go in new revisions, never here. The constraint text is spelt out
(not imported from :mod:`msh.store.schema`) so that this revision keeps doing what it did.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from msh.errors import ConfigurationError

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | None = None
depends_on: str | None = None

_COLUMN = "reliable_messaging_method"
_CHECK = "ck_outbound_messages_reliable_messaging_method"
_METHODS = "reliable_messaging_method IN ('ebXML', 'Transport')"


def upgrade() -> None:
    # On SQLite the table is rebuilt once (batch); existing rows get the default.
    with op.batch_alter_table("outbound_messages") as batch:
        batch.add_column(sa.Column(_COLUMN, sa.Text(), nullable=False, server_default="ebXML"))
        batch.create_check_constraint(op.f(_CHECK), _METHODS)


def _refuse_transport_rows() -> None:
    """ConfigurationError (before anything is changed) while a row is sent with the method Transport."""
    table = sa.table("outbound_messages", sa.column("message_id"), sa.column(_COLUMN))
    bind = op.get_bind()
    transport = table.c[_COLUMN] == "Transport"
    count = bind.execute(sa.select(sa.func.count()).select_from(table).where(transport)).scalar_one()
    if not count:
        return
    first = bind.execute(sa.select(table.c.message_id).where(transport).order_by(table.c.message_id).limit(1)).scalar()
    raise ConfigurationError(
        f"the store cannot go back to revision 0011: {count} outbound message(s) are sent with "
        f"ReliableMessagingMethod Transport, the first {first!r}; revision 0011 would resend what the queuing "
        "transport accepted. Let them end and delete those rows before downgrading. Nothing was changed."
    )


def downgrade() -> None:
    _refuse_transport_rows()
    with op.batch_alter_table("outbound_messages") as batch:
        batch.drop_constraint(op.f(_CHECK), type_="check")
        batch.drop_column(_COLUMN)
