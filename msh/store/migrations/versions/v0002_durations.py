"""Durations as xs:duration text: an agreement's RetryInterval and PersistDuration may count months.

Revision ID: 0002
Revises: 0001
Create Date: 2026-01-01

``outbound_messages`` kept ``retry_interval_s``, ``first_resend_timeout_s`` and ``persist_duration_s`` as
floats of seconds, which cannot hold ``P1M`` (a month has no fixed number of seconds, XML Schema Part 2
§3.2.6.2). They become ``retry_interval``, ``first_resend_timeout`` and ``persist_duration``: the canonical
xs:duration text (``PT30S``, ``P1DT2H``, ``P1M``). Existing rows are carried forward (30.0 seconds becomes
``PT30S``; fractions to the microsecond).

Downgrade turns the text back into seconds; it refuses (and changes nothing) while a row keeps a duration
that counts months, which revision 0001 cannot hold: finish or delete those messages first.

Written by hand and frozen: later changes go in new revisions, never here. The conversions are spelt out
here (not imported from the project) so that this revision keeps doing what it did.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

import sqlalchemy as sa
from alembic import op
from elementpath.datatypes import Duration

from msh.errors import ConfigurationError

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None

_COLUMNS = (
    ("retry_interval_s", "retry_interval", False),
    ("first_resend_timeout_s", "first_resend_timeout", False),
    ("persist_duration_s", "persist_duration", True),
)
_US = 1_000_000


def _duration_text(seconds: float) -> str:
    """The canonical xs:duration of a number of seconds >= 0 (``PT0S``, ``PT1M30.5S``, ``P2DT3H``)."""
    micro = int((Decimal(repr(float(seconds))) * _US).to_integral_value())
    days, micro = divmod(micro, 86_400 * _US)
    hours, micro = divmod(micro, 3_600 * _US)
    minutes, micro = divmod(micro, 60 * _US)
    whole, fraction = divmod(micro, _US)
    time = (f"{hours}H" if hours else "") + (f"{minutes}M" if minutes else "")
    if whole or fraction:
        time += (f"{whole}.{fraction:06d}".rstrip("0") if fraction else str(whole)) + "S"
    text = "P" + (f"{days}D" if days else "") + (f"T{time}" if time else "")
    return "PT0S" if text == "P" else text


def _seconds(text: str, message_id: str, column: str) -> float:  # the downgrade's conversion
    """The seconds of the xs:duration ``text``; refused when it counts months (no fixed length)."""
    value = Duration.fromstring(text)
    if value.months:
        raise ConfigurationError(
            f"the store cannot go back to revision 0001: outbound message {message_id!r} keeps {column} "
            f"{text}, which counts months, and revision 0001 keeps durations in seconds only; let such "
            "messages finish (or delete them) before downgrading. Nothing was changed."
        )
    return float(value.seconds)


def _convert(
    columns: tuple[tuple[str, str, bool], ...],
    convert: Callable[[Any, str, str], Any],
    new_type: sa.types.TypeEngine[Any],
    old_type: sa.types.TypeEngine[Any],
) -> None:
    """For each (old, new, nullable) of ``columns``: add ``new`` beside ``old``, fill it from ``old`` with
    ``convert(value, message_id, old)``, then drop ``old`` (on SQLite the table is rebuilt once, in batch)."""
    with op.batch_alter_table("outbound_messages") as batch:
        for _, new, _ in columns:
            batch.add_column(sa.Column(new, new_type, nullable=True))
    table = sa.table(
        "outbound_messages",
        sa.column("message_id", sa.Text()),
        *(sa.column(old, old_type) for old, _, _ in columns),
        *(sa.column(new, new_type) for _, new, _ in columns),
    )
    bind = op.get_bind()
    olds = [old for old, _, _ in columns]
    rows = bind.execute(sa.select(table.c.message_id, *(table.c[o] for o in olds))).all()
    if rows:
        update = table.update().where(table.c.message_id == sa.bindparam("id_"))
        update = update.values({new: sa.bindparam(f"{new}_") for _, new, _ in columns})
        bind.execute(
            update,
            [
                {
                    "id_": row[0],
                    **{
                        f"{new}_": None if value is None else convert(value, row[0], old)
                        for (old, new, _), value in zip(columns, row[1:], strict=True)
                    },
                }
                for row in rows
            ],
        )
    with op.batch_alter_table("outbound_messages") as batch:
        for old, new, nullable in columns:
            if not nullable:
                batch.alter_column(new, existing_type=new_type, nullable=False)
            batch.drop_column(old)


def upgrade() -> None:
    _convert(_COLUMNS, lambda value, _id, _old: _duration_text(value), sa.Text(), sa.Float())


def downgrade() -> None:
    back = tuple((new, old, nullable) for old, new, nullable in _COLUMNS)
    _convert(back, _seconds, sa.Float(), sa.Text())
