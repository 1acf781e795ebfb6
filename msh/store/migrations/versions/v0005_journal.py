"""The journal's typed columns: role, agreement, parties, service, action, conversation, size, attempt,
severity, cause and retry deadline of every event.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25

``events`` gains the columns the delivery reports group and count by (:mod:`msh.store.journal`), all
nullable: ``role`` (``sender``, ``receiver`` or ``intermediary``), ``cpa_id``, ``from_party``,
``to_party``, ``service``, ``action``, ``conversation_id``, ``size`` (the stored body's bytes),
``attempt``, ``severity``, ``cause`` and ``deadline`` (when the agreement's retry window of a submitted
message ends). An index on ``(kind, at)`` serves the reports' scans by kind.

The events stored before are brought forward in batches of 1,000: the message facts from the message's
stored row (the outbound row, else the first stored copy received), the attempt, severity and cause from
the event's detail; where neither says (a message since deleted) the column stays empty.

Downgrade drops the columns (the detail and the message rows keep what they were read from).

Written by hand and frozen: later changes go in new revisions, never here. The readings of the detail
are spelt out here (not imported from :mod:`msh.store.journal`) so that this revision keeps doing what
it did.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import op

from cpa.duration import XsDuration

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | None = None
depends_on: str | None = None

_ROLE_CHECK = "ck_events_role"
_ROLES = "role IN ('sender', 'receiver', 'intermediary')"
_KIND_INDEX = "ix_events_kind_at"
_BATCH = 1000
_TEXT_COLUMNS = ("role", "cpa_id", "from_party", "to_party", "service", "action", "conversation_id")
_COLUMNS = (*_TEXT_COLUMNS, "size", "attempt", "severity", "cause", "deadline")


def _new_columns() -> list[sa.Column[Any]]:
    return [
        *(sa.Column(name, sa.Text(), nullable=True) for name in _TEXT_COLUMNS),
        sa.Column("size", sa.BigInteger(), nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=True),
        sa.Column("severity", sa.Text(), nullable=True),
        sa.Column("cause", sa.Text(), nullable=True),
        sa.Column("deadline", sa.DateTime(timezone=True), nullable=True),
    ]


def upgrade() -> None:
    with op.batch_alter_table("events") as batch:
        for column in _new_columns():
            batch.add_column(column)
        batch.create_check_constraint(op.f(_ROLE_CHECK), _ROLES)
        batch.create_index(_KIND_INDEX, ["kind", "at"])
    _backfill()


def downgrade() -> None:
    with op.batch_alter_table("events") as batch:
        batch.drop_index(_KIND_INDEX)
        batch.drop_constraint(op.f(_ROLE_CHECK), type_="check")
        for name in _COLUMNS:
            batch.drop_column(name)


# ------------------------------------------------------------------------------------------------ backfill


def _detail(raw: object) -> Mapping[str, object]:
    if isinstance(raw, Mapping):
        return raw
    if isinstance(raw, str | bytes):
        try:
            value = json.loads(raw)
        except ValueError:
            return {}
        return value if isinstance(value, Mapping) else {}
    return {}


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _errors(detail: Mapping[str, object]) -> list[Mapping[str, object]]:
    raw = detail.get("errors")
    return [e for e in raw if isinstance(e, Mapping)] if isinstance(raw, list) else []


def _first_issue(detail: Mapping[str, object]) -> tuple[str, str] | None:
    issues = detail.get("issues")
    if not isinstance(issues, list) or not issues or not isinstance(issues[0], str):
        return None
    words = issues[0].split(" ", 2)
    return (words[0], words[1].rstrip(":")) if len(words) >= 2 else None


def _severity(detail: Mapping[str, object]) -> str | None:
    found = _text(detail.get("severity"))
    if found is None:
        severities = [_text(e.get("severity")) for e in _errors(detail)]
        found = "Error" if "Error" in severities else next((s for s in severities if s), None)
    if found is None:
        issue = _first_issue(detail)
        found = None if issue is None else issue[0]
    return found


def _cause(detail: Mapping[str, object]) -> str | None:
    found = _text(detail.get("errorCode"))
    errors = _errors(detail)
    if found is None and errors:
        chosen = next((e for e in errors if e.get("severity") == "Error"), errors[0])
        found = _text(chosen.get("errorCode"))
    if found is None:
        found = _text(detail.get("error"))
    if found is None:
        issue = _first_issue(detail)
        found = None if issue is None else issue[1]
    return found


def _attempt(detail: Mapping[str, object]) -> int | None:
    value = detail.get("attempt")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _aware(value: object) -> datetime | None:
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if not isinstance(value, datetime):
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _deadline(row: sa.RowMapping) -> datetime | None:
    """ebMS2 §6.4.3: the first resend after first_resend_timeout, then ``retries`` intervals, within the
    persist duration and the TimeToLive."""
    start = _aware(row["created_at"])
    if start is None:
        return None
    end = XsDuration.parse(row["first_resend_timeout"]).add_to_or_latest(start)
    if row["retries"]:
        end = (XsDuration.parse(row["retry_interval"]) * int(row["retries"])).add_to_or_latest(end)
    if row["persist_duration"]:
        end = min(end, XsDuration.parse(row["persist_duration"]).add_to_or_latest(start))
    ttl = _aware(row["time_to_live"])
    return min(end, ttl) if ttl is not None else end


def _facts(bind: sa.Connection, message_id: str, direction: str | None) -> dict[str, Any]:
    outbound = sa.text(
        "SELECT o.cpaid, o.from_party, o.to_party, o.service, o.action, o.conversation_id, o.kind, o.created_at,"
        " o.retries, o.retry_interval, o.first_resend_timeout, o.persist_duration, o.time_to_live, b.size"
        " FROM outbound_messages o LEFT JOIN blobs b ON b.id = o.body_blob_id WHERE o.message_id = :m"
    )
    inbound = sa.text(
        "SELECT i.cpaid, i.from_party, i.to_party, i.service, i.action, i.conversation_id, b.size"
        " FROM inbound_messages i LEFT JOIN blobs b ON b.id = i.body_blob_id WHERE i.message_id = :m"
        " ORDER BY i.id LIMIT 1"
    )
    order = ("inbound", "outbound") if direction == "inbound" else ("outbound", "inbound")
    for way in order:
        row = bind.execute(outbound if way == "outbound" else inbound, {"m": message_id}).mappings().first()
        if row is None:
            continue
        facts: dict[str, Any] = {
            "cpa_id": row["cpaid"],
            "from_party": row["from_party"],
            "to_party": row["to_party"],
            "service": row["service"],
            "action": row["action"],
            "conversation_id": row["conversation_id"],
            "size": row["size"],
        }
        if way == "outbound":
            facts["role"] = "intermediary" if row["kind"] == "forward" else "sender"
            facts["deadline"] = _deadline(row)
        else:
            facts["role"] = "receiver"
        return facts
    return {}


def _backfill() -> None:
    bind = op.get_bind()
    events = sa.table(
        "events",
        sa.column("id", sa.Integer()),
        sa.column("kind", sa.Text()),
        sa.column("message_id", sa.Text()),
        sa.column("direction", sa.Text()),
        sa.column("detail", sa.Text()),
        *(sa.column(name) for name in _COLUMNS if name != "deadline"),
        sa.column("deadline", sa.DateTime(timezone=True)),
    )
    update = (
        sa.update(events)
        .where(events.c.id == sa.bindparam("b_id"))
        .values({name: sa.bindparam(f"b_{name}") for name in _COLUMNS})
    )
    last = 0
    known: dict[tuple[str, str | None], dict[str, Any]] = {}
    while True:
        batch = bind.execute(
            sa.select(events.c.id, events.c.kind, events.c.message_id, events.c.direction, events.c.detail)
            .where(events.c.id > last)
            .order_by(events.c.id)
            .limit(_BATCH)
        ).all()
        if not batch:
            return
        changes = []
        for event_id, kind, message_id, direction, raw in batch:
            detail = _detail(raw)
            facts: dict[str, Any] = {}
            if message_id is not None:
                key = (message_id, direction)
                if key not in known:
                    known[key] = _facts(bind, message_id, direction)
                facts = known[key]
            values = {f"b_{name}": facts.get(name) for name in _COLUMNS}
            values["b_deadline"] = facts.get("deadline") if kind == "submitted" else None
            values["b_attempt"] = _attempt(detail)
            values["b_severity"] = _severity(detail)
            values["b_cause"] = _cause(detail)
            values["b_id"] = event_id
            if values["b_deadline"] is not None and bind.dialect.name == "sqlite":
                values["b_deadline"] = values["b_deadline"].replace(tzinfo=None)
            changes.append(values)
        bind.execute(update, changes)
        last = batch[-1][0]
        if len(known) > 10 * _BATCH:
            known.clear()
