"""MessageOrder (ebMS2 §9): sequence numbers sent and received, held inbox entries, the sequences' records.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-28

* ``outbound_messages.sequence_number`` and ``inbound_messages.sequence_number``: the SequenceNumber of a
  message sent or received with MessageOrder (NULL for the others, and for every row stored before); the
  received ones are indexed by their sequence (CPAId, From party, ConversationId, number).
* ``sequence_counters``: the next SequenceNumber of each conversation we send in with MessageOrder, and
  whether its sequence broke; ``order_positions``: where each sequence we receive stands (the number the
  next message must have, how many are held and since when, whether it broke, when its last message was
  offered to the application).
* An inbox entry may now be ``held`` (stored and acknowledged, not yet offered: its turn has not come) or
  ``abandoned`` (never offered: a message before it never arrived). The state's check constraint of
  revision 0001 was named twice over (``ck_inbox_ck_inbox_state``); the new one gets the name the naming
  convention gives (``ck_inbox_state``).

Downgrade refuses (and changes nothing) while an inbox entry is held or abandoned, which revision 0007
cannot hold: let held messages be released or abandoned and delete the abandoned entries first. It drops
the sequences' records (a conversation then starts again at 0 with Reset).

Written by hand and frozen: later changes go in new revisions, never here.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from msh.errors import ConfigurationError

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | None = None
depends_on: str | None = None

_OLD_STATE_CHECK = "ck_inbox_ck_inbox_state"  # as revision 0001 left it
_OLD_STATES = "state IN ('new', 'delivered-to-app', 'acknowledged-by-app')"
_STATE_CHECK = "ck_inbox_state"
_STATES = "state IN ('new', 'delivered-to-app', 'acknowledged-by-app', 'held', 'abandoned')"
_SEQUENCE_INDEX = "ix_inbound_messages_sequence"
_TIME = sa.DateTime(timezone=True)


_CLAIMS = sa.table(
    "inbox_claims",
    *(
        sa.column(name)
        for name in ("inbound_id", "application", "lease_until", "batch_id", "rejected_at", "reason", "takes")
    ),
)


def _new_inbox_check(old: str, new: str, states: str) -> None:
    """Replace the inbox's state constraint. SQLite rebuilds the table to do it, and dropping the old table
    there deletes the rows of ``inbox_claims`` (ON DELETE CASCADE; foreign keys cannot be turned off inside
    the migration's transaction): they are read before and put back after, unchanged."""
    bind = op.get_bind()
    saved = [dict(row) for row in bind.execute(sa.select(_CLAIMS)).mappings()] if bind.dialect.name == "sqlite" else []
    with op.batch_alter_table("inbox") as batch:
        batch.drop_constraint(op.f(old), type_="check")
        batch.create_check_constraint(op.f(new), states)
    if saved:
        bind.execute(_CLAIMS.insert(), saved)


def upgrade() -> None:
    # Plain ALTER TABLE ADD COLUMN on both databases: the message tables are never rebuilt (on SQLite a
    # rebuild of inbound_messages would delete, by cascade, the inbox entries that refer to it).
    op.add_column("outbound_messages", sa.Column("sequence_number", sa.Integer(), nullable=True))
    op.add_column("inbound_messages", sa.Column("sequence_number", sa.Integer(), nullable=True))
    op.create_index(_SEQUENCE_INDEX, "inbound_messages", ["cpaid", "from_party", "conversation_id", "sequence_number"])
    _new_inbox_check(_OLD_STATE_CHECK, _STATE_CHECK, _STATES)
    op.create_table(
        "sequence_counters",
        sa.Column("cpaid", sa.Text(), nullable=False),
        sa.Column("conversation_id", sa.Text(), nullable=False),
        sa.Column("next_number", sa.Integer(), nullable=False),
        sa.Column("broken", sa.Boolean(), nullable=False),
        sa.Column("restarted", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("cpaid", "conversation_id", name=op.f("pk_sequence_counters")),
    )
    op.create_table(
        "order_positions",
        sa.Column("cpaid", sa.Text(), nullable=False),
        sa.Column("from_party", sa.Text(), nullable=False),
        sa.Column("conversation_id", sa.Text(), nullable=False),
        sa.Column("next_number", sa.Integer(), nullable=True),
        sa.Column("held", sa.Integer(), nullable=False),
        sa.Column("gap_since", _TIME, nullable=True),
        sa.Column("broken", sa.Boolean(), nullable=False),
        sa.Column("offered_at", _TIME, nullable=True),
        sa.PrimaryKeyConstraint("cpaid", "from_party", "conversation_id", name=op.f("pk_order_positions")),
    )


def _refuse_entries_0007_cannot_hold() -> None:
    """ConfigurationError (before anything is changed) while an inbox entry is held or abandoned."""
    inbox = sa.table("inbox", sa.column("message_id"), sa.column("state"))
    blocking = inbox.c.state.in_(("held", "abandoned"))
    bind = op.get_bind()
    count = bind.execute(sa.select(sa.func.count()).select_from(inbox).where(blocking)).scalar_one()
    if not count:
        return
    first = bind.execute(sa.select(inbox.c.message_id).where(blocking).order_by(inbox.c.message_id)).first()
    assert first is not None
    raise ConfigurationError(
        f"the store cannot go back to revision 0007: {count} inbox entr(y/ies) are held or abandoned (MessageOrder), "
        f"the first {first[0]!r}; revision 0007 knows neither state. Let held messages be released or abandoned and "
        "delete the abandoned entries before downgrading. Nothing was changed."
    )


def downgrade() -> None:
    _refuse_entries_0007_cannot_hold()
    op.drop_table("order_positions")
    op.drop_table("sequence_counters")
    _new_inbox_check(_STATE_CHECK, _OLD_STATE_CHECK, _OLD_STATES)
    # ALTER TABLE DROP COLUMN (SQLite has it since 3.35; the columns are in no constraint, and the index goes
    # first): no rebuild, so nothing refers to a dropped table.
    op.drop_index(_SEQUENCE_INDEX, table_name="inbound_messages")
    op.drop_column("inbound_messages", "sequence_number")
    op.drop_column("outbound_messages", "sequence_number")
